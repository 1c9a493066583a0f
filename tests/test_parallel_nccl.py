"""Lesson 06 on several GPUs: the course's ring over NCCL (cupyx.distributed) against NCCL's own
all_reduce.  Needs two or more GPUs; skipped with the reason otherwise, never faked."""

from __future__ import annotations

import pytest

from course.errors import GPUUnavailableError
from course.parallel.nccl import gpus_answering, nccl_ring_check, nccl_unavailable_reason


@pytest.mark.gpu
@pytest.mark.skipif(gpus_answering() < 2, reason=f"needs 2+ GPUs: {nccl_unavailable_reason(2)}")
def test_the_course_ring_on_nccl_equals_nccls_all_reduce():
    out = nccl_ring_check(min(gpus_answering(), 4), nbytes=(2**12, 2**20), repeat=3, progress=None)
    assert all(c["max_rel_error"] < 1e-5 for c in out["checks"])
    assert {r["algorithm"] for r in out["records"]} == {"ring (course, NCCL send/recv)", "NCCL all_reduce"}


def test_fewer_than_two_gpus_is_a_clear_error_not_a_fake_run():
    if gpus_answering() >= 2:
        pytest.skip("two or more GPUs answer here")
    with pytest.raises(GPUUnavailableError, match="GPU"):
        nccl_ring_check(2, progress=None)
