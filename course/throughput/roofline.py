"""Lesson 03, part 5: the roofline of *this* machine, measured.

An operation that does ``F`` floating-point operations and must move ``B`` bytes
has an **arithmetic intensity** ``I = F / B`` (FLOP per byte).  No device can run
it faster than either of its two limits:

* the memory roof: ``I × peak bandwidth`` (each byte must come from memory);
* the compute roof: ``peak FLOP/s`` (each flop must be done).

So the attainable rate is ``min(peak FLOP/s, I × bandwidth)``: a slanted line
that bends into a flat one at the **ridge point** ``I* = peak FLOP/s / bandwidth``.
Operations left of the ridge are *memory-bound* (elementwise ops, reductions,
scans: a flop or less per 4–12 bytes); right of it, *compute-bound* (large matrix
products, whose intensity grows like ``n / 6``).

Here both roofs are measured, not copied from a data sheet: the bandwidth with
:func:`course.hardware.copy_bandwidth` (a large array copy), the FLOP/s as the best
matrix-product rate over a range of sizes, per dtype.  The course's own
operations are then placed on the plot by their counted intensity and their
measured rate.

>>> attainable(0.25, peak_flops=1e11, peak_bandwidth=2e10)
5000000000.0
>>> classify(0.25, 1e11, 2e10), classify(100.0, 1e11, 2e10)
('memory-bound', 'compute-bound')
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Given, OneOf, Optional, Real, Whole, arguments
from ..backprop import MLP
from ..devices import get_xp, normalize_device, resolve_devices, synchronize
from ..errors import BadInputError, DeviceMemoryError, UnsupportedDtypeError, whole_number
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..results import validate_results as _results
from ..threads import get_threads
from ..timing import benchmark, sweep_within_budget
from .batch import DEFAULT_MLP_SIZES, time_torch_matmul, torch_available
from .ops import OPS, get_op, time_op

__all__ = ["attainable", "ridge_point", "classify", "peak_matmul_sizes", "measure_peaks", "roofline_point",
           "measure_roofline", "peaks_of", "cached_peaks", "compare_predictions", "POINT_NAMES", "theoretical_peak",
           "cpu_clock_hz", "roof_shares", "WRITE_ALLOCATE_ALLOWANCE"]

#: Operations :func:`roofline_point` can place: the lesson's ops, the scan (lesson 04), an MLP step (lesson 01).
POINT_NAMES = (*OPS, "scan", "mlp step")


def dtype_name(dtype: Any, allowed: tuple[str, ...] | None = None, torch: bool = False) -> str:
    """``dtype``'s name, a dtype numpy knows (``torch``: or ``"bfloat16"``, timed through PyTorch), one of
    ``allowed`` when given."""
    if dtype is None or isinstance(dtype, (list, tuple, np.ndarray)):   # numpy reads None as float64
        raise BadInputError(f"dtype must name one dtype, such as 'float32', got {dtype!r:.60}")
    if torch and dtype == "bfloat16":
        name = "bfloat16"
    else:
        name = validate_dtype(dtype).name
    if allowed is not None and name not in allowed:
        raise BadInputError(f"dtype must be {' or '.join(allowed)} here, got {name!r}")
    return name


def _dtype_names(dtypes: Any) -> list[str]:
    """A non-empty list of dtype names (``"bfloat16"`` included: its roof is measured through PyTorch)."""
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, (list, tuple)):
        raise BadInputError(f"dtypes must be a list of dtype names such as ['float32'], got {dtypes!r:.80}")
    if not dtypes:
        raise BadInputError("dtypes is empty: give at least one, e.g. ['float32']")
    return [dtype_name(d, torch=True) for d in dtypes]


def _validate_points(points: Any) -> list[tuple[str, int]]:
    """A list of ``(op, n)`` pairs: an operation of :data:`POINT_NAMES` and its size."""
    if isinstance(points, (str, bytes)) or not isinstance(points, (list, tuple)) or len(points) > 1000:
        raise BadInputError(f"points must be a list of (op, n) pairs such as [('add', 4096)], got {points!r:.80}")
    out = []
    for p in points:
        if not isinstance(p, (list, tuple)) or len(p) != 2 or not isinstance(p[0], str) or p[0] not in POINT_NAMES:
            raise BadInputError(f"each point is an (op, n) pair with op one of {POINT_NAMES}, got {p!r:.80}")
        out.append((p[0], whole_number("n", p[1], hint=f"the size of the point {p[0]!r}")))
    return out


def _predictor(predict: Any) -> Any:
    if not callable(predict):
        raise BadInputError(f"predict must be your function predict(flops, bytes, peak_flops, peak_bandwidth), or "
                            f"None, got {predict!r:.80}")
    return predict


_DEVICE, _QUICK = Given(normalize_device), OneOf(True, False)
_REPEAT, _BUDGET = Whole(hint="timed calls"), Optional(Real(above=0, hint="seconds of measuring, or None"))


def ridge_point(peak_flops: float, peak_bandwidth: float) -> float:
    """Intensity (FLOP/byte) where the memory roof meets the compute roof."""
    if not peak_flops > 0 or not peak_bandwidth > 0:
        raise BadInputError(f"peaks must be positive, got {peak_flops!r} FLOP/s and {peak_bandwidth!r} B/s")
    return peak_flops / peak_bandwidth


def attainable(intensity: float, peak_flops: float, peak_bandwidth: float) -> float:
    """The roofline: ``min(peak_flops, intensity * peak_bandwidth)`` in FLOP/s."""
    if not intensity > 0:
        raise BadInputError(f"arithmetic intensity must be > 0 FLOP/byte, got {intensity!r}")
    ridge_point(peak_flops, peak_bandwidth)
    return float(min(peak_flops, intensity * peak_bandwidth))


def classify(intensity: float, peak_flops: float, peak_bandwidth: float) -> str:
    """``"memory-bound"`` left of the ridge point, ``"compute-bound"`` at or right of it."""
    if not intensity > 0:
        raise BadInputError(f"arithmetic intensity must be > 0 FLOP/byte, got {intensity!r}")
    return "memory-bound" if intensity < ridge_point(peak_flops, peak_bandwidth) else "compute-bound"


def cpu_clock_hz() -> tuple[float | None, str]:
    """The CPU's clock in Hz and where it was read: the highest frequency the kernel states
    (``cpufreq/cpuinfo_max_freq``), else ``cpu MHz`` of ``/proc/cpuinfo``; ``(None, why)`` elsewhere.

    >>> hz, source = cpu_clock_hz()
    >>> hz is None or hz > 1e8
    True
    """
    import re
    from pathlib import Path

    try:
        khz = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text().strip())
        return khz * 1e3, "read: /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (the highest clock)"
    except (OSError, ValueError):
        pass
    try:
        found = re.findall(r"^cpu MHz\s*:\s*([0-9.]+)", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        found = []
    if found:
        return max(float(v) for v in found) * 1e6, ("read: /proc/cpuinfo 'cpu MHz' (the clock now; turbo may run "
                                                    "higher, wide vector code may run lower)")
    return None, "not readable on this system"


#: Vector FMA units per core: no operating system reports it, so it is an assumption (2 on recent x86
#: server and desktop cores; some have 1 for their widest vectors), labelled wherever it is used.
ASSUMED_FMA_UNITS = 2


@arguments(dtype=Given(dtype_name, allowed=("float32", "float64")),
           fma_units=Optional(Whole(1, 64, hint="FMA units per core, or None")))
def theoretical_peak(dtype: str = "float32", fma_units: int | None = None) -> dict:
    """The CPU's compute peak from its parts: cores × SIMD lanes × FMA units × 2 flops × clock.

    Each factor is read from this machine where the machine says it (usable cores, the widest
    SIMD register numpy found, the clock) and labelled an *assumption* where it does not (the
    FMA units per core).  Returns ``{"flops_per_s", "factors": [(name, value, source), ...]}``
    (``flops_per_s`` None when a factor is unknown).

    >>> p = theoretical_peak("float32", fma_units=2)
    >>> [f[0] for f in p["factors"]]
    ['cores', 'SIMD lanes', 'FMA units per core', 'flops per FMA', 'clock (Hz)']
    """
    from ..cpu import cpu_info

    if dtype not in ("float32", "float64"):
        raise BadInputError(f"dtype must be float32 or float64 for a SIMD peak, got {dtype!r}")
    if fma_units is not None:
        fma_units = whole_number("fma_units", fma_units, 1, 64, hint="FMA units per core, or None")
    info = cpu_info()
    bits = info.get("simd_width_bits")
    lanes = bits // (8 * np.dtype(dtype).itemsize) if bits else None
    hz, clock_src = cpu_clock_hz()
    units, unit_src = ((fma_units, "given") if fma_units is not None else
                       (ASSUMED_FMA_UNITS, "ASSUMPTION: not reported by the machine"))
    factors = [("cores", info.get("usable_cores"), "read: affinity and CPU quota (course.cpu.usable_cores)"),
               ("SIMD lanes", lanes, f"read: widest register numpy dispatches to, {bits} bits / "
                                     f"{8 * np.dtype(dtype).itemsize}-bit {dtype}"),
               ("FMA units per core", units, unit_src),
               ("flops per FMA", 2, "definition: a fused multiply-add is 2 flops"),
               ("clock (Hz)", hz, clock_src)]
    values = [f[1] for f in factors]
    peak = float(np.prod([float(v) for v in values])) if all(v for v in values) else None
    return {"dtype": dtype, "flops_per_s": peak, "factors": factors}


@arguments(device=_DEVICE, dtype=Given(dtype_name, torch=True), quick=_QUICK)
def peak_matmul_sizes(device: str, dtype: str, quick: bool = True) -> list[int]:
    """Matrix sizes tried when looking for the peak: the best is usually the largest that runs fast."""
    if device == "gpu":
        return [1024, 2048, 4096] if quick else [1024, 2048, 4096, 8192, 16384]
    if dtype == "float16":  # numpy emulates float16 without BLAS: small sizes already take long
        return [64, 128] if quick else [64, 128, 256]
    return [256, 512, 1024] if quick else [256, 512, 1024, 2048, 4096]


def _worth_growing(dev: str, dtype: str, n: int, rate: float, previous: float, seconds: float,
                   quick: bool) -> bool:
    """Try a matrix twice as big when the rate still climbs (>= 5 % over the previous size), one call
    is still quick, and it fits: a many-core CPU or a big GPU may peak beyond the default sizes."""
    if dev == "cpu" and dtype == "float16":  # emulated by numpy: bigger only gets slower to measure
        return False
    if rate < 1.05 * previous or seconds > (0.05 if quick else 2.0) or 2 * n > 32768:
        return False
    try:
        require_fits(3 * (2 * n) ** 2 * 4, dev, what="a bigger matrix product")
    except DeviceMemoryError:
        return False
    return True


@arguments(device=_DEVICE, dtypes=Given(_dtype_names), quick=_QUICK,
           copy_nbytes=Optional(Whole(lo=4, hint="bytes of the copy, or None")), repeat=_REPEAT, budget_s=_BUDGET,
           rs=Optional(Given(_results)))
def measure_peaks(device: str = "cpu", dtypes: Sequence[str] = ("float32",), quick: bool = True,
                  copy_nbytes: int | None = None, repeat: int = 5, budget_s: float | None = 0.5,
                  rs: ResultSet | None = None) -> ResultSet:
    """Measure the copy bandwidth and the best matrix-product FLOP/s per dtype on ``device``.

    The FLOP/s peak is the best rate of the best run (``flops / min_s``): a peak is what the
    machine *can* do; the bandwidth likewise.  After the sizes of :func:`peak_matmul_sizes`, bigger
    matrices are tried while the rate still climbs and a call stays quick.  Adds records
    ``kind="peak_bandwidth"`` (``bytes_per_s``) and ``kind="peak_flops"``
    (``flops_per_s``, ``dtype``, the best ``n``; one ``kind="matmul"`` record per size
    tried) to ``rs`` (a new ``ResultSet`` ``"roofline"`` by default) and returns it.
    """
    from ..hardware.machine import copy_bandwidth

    (dev,) = resolve_devices([device])
    rs = rs if rs is not None else ResultSet("roofline", params={"quick": quick})
    if copy_nbytes is None:
        copy_nbytes = 2 ** 26 if (quick and dev == "cpu") else 2 ** 28
    # every core copies its slice at once: the FLOP/s roof below uses every core too (BLAS threads)
    bw = copy_bandwidth(dev, nbytes=copy_nbytes, repeat=repeat, budget_s=max(budget_s or 1.0, 1.0),
                        threads=get_threads() if dev == "cpu" else 1)
    best_bw = 2 * bw["nbytes"] / bw["timing"].min  # the best run, as for the FLOP/s peak
    rs.add(device=dev, kind="peak_bandwidth", bytes_per_s=best_bw, median_bytes_per_s=bw["bytes_per_s"],
           nbytes=bw["nbytes"], threads=bw["threads"],
           source=f"course.hardware.copy_bandwidth (a large array copy on {bw['threads']} thread(s), read + "
           "write counted; best run)")
    for dtn in dtypes:
        best, tried = (0.0, 0), []
        sizes = list(peak_matmul_sizes(dev, dtn, quick))
        while sizes:
            n = sizes.pop(0)
            if dtn == "bfloat16":
                if not torch_available():
                    rs.notes.append("No bfloat16 roof: PyTorch is not installed.")
                    break
                try:
                    rec = time_torch_matmul(n, dtn, dev, repeat, budget_s)
                except UnsupportedDtypeError as exc:
                    rs.notes.append(f"No bfloat16 roof on the {dev.upper()}: {exc}")
                    break
            else:
                validate_dtype(dtn, dev)
                rec = time_op("matmul", n, dtn, dev, repeat=repeat, budget_s=budget_s)
            rate = rec["flops"] / rec["min_s"]  # a peak is the best the machine did, as STREAM reports
            rs.add(**(rec | {"kind": "matmul", "dtype": dtn, "flops_per_s": rate}))
            previous = best[0]
            best = max(best, (rate, n))
            tried.append(n)
            if not sizes and _worth_growing(dev, dtn, n, rate, previous, rec["median_s"], quick):
                sizes.append(2 * n)
        if best[1]:
            rs.add(device=dev, kind="peak_flops", dtype=dtn, flops_per_s=best[0], n=best[1],
                   source=f"best matrix product over sizes {tried}")
    return rs


@arguments(rs=Given(_results), device=_DEVICE)
def peaks_of(rs: ResultSet, device: str) -> dict:
    """``{"bandwidth": B/s or None, "flops": {dtype: FLOP/s}}`` from a roofline result set."""
    bws = rs.select(device=device, kind="peak_bandwidth")
    return {"bandwidth": bws[-1]["bytes_per_s"] if bws else None,
            "flops": {r["dtype"]: r["flops_per_s"] for r in rs.select(device=device, kind="peak_flops")}}


@functools.lru_cache(maxsize=16)
def cached_peaks(device: str = "cpu", dtypes: tuple = ("float32",), quick: bool = True) -> ResultSet:
    """:func:`measure_peaks`, measured once per session (widgets redraw without re-measuring)."""
    return measure_peaks(device, dtypes, quick=quick)


def _scan_counts(n: int, itemsize: int) -> tuple[float, float]:
    from ..scan.algorithms import operation_counts

    return float(operation_counts("blelloch", n)["work"]), 2.0 * n * itemsize


def _mlp_bytes(sizes: Sequence[int], batch: int, itemsize: int) -> float:
    """Compulsory traffic of one MLP training step, estimated: parameters read in the forward and
    the backward pass, gradients written, parameters read and written by the update (5 passes);
    activations written forward and read backward, and their gradients (4 passes); the input."""
    params = sum(a * b + b for a, b in zip(sizes, sizes[1:]))
    acts = batch * sum(sizes[1:])
    return float(itemsize * (5 * params + 4 * acts + batch * sizes[0]))


@arguments(op=OneOf(*POINT_NAMES), n=Whole(hint="the size of the operation"), device=_DEVICE, repeat=_REPEAT,
           budget_s=_BUDGET)
def roofline_point(op: str, n: int, dtype: str = "float32", device: str = "cpu", repeat: int = 5,
                   budget_s: float | None = 0.3) -> dict:
    """Measure one operation and return its roofline record (``kind="point"``).

    ``op`` is one of :data:`POINT_NAMES`; ``n`` is its size (elements; matrix side;
    scan length; batch size for ``"mlp step"``).  The record has ``intensity``
    (counted FLOP / counted bytes) and ``flops_per_s`` (counted FLOP / measured time).
    """
    (dev,) = resolve_devices([device])
    dt = validate_dtype(dtype, dev)
    n = whole_number("n", n, hint="the size of the operation")
    if op in OPS:
        rec = time_op(get_op(op), n, dt, dev, repeat=repeat, budget_s=budget_s)
        return rec | {"kind": "point", "name": f"{op} n={n:,}", "op": op, "flops_per_s": rec["gflops"] * 1e9}
    xp = get_xp(dev)
    if op == "scan":
        from ..scan.algorithms import blelloch_scan

        require_fits(4 * n * dt.itemsize, dev, what=f"a scan of {n:,} {dt.name}")
        x = xp.full(n, 0.5, dtype=dt)
        t = benchmark(blelloch_scan, x, device=dev, warmup=1, repeat=repeat, budget_s=budget_s, name="scan")
        flops, nbytes = _scan_counts(n, dt.itemsize)
    elif op == "mlp step":
        require_fits(4 * n * sum(DEFAULT_MLP_SIZES) * dt.itemsize, dev, what=f"an MLP step on a batch of {n:,}")
        model = MLP(list(DEFAULT_MLP_SIZES), dtype=dt.name, device=dev, seed=0)
        rng = np.random.default_rng(0)
        x = xp.asarray(rng.standard_normal((n, DEFAULT_MLP_SIZES[0])).astype(dt))
        y = xp.asarray(rng.integers(0, DEFAULT_MLP_SIZES[-1], size=n))
        t = benchmark(model.train_step, x, y, 1e-3, device=dev, warmup=1, repeat=repeat, budget_s=budget_s,
                      name="mlp step")
        flops, nbytes = float(model.flops_per_step(n)), _mlp_bytes(DEFAULT_MLP_SIZES, n, dt.itemsize)
    else:
        raise BadInputError(f"unknown operation {op!r} for the roofline; choose one of {', '.join(POINT_NAMES)}")
    synchronize(dev)
    return t.as_record() | {"kind": "point", "name": f"{op} n={n:,}", "op": op, "n": n, "dtype": dt.name,
                            "flops": flops, "bytes": nbytes, "intensity": flops / nbytes,
                            "flops_per_s": flops / t.median}


DEFAULT_POINTS = (("add", 2 ** 22), ("add", 2 ** 12), ("sum", 2 ** 22), ("matmul", 64), ("matmul", 256),
                  ("matmul", 512), ("scan", 2 ** 16), ("mlp step", 256))


@arguments(devices=Devices(), dtypes=Given(_dtype_names), points=Given(_validate_points), quick=_QUICK,
           total_budget_s=Optional(Real(above=0, hint="seconds the whole measurement may take, or None")))
def measure_roofline(devices: Sequence[Any] | None = None, dtypes: Sequence[str] = ("float32",),
                     points: Sequence[tuple[str, int]] = DEFAULT_POINTS, quick: bool = True,
                     total_budget_s: float | None = None, progress: Callable | None = None) -> ResultSet:
    """Peaks and the course's operations on each device: a ``ResultSet`` ``"roofline"``.

    ``points`` are ``(op, n)`` pairs measured in float32 (the first dtype).  A point whose
    dependency is missing (lesson 01 or 04 absent) is skipped with a note; when the time
    budget runs out the rest are skipped and the notes say so.
    """
    devs = resolve_devices(devices)
    dtypes = list(dtypes)
    if not dtypes:
        raise BadInputError("dtypes is empty: give at least one, e.g. ['float32']")
    rs = ResultSet("roofline", params={"devices": devs, "dtypes": dtypes, "points": [list(p) for p in points],
                                      "quick": quick, "stopped_early": False})
    jobs = [(d, p) for d in devs for p in [None, *points]]
    for d, p in sweep_within_budget(jobs, rs, total_budget_s, progress, "roofline"):
        if p is None:
            measure_peaks(d, dtypes, quick=quick, rs=rs)
            continue
        try:
            rs.add(**roofline_point(p[0], int(p[1]), dtypes[0], d))
        except BadInputError as exc:
            if "needs lesson" not in str(exc):
                raise
            rs.notes.append(f"point {p[0]} skipped: {exc}")
    _raise_peaks_to_matmul_points(rs)
    return rs


def _raise_peaks_to_matmul_points(rs: ResultSet) -> None:
    """A peak is the best matrix-product rate of the run: if a matmul *point* measured later ran
    faster (the machine was busier while the peak was measured), the peak becomes that rate."""
    for peak in rs.select(kind="peak_flops"):
        pts = [p for p in rs.select(device=peak["device"], kind="point", op="matmul", dtype=peak["dtype"])
               if p.get("min_s")]
        if not pts:
            continue
        best = max(pts, key=lambda p: p["flops"] / p["min_s"])
        rate = best["flops"] / best["min_s"]
        if rate > peak["flops_per_s"]:
            rs.notes.append(f"{peak['device'].upper()} {peak['dtype']} peak raised from "
                            f"{peak['flops_per_s'] / 1e9:,.1f} to {rate / 1e9:,.1f} GFLOP/s: the matrix product "
                            f"n={best['n']} measured as a point ran faster than during the peak sweep (timings "
                            "vary with the load of the machine).")
            peak.update(flops_per_s=rate, n=best["n"], source=peak["source"] + f"; raised by the point n={best['n']}")


#: How far above a copy-measured memory roof write-allocate alone can put an operation that reads more than it
#: writes: a copy moves 3 transfers for the 2 it is credited with (1.5), an add 4 for 3 (1.33): 1.5 / 1.33.
WRITE_ALLOCATE_ALLOWANCE = 1.5 / (4 / 3)


@arguments(rs=Given(_results), device=_DEVICE, dtype=Given(dtype_name, torch=True))
def roof_shares(rs: ResultSet, device: str, dtype: str = "float32") -> list[dict]:
    """Each measured point's rate as a share of the roof at its intensity (the lower of the two roofs).

    One dict per point: ``name``, ``n``, ``intensity``, ``share`` (1 = on the roof), ``bound``
    ("memory" or "compute": which roof is the lower there) and ``cached``: True where a point sits
    further above the memory roof than :data:`WRITE_ALLOCATE_ALLOWANCE` explains, so that caches must have
    served it (or the roof was measured low).  Empty where the set has no peaks for that device and dtype.

    >>> rs = ResultSet("demo")
    >>> rs.add(device="cpu", kind="peak_bandwidth", bytes_per_s=1e10)
    >>> rs.add(device="cpu", kind="peak_flops", dtype="float32", flops_per_s=1e11)
    >>> rs.add(device="cpu", kind="point", name="add", n=8, dtype="float32", intensity=1 / 12, flops_per_s=2e9)
    >>> r = roof_shares(rs, "cpu")[0]
    >>> round(r["share"], 2), r["bound"], r["cached"]
    (2.4, 'memory', True)
    """
    pk = peaks_of(rs, device)
    pf, bw = pk["flops"].get(dtype), pk["bandwidth"]
    if not pf or not bw:
        return []
    out = []
    for r in rs.select(device=device, kind="point"):
        if r.get("dtype", dtype) != dtype or not r.get("flops_per_s"):
            continue
        roof = attainable(r["intensity"], pf, bw)
        share = r["flops_per_s"] / roof
        bound = "memory" if r["intensity"] * bw < pf else "compute"
        out.append({"name": r["name"], "n": r.get("n"), "intensity": r["intensity"], "share": share, "bound": bound,
                    "cached": bound == "memory" and share > WRITE_ALLOCATE_ALLOWANCE})
    return out


@arguments(predict=Optional(Given(_predictor)), rs=Given(_results), device=_DEVICE,
           dtype=Given(dtype_name, torch=True))
def compare_predictions(predict: Callable | None, rs: ResultSet, device: str = "cpu", dtype: str = "float32") -> str:
    """An HTML table: for each measured point, a prediction from ``predict(flops, bytes, peak_flops,
    peak_bandwidth)`` (your exercise; None or a stub shows "not done yet"), the roofline's answer, and
    the measured rate as a share of each roof.  A memory-bound op should reach a good share of the
    bandwidth and a tiny share of the peak FLOP/s; a compute-bound one the other way round.
    """
    import html

    pk = peaks_of(rs, device)
    pf, bw = pk["flops"].get(dtype), pk["bandwidth"]
    if not pf or not bw:
        raise BadInputError(f"these results have no {dtype} peaks for the {device.upper()}; measure them with "
                            "measure_roofline first")
    rows = []
    for r in rs.select(device=device, kind="point"):
        try:
            mine = predict(r["flops"], r["bytes"], pf, bw) if predict is not None else "not done yet"
        except NotImplementedError:
            mine = "not done yet"
        except Exception as exc:  # shown in the table, not raised: the lesson goes on
            mine = f"error: {type(exc).__name__}"
        want = classify(r["intensity"], pf, bw)
        mark = "✓" if mine == want else ("" if mine == "not done yet" else "✗")
        rows.append(f"<tr><td>{html.escape(r['name'])}</td><td>{r['intensity']:.3g}</td><td>{html.escape(str(mine))} "
                    f"{mark}</td><td>{want}</td><td>{r['flops_per_s'] / r['intensity'] / bw:.0%}</td>"
                    f"<td>{r['flops_per_s'] / pf:.1%}</td></tr>")
    return (f"<p>Ridge point: {pf / bw:.3g} FLOP/byte ({pf / 1e9:,.1f} GFLOP/s ÷ {bw / 1e9:,.1f} GB/s).</p>"
            "<table><tr><th>operation</th><th>intensity (FLOP/B)</th><th>your prediction</th><th>roofline</th>"
            "<th>measured share of the bandwidth roof</th><th>measured share of peak FLOP/s</th></tr>"
            + "".join(rows) + "</table>")
