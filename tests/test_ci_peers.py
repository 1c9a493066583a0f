"""In CI every optional peer and engine is installed, so no comparison with it skips silently.

A learner may go without PyTorch (the comparisons with it then skip and say so); CI may not:
under ``CI=true`` a missing peer is a failure here.
"""

from __future__ import annotations

import importlib
import os

import pytest

PEERS = {
    "torch": "PyTorch: the autograd oracle of lesson 01 and the timed peer of lessons 01-05",
    "mpi4py": "MPI for Python with MPICH: lesson 06's real distributed engine",
    "nbgrader": "nbgrader (the instructor extra): the release and autograde test of the exercises",
    "jupyter_server_mathjax": "the book's local MathJax copy (the notebooks extra), so no page needs the network",
}


@pytest.mark.skipif(os.environ.get("CI", "").lower() != "true", reason="only CI must have every peer")
@pytest.mark.parametrize("module", sorted(PEERS))
def test_ci_has_every_peer_installed(module):
    try:
        importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} is missing in CI ({PEERS[module]}): {exc}. .ci/run installs it.")
