#!/usr/bin/env bash
# The course's whole GPU run in one command, for a short lease on a GPU machine (see tools/gpu_run.py):
#   tools/gpu_run.sh OUTDIR              on the GPU machine: at most 7 minutes, two files in OUTDIR
#   tools/gpu_run.sh --dry-run OUTDIR    here, on a CPU: the same steps on the stand-in GPU, tiny sizes
# PYTHON chooses the interpreter (default: python3, the one that holds PyTorch and CuPy on the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" tools/gpu_run.py "$@"
