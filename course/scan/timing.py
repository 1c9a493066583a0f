"""Timing the scans of lesson 04 on the CPU and the GPU, against the library and the copy limit.

Every algorithm is timed as an *inclusive* scan of ``n`` elements of one dtype with
one operator, by :func:`course.timing.benchmark` (warm-up, repeats, median; CUDA
events on a GPU).  The effective bandwidth counts ``2 * n * itemsize`` bytes per
scan (read the input once, write the output once: the least any scan must move),
the same convention as :func:`course.hardware.copy_bandwidth`, so it can be drawn
against the copy limit.

Algorithms by device:

* CPU: ``numpy`` (``numpy.cumsum`` / ``numpy.maximum.accumulate``, one compiled
  sequential loop), ``blelloch`` (:func:`course.scan.blelloch_scan`, one numpy call
  per level), ``hillis-steele``, and ``sequential`` (a Python loop, small n only);
* GPU: ``cupy`` (``cupy.cumsum(x)`` of the 1-D input: CuPy copies ``x`` (``astype``), then runs CUB's
  single-pass scan in place on the copy, two passes over memory; with ``axis=0`` CuPy takes its own
  slower path, so the library is always called without it), ``torch`` (``torch.cumsum`` of the same
  1-D array, shared through DLPack: ATen hands a 1-D scan to CUB, out of place), ``single-pass``
  (:func:`course.scan.singlepass.single_pass_scan`, the course's decoupled look-back kernel:
  float32 and int32 sums), ``blelloch`` (the same
  level-by-level code on CuPy arrays: a few kernel launches per level), ``numba
  kernel`` (:func:`course.scan.kernels.block_scan`, the hand-written block scan:
  scan tiles, scan their totals, uniform add) and ``numba reduce-then-scan`` (the same
  kernels with ``strategy="reduce-then-scan"``: sum the tiles first, moving less data).
  CuPy has no library scan for ``max`` (see :data:`LIBRARY_OPS`): that pair is refused
  up front, with the algorithms that do it named.

>>> rs = scan_sweep([2**10], algorithms=["numpy", "blelloch"], repeat=2)
>>> sorted(r["algorithm"] for r in rs.records if r["algorithm"] != "copy")
['blelloch', 'numpy']
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Dtype, Given, OneOf, Optional, Real, Seed, Whole, Wholes, arguments
from ..devices import array_device, cupy_module, get_xp, normalize_device, require_gpu
from ..errors import BadInputError, DeviceMemoryError
from ..limits import require_fits
from ..results import ResultSet, validate_references, validate_results
from ..standin import standin_active
from ..timing import benchmark
from .algorithms import OPERATORS, blelloch_scan, hillis_steele_scan, sequential_scan

__all__ = ["ALGORITHMS", "LIBRARY_OPS", "SEQUENTIAL_MAX_N", "make_input", "scan_function", "time_scan",
           "scan_sweep", "library_scan", "PEERS", "best_block_scans", "single_pass_standing",
           "CUB_SCAN_DTYPES", "cub_inclusive_sum_in_place", "validate_cub_buffer"]

#: Algorithms per device, in the order the plots list them.
ALGORITHMS = {"cpu": ("numpy", "blelloch", "hillis-steele", "sequential"),
              "gpu": ("cupy", "torch", "single-pass", "blelloch", "numba kernel", "numba reduce-then-scan")}
#: The Python loop is timed only up to this n (it takes about a microsecond per element).
SEQUENTIAL_MAX_N = 2**15


def _results(rs: Any) -> ResultSet:
    """``rs`` if it is a ResultSet (:func:`course.results.validate_results`)."""
    return validate_results(rs)


def _references(sets: Any) -> list[ResultSet]:
    """``sets`` as a list of ResultSets (:func:`course.results.validate_references`)."""
    return validate_references(sets)


def _validate_array(x: Any) -> Any:
    """``x`` if it is an array (numpy or CuPy) with a leading axis: the sequence a scan runs along."""
    if not getattr(x, "ndim", 0) or not hasattr(x, "dtype"):
        raise BadInputError(f"x must be an array (numpy or CuPy) with a leading axis, e.g. make_input(n), got "
                            f"{type(x).__name__} of shape {getattr(x, 'shape', None)}")
    return x


def _validate_op_name(op: Any) -> str:
    """``op`` if it names one of the ready operators, :data:`course.scan.OPERATORS`."""
    if not isinstance(op, str) or op not in OPERATORS:
        raise BadInputError(f"unknown operator {op!r:.60}; choose one of {sorted(OPERATORS)}.")
    return op


#: The rules of a scan's settings, shared by the functions that take them.
_N = Whole(0, hint="the length of the scan")
_OP = Given(_validate_op_name)
_DEVICE = Given(normalize_device)


@arguments(n=_N, op=_OP, device=_DEVICE, dtype=Dtype(device="device"), seed=Seed())
def make_input(n: int, op: str = "add", dtype: Any = "float32", device: Any = "cpu", seed: int = 0) -> Any:
    """A random input for ``op``: numbers, 2x2 matrices (``matmul``) or affine maps."""
    dev, dt = device, dtype
    shape = {"matmul": (n, 2, 2), "affine": (n, 2), "interval": (n, 2)}.get(op, (n,))
    require_fits(3 * int(np.prod(shape)) * dt.itemsize, dev, what=f"a scan of {n:,} elements")
    rng = np.random.default_rng(seed)
    if op == "matmul":     # rotations: long products stay bounded
        t = rng.uniform(-np.pi, np.pi, n)
        x = np.stack([np.cos(t), -np.sin(t), np.sin(t), np.cos(t)], -1).reshape(n, 2, 2)
    elif op == "affine":
        x = np.stack([rng.uniform(-1, 1, n), rng.normal(size=n)], axis=-1)
    elif op == "interval":
        x = np.stack([np.arange(n), np.arange(1, n + 1)], axis=-1)
    else:
        x = rng.integers(-9, 10, n) if dt.kind in "iu" else rng.normal(size=n)
    return get_xp(dev).asarray(x.astype(dt))


#: The operators each array library has its own scan for.  CuPy's ufuncs have no working
#: ``accumulate`` (``cupy.maximum.accumulate`` raises NotImplementedError), so on the GPU only
#: ``cumsum`` is a library scan; a running maximum there is the numba kernel's job.
LIBRARY_OPS = {"cpu": ("add", "max"), "gpu": ("add",)}


@arguments(x=Given(_validate_array), op=OneOf("add", "max"))
def library_scan(x: Any, op: str = "add") -> Any:
    """The array library's own inclusive scan: ``cumsum``, or on the CPU ``numpy.maximum.accumulate``.

    A 1-D input is scanned as ``cumsum(x)``, without ``axis``: CuPy sends only that call to CUB's
    single-pass scan (``cumsum(x, axis=0)`` runs CuPy's own kernels, about 3× slower on an H100).

    >>> library_scan(np.array([3, 1, 4, 1, 5]), "max").tolist()
    [3, 3, 4, 4, 5]
    """
    return _library_scan(x, op)


def _library_scan(x: Any, op: str) -> Any:
    """:func:`library_scan` without its door: what the sweeps time (a door's few microseconds would be timed)."""
    dev = "gpu" if type(x).__module__.startswith("cupy") else "cpu"
    if op not in LIBRARY_OPS[dev]:
        lib = "CuPy" if dev == "gpu" else "NumPy"
        raise BadInputError(f"{lib} has no scan for {op!r}; it has one for {list(LIBRARY_OPS[dev])}."
                            + (" For a running maximum on the GPU use the 'numba kernel'." if dev == "gpu"
                               and op == "max" else ""))
    xp = get_xp(dev)
    if op == "add":
        return xp.cumsum(x) if x.ndim == 1 else xp.cumsum(x, axis=0)
    return xp.maximum.accumulate(x, axis=0)


#: Element types the in-place CUB scan is timed with here.
CUB_SCAN_DTYPES = ("float32", "float64", "int32", "int64")


def cub_inclusive_sum_in_place(buf: Any) -> Any:
    """Scan the 1-D contiguous CuPy array ``buf`` in place with CUB's ``DeviceScan::InclusiveSum``: ``buf``
    itself, now holding its running sums.  The library peer of the single-pass scan.

    ``cupy.cumsum(x)`` copies ``x`` (``astype``) and then calls CUB in place on the copy: four passes over
    memory for a scan that needs two.  ``cupy.cuda.cub.cub_scan(buf, CUPY_CUB_CUMSUM)``, which this calls,
    is the second half alone: it reads ``n`` values and writes ``n``, taking CUB's temporary storage from
    the memory pool (so it cannot be captured in a CUDA graph).  CuPy exposes only the inclusive sum this
    way; the exclusive one is the inclusive one shifted by one element.  Copy the input first when it must
    survive.  Timed again and again on one buffer, the values change (a sum of sums grows; float32 reaches
    ``inf`` after a few calls) while the work and the bytes do not: a GPU adds ``inf`` at the same rate.

    On the stand-in GPU: NumPy's ``cumsum`` into the same buffer, counted as one CUB library call (refused
    while a stream captures, as CuPy refuses it).
    """
    validate_cub_buffer(buf)
    cp = cupy_module()
    if standin_active():
        plain = buf.view(np.ndarray)
        cp.counter.library("CUB DeviceScan::InclusiveSum in place (cupy.cuda.cub.cub_scan)", kind="CUB")
        np.cumsum(plain, out=plain)
        return buf
    from cupy.cuda import cub

    out = cub.cub_scan(buf, cub.CUPY_CUB_CUMSUM)
    if out is None:                     # CuPy answers None where CUB cannot take the dtype
        raise BadInputError(f"CuPy's CUB wrapper refuses a scan of {buf.dtype}; use float32.")
    return out


def validate_cub_buffer(buf: Any) -> Any:
    """``buf`` when it is a 1-D contiguous CuPy array of a dtype in :data:`CUB_SCAN_DTYPES`; a clear error
    otherwise."""
    require_gpu()
    if array_device(buf) != "gpu":
        raise BadInputError("cub_inclusive_sum_in_place scans a CuPy array in place; move it with "
                            "course.to_device(x, 'gpu') and copy it (x.copy()) first if the input must survive.")
    if buf.ndim != 1 or not buf.flags.c_contiguous:
        raise BadInputError(f"cub_inclusive_sum_in_place scans a 1-D contiguous array, got shape "
                            f"{tuple(buf.shape)}; pass cupy.ascontiguousarray(x).ravel().")
    if str(buf.dtype) not in CUB_SCAN_DTYPES:
        raise BadInputError(f"cub_inclusive_sum_in_place is timed for {list(CUB_SCAN_DTYPES)}, got {buf.dtype}; "
                            "convert with x.astype('float32').")
    return buf


@arguments(op=_OP, device=_DEVICE)     # algorithm: checked against the device's own list, first thing
def scan_function(algorithm: str, op: str = "add", device: Any = "cpu") -> Callable:
    """``f(x) -> inclusive scan`` for one algorithm name of :data:`ALGORITHMS`."""
    dev = device
    if algorithm not in ALGORITHMS[dev]:
        raise BadInputError(f"unknown {dev.upper()} scan {algorithm!r}; choose one of "
                            f"{list(ALGORITHMS[dev])}.")
    fn = OPERATORS[op]
    if algorithm in ("numpy", "cupy"):
        if op not in LIBRARY_OPS[dev]:
            other = "'numba kernel' or 'blelloch'" if dev == "gpu" and op == "max" else "'blelloch' or 'sequential'"
            raise BadInputError(f"{algorithm} has no built-in scan for {op!r} (it has one for "
                                f"{list(LIBRARY_OPS[dev])}); compare with {other} instead.")
        return lambda x: _library_scan(x, op)
    if algorithm in ("torch", "single-pass"):
        if op != "add":
            raise BadInputError(f"{algorithm} scans only with 'add' (a running sum), got {op!r}; "
                                "compare with 'numba kernel' or 'blelloch' instead.")
        return _torch_cumsum if algorithm == "torch" else _single_pass
    if algorithm == "blelloch":     # the scans without their doors (op is a ready one): a door is not timed
        return lambda x: blelloch_scan.__wrapped__(x, op=fn, exclusive=False)
    if algorithm == "hillis-steele":
        return lambda x: hillis_steele_scan.__wrapped__(x, op=fn, exclusive=False)
    if algorithm == "sequential":
        return lambda x: sequential_scan.__wrapped__(x, op=fn, exclusive=False)
    from . import kernels as scan_kernels  # "numba kernel" and "numba reduce-then-scan"

    if op not in scan_kernels.KERNEL_OPS:
        raise BadInputError(f"the numba kernel is written for {list(scan_kernels.KERNEL_OPS)}; got {op!r}. "
                            "Compare with 'blelloch' instead.")
    strategy = "reduce-then-scan" if algorithm == "numba reduce-then-scan" else "scan-then-add"
    return functools.partial(scan_kernels.block_scan, exclusive=False, op=op, strategy=strategy)


def _single_pass(x: Any) -> Any:
    from .singlepass import single_pass_scan

    return single_pass_scan(x)


def _torch_cumsum(x: Any) -> Any:
    """``torch.cumsum`` of a 1-D CuPy array, shared both ways through DLPack (no copy)."""
    import cupy

    torch = _torch()
    return cupy.from_dlpack(torch.cumsum(torch.from_dlpack(x), 0))


def _torch() -> Any:
    from ..torch_peer import torch_cuda_available

    if not torch_cuda_available():
        raise BadInputError("PyTorch with CUDA is not installed here, so torch.cumsum cannot be timed; "
                            "choose 'cupy' for the library scan instead.")
    import torch

    return torch


@arguments(n=_N, op=_OP, device=_DEVICE, dtype=Dtype(device="device"), repeat=Whole(hint="timed calls"),
           budget_s=Optional(Real(above=0, hint="seconds of measuring, or None")),
           x=Optional(Given(_validate_array)))
def time_scan(algorithm: str, n: int, op: str = "add", dtype: Any = "float32",
              device: Any = "cpu", repeat: int = 5, budget_s: float | None = 0.5, x: Any = None) -> dict:
    """Time one algorithm at one size: a record (:meth:`course.timing.Timing.as_record`) with the
    algorithm, n, op, dtype and ``gb_per_s`` (input read + output written, per second).  A clear
    error for impossible combinations.  ``x``: the input, when already made by :func:`make_input`
    with these arguments (several algorithms timed on one input)."""
    dev = device
    if algorithm == "sequential" and n > SEQUENTIAL_MAX_N:
        raise BadInputError(f"the Python loop is timed only up to n = {SEQUENTIAL_MAX_N:,} "
                            f"(about a microsecond per element); got n = {n:,}.")
    f = scan_function(algorithm, op, dev)
    x = make_input(n, op, dtype, dev) if x is None else x
    if algorithm == "torch":              # timed on a torch tensor, as every PyTorch peer is
        from ..torch_peer import benchmark_torch

        torch = _torch()
        t = benchmark_torch(torch.cumsum, torch.from_dlpack(x), 0, device=dev, warmup=1, repeat=repeat,
                            budget_s=budget_s, name=f"torch.cumsum n={n}")
    else:
        t = benchmark(f, x, device=dev, warmup=1, repeat=repeat, budget_s=budget_s,
                      name=f"{algorithm} scan n={n}")
    return t.as_record(algorithm=algorithm, n=n, op=op, dtype=x.dtype.name,
                       gb_per_s=2 * x.nbytes / t.median / 1e9 if t.median > 0 else None)


def _validate_algorithms(algorithms: Any) -> list[str] | None:
    """None (every algorithm of each device) or a list of names from :data:`ALGORITHMS`."""
    if algorithms is None:
        return None
    known = list(dict.fromkeys(a for algs in ALGORITHMS.values() for a in algs))
    if isinstance(algorithms, str) or not isinstance(algorithms, (list, tuple)) or not algorithms or any(
            not isinstance(a, str) or a not in known for a in algorithms):
        raise BadInputError(f"algorithms must be None (all) or a list of names from {known}, got {algorithms!r:.80}")
    return list(algorithms)


@arguments(ns=Wholes(lo=0, hint="each is a scan length, e.g. [2**10, 2**20]"), algorithms=Given(_validate_algorithms),
           op=_OP, dtype=Dtype(), devices=Devices(), repeat=Whole(hint="timed calls per point"),
           budget_s=Optional(Real(above=0, hint="seconds of measuring per point, or None")),
           copy_nbytes=Whole(lo=4, hint="bytes of the copy that measures the limit"))
def scan_sweep(ns: Sequence[int], algorithms: Sequence[str] | None = None, op: str = "add",
               dtype: Any = "float32", devices: Sequence[str] | None = None, repeat: int = 5,
               budget_s: float | None = 0.3, copy_nbytes: int = 2**26,
               progress: Callable | None = None) -> ResultSet:
    """Time the scans at each ``n`` on each device; add each device's copy limit.

    Each record gets ``of_copy``: its ``gb_per_s`` over the device-to-device copy measured in the
    same run (``algorithm="copy"``).

    Algorithms that cannot run (no library scan for the operator, a Python loop past
    :data:`SEQUENTIAL_MAX_N`, the numba kernel without a GPU) are skipped and listed
    in ``notes``.
    """
    from ..hardware.machine import copy_bandwidth

    devs, dt = devices, dtype
    rs = ResultSet("scan_sweep", params={"ns": ns, "op": op, "dtype": dt.name,
                                         "devices": devs, "repeat": repeat, "budget_s": budget_s})
    jobs = [(d, a, int(n)) for d in devs for a in (algorithms or ALGORITHMS[d])
            if a in ALGORITHMS[d] for n in ns]
    it = progress(jobs, total=len(jobs), desc="scan sweep") if progress else jobs
    for dev, alg, n in it:
        try:
            rec = time_scan(alg, n, op, dt, dev, repeat=repeat, budget_s=budget_s)
        except (BadInputError, DeviceMemoryError) as exc:   # refused up front, with the reason
            note = f"{dev} {alg} n={n}: skipped ({exc})"
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        rs.add(**rec)
    for dev in devs:
        c = copy_bandwidth(dev, nbytes=copy_nbytes, repeat=3, budget_s=1.0)
        for r in rs.select(device=dev):       # each scan's bandwidth as a fraction of this run's copy
            if r.get("gb_per_s") and c["gb_per_s"]:
                r["of_copy"] = r["gb_per_s"] / c["gb_per_s"]
        rs.add(device=dev, algorithm="copy", n=copy_nbytes // 4, gb_per_s=c["gb_per_s"],
               median_s=c["timing"].median)
    return rs


#: The single-pass scan's peers in ``scan_kernel_variants``, in the order they are read: variant -> what it is.
PEERS = {"copy": "device-to-device copy", "single-pass (look-back)": "single-pass (look-back), the course's",
         "CUB scan in place": "CUB's DeviceScan in place (pre-copied buffer)",
         "torch.cumsum": "torch.cumsum (PyTorch's wrapper of CUB)",
         "cupy.cumsum": "cupy.cumsum (a copy, then CUB's scan)"}


@arguments(variants=Given(_results))
def best_block_scans(variants: ResultSet) -> list[dict]:
    """The fastest GPU record of each strategy of the numba block scan in ``variants``, fastest first."""
    best: dict[str, dict] = {}
    for r in variants.select(device="gpu"):
        st = r.get("strategy")
        if st and r.get("gb_per_s") and (st not in best or r["gb_per_s"] > best[st]["gb_per_s"]):
            best[st] = r
    return sorted(best.values(), key=lambda r: -r["gb_per_s"])


@arguments(variants=Optional(Given(_results)), sweep=Optional(Given(_results)))
def single_pass_standing(variants: ResultSet | None, sweep: ResultSet | None = None) -> list[str]:
    """Where the single-pass scan stands, read off the records: against the device copy, torch.cumsum,
    cupy.cumsum and the best numba block scans at one size (``scan_kernel_variants``), and against n
    (``scan_sweep``): from which n on each GPU scan passes half the copy, and how flat the single pass's
    time is for small n.  ``[]`` where neither set holds a GPU single-pass record."""
    lines: list[str] = []
    gpu = {r["variant"]: r for r in (variants.select(device="gpu") if variants else []) if r.get("variant")}
    copy = gpu.get("copy")
    if "single-pass (look-back)" in gpu and copy:
        single = gpu["single-pass (look-back)"]
        rows = [(what, gpu[name]) for name, what in PEERS.items() if name in gpu]
        rows += [(f"best numba block scan: {r['variant']}", r) for r in best_block_scans(variants)]
        width = max(len(what) for what, _ in rows) + 2
        lines.append(f"{_where(variants)}, n = {copy['n']:,} float32, GB/s = (bytes read + written) / time:")
        for what, r in rows:
            share = r["gb_per_s"] / copy["gb_per_s"]
            lines.append(f"  {what:<{width}}{r['gb_per_s']:7,.0f} GB/s" + (
                "   the bar" if r is copy else f" = {share:4.0%} of the copy" + (
                    "" if r is single or r.get("strategy") else
                    f"; the single pass runs at {single['gb_per_s'] / r['gb_per_s']:.2f}× its rate")))
    recs = sweep.select(device="gpu") if sweep else []
    singles = sorted((r for r in recs if r.get("algorithm") == "single-pass"), key=lambda r: r["n"])
    if singles and any(r.get("of_copy") for r in recs):
        parts = []
        for alg, name in (("single-pass", "the single pass"), ("torch", "torch.cumsum"), ("cupy", "cupy.cumsum")):
            rs_ = sorted((r for r in recs if r.get("algorithm") == alg and r.get("of_copy")), key=lambda r: r["n"])
            if not rs_:
                continue
            above = [r for k, r in enumerate(rs_) if all(q["of_copy"] >= 0.5 for q in rs_[k:])]
            top = max(rs_, key=lambda r: r["of_copy"])
            parts.append(f"{name} from n = {above[0]['n']:,} on ({above[0]['of_copy']:.0%} there)" if above else
                         f"{name} never ({top['of_copy']:.0%} at best, at n = {top['n']:,})")
        small = [r for r in singles if r["n"] <= 2**16]
        lines.append(f"Against n ({_where(sweep)}), above half the copy's rate: " + "; ".join(parts) + ".")
        if len(small) > 1:
            lo, hi = min(r["median_s"] for r in small) * 1e6, max(r["median_s"] for r in small) * 1e6
            lines.append(f"From n = {small[0]['n']:,} to {small[-1]['n']:,} the single pass takes {lo:.1f} to "
                         f"{hi:.1f} µs: a fixed cost per call, not the bytes.")
    return lines


def _where(rs: ResultSet) -> str:
    return rs.label if rs.source == "reference" else f"measured live on {rs.gpu_name or 'this GPU'}"
