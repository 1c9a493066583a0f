"""Lesson 06 on real MPI processes (mpiexec -n 2 and -n 3): the ring, the data-parallel step and the
pipeline against their oracles, and the launcher's clear errors (no MPI, too many ranks, a rank
that dies, a run that hangs)."""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec

import numpy as np
import pytest

import course.parallel.mpi as mpi
from course.errors import BadInputError
from course.parallel import MPIError, mpi_unavailable_reason, pipeline_runs, ring_check, run_mpi, train_data_parallel
from course.parallel.timing import allreduce_sweep, data_parallel_timing

needs_mpi = pytest.mark.skipif(mpi_unavailable_reason() is not None,
                               reason=f"MPI cannot start here: {mpi_unavailable_reason()}")


@needs_mpi
@pytest.mark.parametrize("p", [2, 3])
def test_the_ring_and_the_naive_all_reduce_equal_mpis_own_allreduce(p):
    checks = ring_check(p, [1, 2, 7, 1000, 4099], progress=None)
    assert len(checks) == 10
    for c in checks:
        assert c["max_rel_error"] < 1e-12, c
        assert c["identical_on_every_rank"], c


@needs_mpi
@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize("mode", ["ring", "ddp"])
def test_data_parallel_training_equals_single_process_training_to_1e_12(p, mode):
    out = train_data_parallel(p, sizes=(6, 12, 12, 4), batch=10, steps=4, lr=0.2, mode=mode, progress=None)
    assert out["max_abs_diff"] < 1e-12
    assert out["ranks_agree"]


@needs_mpi
@pytest.mark.parametrize("p", [2, 3])
def test_the_pipeline_gives_the_gradients_of_unsplit_training(p):
    rs = pipeline_runs(p, ms=(1, 3, 5), sizes=(8, 16, 16, 16, 16, 16, 4), batch=20, repeat=1, progress=None)
    assert [r["m"] for r in rs.records] == [1, 3, 5]
    for r in rs.records:
        assert r["max_abs_diff"] < 1e-12
        stages = {e["stage"] for e in r["events"]}
        assert stages == set(range(p))
        assert len(r["events"]) == 2 * p * r["m"]
        assert 0 <= r["bubble_measured"] < 1 and r["bubble_formula"] == (p - 1) / (r["m"] + p - 1)


@needs_mpi
def test_timing_runs_return_records_for_every_algorithm_and_say_when_oversubscribed():
    rs = allreduce_sweep((2,), [2**10, 2**14], repeat=1, progress=None)
    assert {r["algorithm"] for r in rs.records} == {"ring (course)", "naive (course)", "MPI Allreduce"}
    assert all(r["median_s"] > 0 and r["p"] == 2 for r in rs.records)
    rs = data_parallel_timing((2,), sizes=(16, 32, 32, 4), batch=16, repeat=1, bucket_bytes=1024, progress=None)
    parts = {r["part"] for r in rs.records}
    assert {"compute", "communicate (ring)"} <= parts and len(parts) == 4


@needs_mpi
def test_progress_lines_reach_the_caller():
    lines = []
    ring_check(2, [3], progress=lines.append)
    assert lines and "2 ranks" in lines[0]


def test_bad_rank_counts_are_refused_before_anything_starts():
    with pytest.raises(BadInputError, match="p .* >= 1"):
        run_mpi("ring_check", 0)
    with pytest.raises(BadInputError, match="more than this machine"):
        run_mpi("ring_check", mpi.max_ranks() + 1)
    with pytest.raises(BadInputError, match="unknown MPI task"):
        run_mpi("no such task", 2)


def test_missing_mpiexec_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(mpi, "find_mpiexec", lambda: None)
    monkeypatch.setattr(mpi, "find_spec", lambda name: object())
    with pytest.raises(MPIError, match="pip install mpich mpi4py"):
        run_mpi("ring_check", 2, {"lengths": [3]})


def test_missing_mpi4py_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(mpi, "find_spec", lambda name: None)
    assert "mpi4py is not installed" in mpi.mpi_unavailable_reason()


@pytest.mark.parametrize("text, family", [
    ("MPICH Version:      4.3.0\nMPICH Release date: ...", "MPICH"),
    ("HYDRA build details:\n    Version: 4.3.0", "MPICH"),
    ("MVAPICH2 Version 2.3.7", "MPICH"),
    ("Intel(R) MPI Library 2021.13 for Linux* OS", "MPICH"),
    ("Open MPI v4.1.6, package: Debian OpenMPI", "Open MPI"),
    ("mpiexec (OpenRTE) 4.1.2", "Open MPI"),
    ("mpiexec (Open MPI) 5.0.5", "Open MPI"),
    ("Microsoft MPI Startup Program", None),
])
def test_mpi_family_reads_version_texts(text, family):
    assert mpi.mpi_family(text) == family


