"""A ``benchmark`` stand-in for tests of what is computed from a timing: it calls the function
once (so its side effects happen) and reports a fixed time, so the expected rates can be worked
out by hand and written as numbers, instead of restating the code's own formula."""

from __future__ import annotations

import numpy as np

from course.timing import Timing


def fixed_benchmark(seconds: float):
    def bench(fn, *args, device="cpu", warmup=1, repeat=7, budget_s=None, name=None, blas_threads=None, **kw):
        fn(*args, **kw)
        return Timing(samples=np.full(3, float(seconds)), device=str(device), name=name or "fixed", threads=1)
    return bench
