"""Lesson 00: what this machine has, and a first live CPU-vs-GPU experiment.

* :func:`hardware_summary` puts the CPU and each GPU side by side: cores and
  SIMD lanes against multiprocessors and FP32 lanes, memory, and memory
  bandwidth as the vendor states it (GPUs) next to what a copy achieves here.
* :func:`copy_bandwidth` measures the bandwidth a large array copy reaches: the
  physical limit for every operation that only streams data (lessons 02-04).
* :func:`matmul_sweep` times a square matrix product against its size on each
  device and reports seconds and GFLOP/s.

>>> bw = copy_bandwidth("cpu", nbytes=2**20, repeat=3)
>>> bw["bytes_per_s"] > 0
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, Optional, Real, Seed, Whole, arguments
from ..devices import cpu_info, get_xp, gpu_info, resolve_devices, synchronize, validate_device
from ..errors import BadInputError, whole_number
from ..limits import require_fits
from ..results import ResultSet
from ..timing import benchmark

__all__ = ["VENDOR_BANDWIDTH_GBPS", "VENDOR_GPUS", "vendor_bandwidth", "vendor_gpus_html", "copy_bandwidth",
           "matmul_flops", "time_matmul", "matmul_sweep", "hardware_summary", "hardware_html",
           "DEFAULT_SIZES"]

#: Peak memory bandwidth in GB/s as the vendors' data sheets state it (HBM/GDDR).
VENDOR_BANDWIDTH_GBPS = {
    "Tesla T4": 320, "Tesla V100": 900, "Tesla P100": 732, "A10G": 600, "L4": 300,
    "A100-SXM4-40GB": 1555, "A100-SXM4-80GB": 2039, "A100-PCIE-40GB": 1555, "A100 80GB PCIe": 1935,
    "H100 80GB HBM3": 3350, "H100 PCIe": 2000, "H100 NVL": 3900, "H200": 4800, "RTX 2070": 448,
    "RTX 2080 Ti": 616, "RTX 3090": 936, "RTX 4090": 1008, "L40S": 864,
}

#: Data-sheet figures for GPUs learners meet (Colab's T4, the cloud's A100/H100/H200, the
#: BPPSA paper's RTX 2080 Ti): SMs, FP32 lanes, memory (GB) and bandwidth (GB/s).  These are
#: the vendors' numbers, not measurements, and are labelled so wherever they are shown.
VENDOR_GPUS = (
    {"name": "NVIDIA Tesla T4", "sms": 40, "fp32_lanes": 2560, "memory_gb": 16, "bandwidth_gbps": 320},
    {"name": "NVIDIA GeForce RTX 2080 Ti", "sms": 68, "fp32_lanes": 4352, "memory_gb": 11,
     "bandwidth_gbps": 616},
    {"name": "NVIDIA A100 SXM4 80GB", "sms": 108, "fp32_lanes": 6912, "memory_gb": 80,
     "bandwidth_gbps": 2039},
    {"name": "NVIDIA H100 SXM5", "sms": 132, "fp32_lanes": 16896, "memory_gb": 80, "bandwidth_gbps": 3350},
    {"name": "NVIDIA H200 SXM", "sms": 132, "fp32_lanes": 16896, "memory_gb": 141, "bandwidth_gbps": 4800},
)

DEFAULT_SIZES = tuple(2 ** k for k in range(4, 11))  # 16 ... 1024


def vendor_bandwidth(name: str) -> float | None:
    """The data-sheet memory bandwidth (bytes/s) of the GPU called ``name``, or None if not listed.

    A key matches only as a whole word of the name, longest key first, so that ``"L4"`` is
    not taken for an ``"NVIDIA L40S"``.

    >>> vendor_bandwidth("NVIDIA L40S") / 1e9, vendor_bandwidth("NVIDIA L4") / 1e9
    (864.0, 300.0)
    """
    if not isinstance(name, str):
        raise BadInputError(f"name must be a device's name, a string such as 'NVIDIA H100'; got {name!r:.80}")
    for key in sorted(VENDOR_BANDWIDTH_GBPS, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", name, flags=re.IGNORECASE):
            return VENDOR_BANDWIDTH_GBPS[key] * 1e9
    return None


@arguments(device=Given(validate_device),
           nbytes=Whole(lo=4, hint="at least 4 bytes (one float32 value), e.g. 2**26"),
           threads=Whole(hi=1024, hint="the threads that copy slices at once"))
def copy_bandwidth(device: Any = "cpu", nbytes: int = 2**27, repeat: int = 7,
                   budget_s: float | None = 2.0, threads: int = 1) -> dict:
    """Measure the bandwidth of copying one array into another on ``device``.

    Each copy reads ``nbytes`` and writes ``nbytes``, so the rate counts
    ``2 * nbytes`` per copy, the convention of the STREAM benchmark's "Copy".
    The destination is preallocated (``numpy.copyto`` / CuPy's ``copyto``), so no
    allocation is timed.  On the CPU, ``threads`` > 1 splits the copy into that many
    slices copied at once by a pool of threads (numpy releases the GIL while it copies):
    one core rarely saturates the memory, so the machine's memory roof needs all of them.
    Returns ``{"bytes_per_s", "gb_per_s", "nbytes", "threads", "timing"}``.

    >>> copy_bandwidth(nbytes=2**16, repeat=1, threads=2)["threads"]
    2
    """
    dev = device
    threads = 1 if dev == "gpu" else threads
    require_fits(2 * nbytes, dev, what=f"two arrays of {nbytes / 2**20:.0f} MiB")
    xp = get_xp(dev)
    n = nbytes // 4
    src = xp.ones(n, dtype=xp.float32)
    dst = xp.empty_like(src)
    if threads == 1:
        t = benchmark(xp.copyto, dst, src, device=dev, warmup=2, repeat=repeat, budget_s=budget_s, name="copy")
    else:
        from concurrent.futures import ThreadPoolExecutor

        cuts = np.linspace(0, n, threads + 1).astype(int)
        pairs = [(dst[a:b], src[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
        with ThreadPoolExecutor(threads) as pool:
            def copy_all() -> None:
                for f in [pool.submit(np.copyto, d, s_) for d, s_ in pairs]:
                    f.result()

            t = benchmark(copy_all, device=dev, warmup=2, repeat=repeat, budget_s=budget_s,
                          name=f"copy on {threads} threads")
    del src, dst
    rate = 2 * n * 4 / t.median
    return {"device": dev, "bytes_per_s": rate, "gb_per_s": rate / 1e9, "nbytes": n * 4, "threads": threads,
            "timing": t}


def matmul_flops(n: int) -> float:
    """Floating-point operations of an n×n by n×n product: n² outputs × n multiply-adds × 2.

    >>> matmul_flops(10)
    2000.0
    """
    return 2.0 * whole_number("n", n, hint="the matrix size n (n×n matrices)") ** 3


@arguments(n=Whole(hint="the matrix size n (n×n matrices)"), device=Given(validate_device),
           dtype=Dtype(device="device"), seed=Seed())
def time_matmul(n: int, dtype: Any = "float32", device: Any = "cpu", repeat: int = 5,
                budget_s: float | None = 0.5, seed: int = 0) -> dict:
    """Time ``a @ b`` for two random n×n matrices on ``device``: a record
    (:meth:`course.timing.Timing.as_record`) with n, dtype and ``gflops`` (2n³ flops per call)."""
    dev, dt = device, dtype
    if dt.kind != "f":
        raise BadInputError(f"time_matmul times float dtypes (float16, float32, float64), got {dt.name}")
    require_fits(3 * int(n) ** 2 * dt.itemsize, dev, what=f"three {n}×{n} {dt.name} matrices")
    xp = get_xp(dev)
    rng = seed
    a = xp.asarray(rng.standard_normal((n, n)).astype(dt))
    b = xp.asarray(rng.standard_normal((n, n)).astype(dt))
    out = xp.empty((n, n), dtype=dt)
    synchronize(dev)
    t = benchmark(xp.matmul, a, b, out=out, device=dev, warmup=2, repeat=repeat, budget_s=budget_s,
                  name=f"matmul {n}")
    return t.as_record(n=n, dtype=dt.name, gflops=matmul_flops(n) / t.median / 1e9)


@arguments(dtype=Dtype())
def matmul_sweep(sizes: Sequence[int] = DEFAULT_SIZES, dtype: Any = "float32",
                 devices: Sequence[str] | None = None, repeat: int = 5,
                 budget_s: float | None = 0.25, progress: Callable | None = None) -> ResultSet:
    """Matrix product time and GFLOP/s against size on each device.

    ``devices`` defaults to the CPU plus the GPU when one answers.  Each size gets
    at most ``budget_s`` seconds of measuring.
    """
    if isinstance(sizes, (int, np.integer)):
        sizes = [sizes]
    sizes = [whole_number("every size in sizes", s, hint=f"got sizes={sizes!r}") for s in sizes]
    if not sizes:
        raise BadInputError("matmul_sweep needs at least one size")
    devs = resolve_devices(devices or None)
    dt = dtype
    rs = ResultSet("matmul_sweep", params={"sizes": sizes, "dtype": dt.name, "devices": devs,
                                           "repeat": repeat, "budget_s": budget_s})
    jobs = [(d, n) for d in devs for n in sizes]
    it = progress(jobs, total=len(jobs), desc="matmul sweep") if progress else jobs
    for d, n in it:
        rs.add(**time_matmul(n, dt, d, repeat=repeat, budget_s=budget_s))
    return rs


def hardware_summary() -> list[dict]:
    """One row per device: cores and lanes, clock, memory, bandwidth (vendor figure and source)."""
    c = cpu_info()
    rows = [{
        "device": "CPU", "name": c["model"],
        "cores": f"{c['logical_cores']} logical cores",
        "lanes": (f"{c['float32_lanes']} float32 lanes per SIMD instruction "
                  f"({c['simd_width_bits']}-bit)" if c["float32_lanes"] else "unknown SIMD width"),
        "parallel_lanes": (c["logical_cores"] or 1) * (c["float32_lanes"] or 1),
        "memory_gib": (c["memory_bytes"] or 0) / 2**30,
        "vendor_bandwidth_gbps": None,
        "simd_used": ", ".join(c["simd_used"]),
    }]
    for g in gpu_info():
        bw = g.get("memory_bandwidth_bytes_per_s") or vendor_bandwidth(g["name"])
        rows.append({
            "device": f"GPU {g['index']}", "name": g["name"],
            "cores": f"{g['multiprocessors']} streaming multiprocessors",
            "lanes": (f"{g['fp32_lanes_per_sm']} FP32 lanes per SM, warps of {g['warp_size']}"
                      if g.get("fp32_lanes_per_sm") else f"warps of {g['warp_size']}"),
            "parallel_lanes": g.get("fp32_lanes") or g["multiprocessors"] * 64,
            "memory_gib": g["memory_bytes"] / 2**30,
            "vendor_bandwidth_gbps": bw / 1e9 if bw else None,
            "simd_used": f"compute capability {g['compute_capability']}",
        })
    return rows


@arguments(measured_cpu_gbps=Optional(Real(above=0, hint="GB/s measured here")))
def hardware_html(rows: list[dict] | None = None, measured_cpu_gbps: float | None = None,
                  measured_how: str = "a copy") -> str:
    """The summary as an HTML table for the notebook; a CPU without a vendor figure shows
    ``measured_cpu_gbps``, said to be measured here by ``measured_how`` (which copy gave it)."""
    import html

    rows = rows or hardware_summary()
    head = ("<tr><th>device</th><th>name</th><th>cores</th><th>lanes</th>"
            "<th>float32 lanes in flight</th><th>memory</th><th>bandwidth</th></tr>")
    body = []
    for r in rows:
        if r["vendor_bandwidth_gbps"]:
            bw = f"{r['vendor_bandwidth_gbps']:.0f} GB/s (vendor figure)"
        elif r["device"] == "CPU" and measured_cpu_gbps:
            bw = f"{measured_cpu_gbps:.1f} GB/s (measured here: {measured_how}; no vendor figure known)"
        else:
            bw = "not known"
        body.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            r["device"], r["name"], r["cores"], r["lanes"], f"{r['parallel_lanes']:,}",
            f"{r['memory_gib']:.1f} GiB", bw)) + "</tr>")
    return f"<table>{head}{''.join(body)}</table>"


def vendor_gpus_html() -> str:
    """The data-sheet table of common GPUs, next to this machine's CPU lanes."""
    import html

    c = cpu_info()
    cpu_lanes = (c["logical_cores"] or 1) * (c["float32_lanes"] or 1)
    rows = "".join(
        f"<tr><td>{html.escape(g['name'])}</td><td>{g['sms']}</td><td>{g['fp32_lanes']:,}</td>"
        f"<td>{g['fp32_lanes'] / cpu_lanes:,.0f}×</td><td>{g['memory_gb']} GB</td>"
        f"<td>{g['bandwidth_gbps']:,} GB/s</td></tr>" for g in VENDOR_GPUS)
    return ("<table><tr><th>GPU (vendor data sheet, not measured)</th><th>SMs</th><th>FP32 lanes</th>"
            f"<th>lanes vs this CPU's {cpu_lanes}</th><th>memory</th><th>bandwidth</th></tr>{rows}</table>")