@pytest.mark.skipif(find_spec("mpi4py") is None or os.name != "posix", reason="needs mpi4py and a shell")
def test_an_mpiexec_of_another_mpi_than_mpi4py_loads_is_refused_up_front(monkeypatch, tmp_path):
    library, _ = mpi._families(sys.executable)         # the family of the library mpi4py loads here
    if library is None:
        pytest.skip("the MPI library mpi4py loads here names no known family")
    other = "mpiexec (OpenRTE) 4.1.2" if library == "MPICH" else "HYDRA build details: Version: 4.3.0"
    fake = tmp_path / "mpiexec"
    fake.write_text(f"#!/bin/sh\necho '{other}'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(mpi, "find_mpiexec", lambda: fake)
    reason = mpi.mpi_unavailable_reason()
    assert reason is not None and f"loads {library}" in reason and str(fake) in reason
    with pytest.raises(MPIError, match="Use one MPI for both"):
        run_mpi("ring_check", 2, {"lengths": [3]}, progress=None)


def test_a_ranks_error_line_is_shown_even_when_the_last_lines_miss_it():
    # two ranks failing at once interleave their tracebacks, and Abort can cut one short
    log = ["rank 1: BadInputError: lengths must be a list\n", "Traceback (most recent call last):\n"]
    log += ['  File "worker.py", line 230, in main\n'] * 20
    msg = mpi._tail(log)
    assert "The error: rank 1: BadInputError: lengths must be a list" in msg
    assert msg.count("BadInputError") == 1 and "Last lines from the ranks" in msg


@needs_mpi
def test_a_rank_that_fails_gives_an_error_with_its_message():
    with pytest.raises(MPIError, match="failed") as info:
        run_mpi("ring_check", 2, {"lengths": "not a list of numbers"}, progress=None)
    assert "Error" in str(info.value)


@needs_mpi
def test_a_run_past_its_timeout_is_killed_with_all_its_ranks():
    with pytest.raises(MPIError, match="did not finish within"):
        run_mpi("sleep", 2, {"seconds": 60}, timeout_s=3, progress=None)


def test_bad_parameters_of_the_runs_are_refused():
    with pytest.raises(BadInputError, match="message sizes"):
        allreduce_sweep((2,), [4], progress=None)
    with pytest.raises(BadInputError, match="at least one layer"):
        pipeline_runs(9, ms=(1,), progress=None)
    with pytest.raises(BadInputError, match="mode"):
        train_data_parallel(2, mode="bogus", progress=None)
    with pytest.raises(BadInputError, match="N|length"):
        ring_check(2, [0], progress=None)


def test_find_mpiexec_looks_next_to_python_first():
    found = mpi.find_mpiexec()
    if found is not None:
        assert found.name.startswith("mpiexec") and np.all(found.exists())


@needs_mpi
def test_a_rank_that_dies_ends_the_run_with_a_clear_error_not_a_hang():
    with pytest.raises(MPIError, match="raised an error or died"):
        run_mpi("sleep", 3, {"seconds": 0.5, "die": 1}, timeout_s=180, progress=None)


def learner_chunks(rank, step, p):
    """A right answer to exercise 1, as a learner would write it."""
    return (rank - step) % p, (rank - 1 - step) % p


def learner_wrong_chunks(rank, step, p):
    return (rank + step) % p, (rank + step + 1) % p


def learner_stub(rank, step, p):
    raise NotImplementedError


@needs_mpi
def test_the_learners_own_schedule_runs_the_ring_on_the_ranks():
    for c in ring_check(3, [10, 1001], chunks=learner_chunks, progress=None):
        assert c["algorithm"] == "ring (yours)" and c["max_rel_error"] < 1e-12


@needs_mpi
def test_a_wrong_schedule_fails_fast_or_differs_and_a_stub_never_starts_mpi():
    try:
        checks = ring_check(3, [10, 1001], chunks=learner_wrong_chunks, timeout_s=180, progress=None)
    except MPIError as exc:
        assert "did not finish" not in str(exc)           # one failing rank ends them all at once
    else:
        assert any(c["max_rel_error"] > 1e-6 for c in checks)
    with pytest.raises(NotImplementedError):
        ring_check(3, [10], chunks=learner_stub, progress=None)
