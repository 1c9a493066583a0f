#!/usr/bin/env bash
# Fetch, here, the wheels a GPU machine lacks, for tools/gpu_run.sh to install there without a network:
#   tools/gpu_wheels.sh NAME==VERSION ...     (default: nothing; tools/gpu_probe.py lists what is missing)
# They land in .whl/ (git-ignored). Name that folder in the device call's `carry`; the probe installs
# .whl/*.whl with `pip install --no-index --no-deps --target /tmp/course-site` when a package is missing.
# The GPU image runs Python 3.12 on x86-64; --no-deps fetches none of a wheel's needs: name each.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "name the packages, e.g. tools/gpu_wheels.sh threadpoolctl==3.5.0"; exit 0; }
mkdir -p .whl
"${PYTHON:-python3}" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$@"
ls -l .whl
