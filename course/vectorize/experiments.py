"""Lesson 02's experiments for ``python -m course report``: the elementwise ladder,
ReLU's bandwidth against size, and the matrix product at each rung."""

from __future__ import annotations

from ..report import experiment
from ..results import ResultSet
from .plots import bandwidth_sweep_figure, ladder_figure, matmul_figure
from .timing import ladder, matmul_ladder, relu_bandwidth, torch_available


@experiment("vectorize_ladder", title="ReLU at every rung: loop, lanes, numpy, threads, GPU", lesson="02")
def vectorize_ladder(devices, quick, progress):
    """The same ReLU at each rung on one input, each checked equal to numpy; elements per
    second, speedup over the Python loop, and effective bandwidth against the copy limit."""
    n = 2**18 if quick else 2**24
    return ladder("relu", n=n, devices=devices, budget_s=0.3 if quick else 2.0, repeat=5 if quick else 9,
                  progress=progress)


@vectorize_ladder.plot
def _(rs, references):
    return ladder_figure(rs, references)


@experiment("vectorize_bandwidth", title="ReLU's effective bandwidth against size (out= vs new array)",
            lesson="02")
def vectorize_bandwidth(devices, quick, progress):
    """ReLU writing into a preallocated array (out=) and allocating a new one, as GB/s and as a
    fraction of the copy bandwidth measured in the same run, from cache-sized to memory-sized arrays."""
    sizes = [2**k for k in ((14, 18, 22) if quick else range(12, 28, 2))]
    rs = ResultSet("vectorize_bandwidth", params={"sizes": sizes, "dtype": "float32", "op": "relu"})
    jobs = [(d, n) for d in devices for n in sizes]
    for d, n in (progress(jobs, total=len(jobs), desc="relu bandwidth") if progress else jobs):
        r = relu_bandwidth(n, device=d, rounds=1 if quick else 3, repeat=3 if quick else 7,
                           budget_s=0.3 if quick else 3.0)
        for kind in ("copy", "out", "new", "threads", "vector"):
            if f"{kind}_gb_per_s" in r:
                rs.add(device=d, n=n, dtype="float32", kind=kind, gb_per_s=r[f"{kind}_gb_per_s"],
                       copy_fraction=r.get(f"{kind}_fraction", 1.0))
    return rs


@vectorize_bandwidth.plot
def _(rs, references):
    return bandwidth_sweep_figure(rs, references)


@experiment("vectorize_matmul", title="The matrix product at each rung, in GFLOP/s", lesson="02")
def vectorize_matmul(devices, quick, progress):
    """Triple loop, one dot per output, BLAS (and cuBLAS on a GPU) in float32 and float16;
    bfloat16 through PyTorch where it is installed. Each result checked against float64."""
    dtypes = ("float32", "float16") + (("bfloat16",) if torch_available() else ())
    return matmul_ladder(64 if quick else 384, dtypes=dtypes, devices=devices, repeat=3 if quick else 7,
                         budget_s=0.3 if quick else 2.0, progress=progress)


@vectorize_matmul.plot
def _(rs, references):
    return matmul_figure(rs, references)
