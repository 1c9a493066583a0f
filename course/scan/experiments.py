"""Lesson 04's experiments for ``python -m course report``: the scans against n on each device,
the hand-written kernel's variants (bank conflicts, tile shape), and every operator at one size."""

from __future__ import annotations

import textwrap

from ..errors import BadInputError
from ..plots import COLORS, add_footer, bar_figure, new_figure, set_takeaway
from ..report import by_size, experiment
from ..results import ResultSet
from ..timing import benchmark
from .plots import timing_figure
from .timing import (
    ALGORITHMS,
    LIBRARY_OPS,
    PEERS,
    best_block_scans,
    cub_inclusive_sum_in_place,
    make_input,
    scan_sweep,
    time_scan,
)


@experiment("scan_sweep", title="Scans against n: library, level-by-level Blelloch, Hillis-Steele, "
                                "hand-written kernel", lesson="04")
def scan_sweep_experiment(devices, quick, progress):
    """Inclusive float32 addition scans of 1-D arrays from cache-sized to memory-sized on each device:
    numpy.cumsum / cupy.cumsum(x) (the library; on a GPU a copy, then CUB's single pass), blelloch_scan one
    vectorized call per level, Hillis-Steele, a Python loop (small n) and, on a GPU, torch.cumsum,
    the course's single-pass scan and the numba block-scan kernels; effective bandwidth (2 n itemsize
    bytes per scan) against the copy limit measured in the same run (``of_copy``)."""
    rs = ResultSet("scan_sweep", params={"quick": quick})
    for dev in devices:
        top = by_size(quick, 24, 20, 10) if dev == "cpu" else by_size(quick, 26, 22, 10)
        ns = [2**k for k in range(by_size(quick, 10, 10, 8), top + 1, 2)]
        part = scan_sweep(ns, devices=[dev], repeat=3 if quick else 7, budget_s=0.1 if quick else 1.0,
                          copy_nbytes=2**24 if quick else 2**27, progress=progress)
        rs.extend(part)
        rs.params.setdefault("ns", {})[dev] = ns
    return rs


@scan_sweep_experiment.plot
def _(rs, references):
    return timing_figure(rs, references)


@experiment("scan_kernel_variants", title="GPU scans at copy speed? Single pass, the numba block scan's variants, "
                                          "CUB and PyTorch against the device copy", lesson="04")
def scan_kernel_variants(devices, quick, progress):
    """GPU only, one 1-D contiguous float32 array: the device-to-device copy, CUB's DeviceScan::InclusiveSum in
    place on a buffer copied before the timing (cupy.cuda.cub.cub_scan: the library at its own limit, n read
    and n written), cupy.cumsum(x) (a copy of x, then that same scan in place on the copy), torch.cumsum
    (PyTorch's wrapper, which hands a 1-D scan to CUB out of place), the course's
    single-pass scan (decoupled look-back), and the numba
    block-scan kernel (scan-then-add and reduce-then-scan) with and without the shared-memory padding
    against bank conflicts, for several threads x items tile shapes.  Each in GB/s ((bytes read +
    written) / time) and as a fraction of the copy measured in the same run (``of_copy``)."""
    rs = ResultSet("scan_kernel_variants", params={"quick": quick})
    if "gpu" not in devices:
        rs.notes.append("no GPU here: the kernel variants are measured only on a GPU")
        return rs
    from ..devices import cupy_module
    from ..hardware.machine import copy_bandwidth
    from .kernels import block_scan

    cupy = cupy_module()
    n = by_size(quick, 2**26, 2**22, 2**8)     # smoke: two tiles of the smallest shape (the simulator is slow)
    x = make_input(n, "add", "float32", "gpu")
    copy = copy_bandwidth("gpu", nbytes=4 * n, repeat=5 if quick else 20, budget_s=2.0)
    rs.add_timing(copy["timing"], variant="copy", n=n, gb_per_s=copy["gb_per_s"], of_copy=1.0)

    def of_copy(t):
        return 8 * n / t.median / 1e9 / copy["gb_per_s"]

    lib = benchmark(cupy.cumsum, x, device="gpu", repeat=5 if quick else 20, name="cupy.cumsum")
    rs.add_timing(lib, variant="cupy.cumsum", n=n, gb_per_s=8 * n / lib.median / 1e9, of_copy=of_copy(lib))
    try:           # CUB alone: the buffer is copied before the timing, then scanned in place call after call
        buf = x.copy()
        cub = benchmark(cub_inclusive_sum_in_place, buf, device="gpu", repeat=5 if quick else 20,
                        name="CUB DeviceScan::InclusiveSum in place")
        rs.add_timing(cub, variant="CUB scan in place", n=n, gb_per_s=8 * n / cub.median / 1e9,
                      of_copy=of_copy(cub), bytes_moved=8 * n, library="CUB (cupy.cuda.cub.cub_scan)")
        del buf
    except (BadInputError, ImportError, AttributeError) as exc:   # a CuPy built without CUB: said, not timed
        rs.notes.append(f"CUB scan in place: not timed ({type(exc).__name__}: {exc})")
    for alg, label in (("single-pass", "single-pass (look-back)"), ("torch", "torch.cumsum")):
        try:
            rec = time_scan(alg, n, "add", "float32", "gpu", repeat=5 if quick else 20, budget_s=2.0)
        except BadInputError as exc:
            rs.notes.append(f"{label}: not timed ({exc})")
            continue
        rs.add(**{**rec, "variant": label, "of_copy": rec["gb_per_s"] / copy["gb_per_s"],
                  "of_library": lib.median / rec["median_s"], "bytes_moved": 8 * n})
    shapes = by_size(quick, [(128, 4), (256, 4), (256, 8), (512, 8), (128, 16), (1024, 4)], [(256, 8), (128, 16)],
                     [(32, 4)])
    jobs = [(t, i, cf, st) for t, i in shapes for cf in (True, False)
            for st in ("scan-then-add", "reduce-then-scan")]
    for t, i, cf, st in (progress(jobs, total=len(jobs), desc="kernel variants") if progress else jobs):
        tm = benchmark(block_scan, x, exclusive=False, threads=t, items=i, conflict_free=cf,
                       strategy=st, device="gpu", repeat=by_size(quick, 20, 5, 2),
                       name=f"{st} {t}x{i} {'padded' if cf else 'plain'}")
        rs.add_timing(tm, variant=tm.name, threads=t, items=i, conflict_free=cf, strategy=st, n=n,
                      gb_per_s=8 * n / tm.median / 1e9, of_library=lib.median / tm.median, of_copy=of_copy(tm))
    return rs


def _variant_takeaway(src: ResultSet) -> str:
    """The lesson's question answered from one device's bars: the single pass against CUB, torch and CuPy."""
    single, lib = src.select(variant="single-pass (look-back)"), src.select(variant="cupy.cumsum")
    torch, cub = src.select(variant="torch.cumsum"), src.select(variant="CUB scan in place")
    if not (single and lib):
        return ""
    s_gb, l_gb = single[0]["gb_per_s"], lib[0]["gb_per_s"]
    return (f"On the {src.gpu_name or 'GPU'} the course's single-pass scan reaches {s_gb:.3g} GB/s"
            + (f" ({single[0]['of_copy']:.0%} of the device copy)" if single[0].get("of_copy") else "")
            + (f", {s_gb / cub[0]['gb_per_s']:.2g}× the rate of CUB's scan in place" if cub else
               ", not yet against CUB's scan in place (not in this record)")
            + (f", {s_gb / torch[0]['gb_per_s']:.2g}× torch.cumsum's (PyTorch's wrapper)" if torch else "")
            + f", {s_gb / l_gb:.2g}× cupy.cumsum's (a copy, then CUB's scan)")


@scan_kernel_variants.plot
def _(rs, references):
    sources = {}
    for s in [rs] + [r for r in references if r.records]:     # one panel per GPU, live first
        if s.select(device="gpu"):
            sources.setdefault(s.gpu_name or s.label, s)
    srcs = list(sources.values())
    if not srcs:
        fig, (ax,) = new_figure(1, height=2.2)
        ax.text(0.5, 0.5, "No GPU here and no reference GPU results recorded yet for the kernel "
                "variants.\nOn a GPU machine: python -m course report --record-reference",
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.3")
        ax.axis("off")
        add_footer(fig, rs)
        return fig
    def shown(src):      # the copy and the library peers, then the fastest numba block scan of each strategy
        gpu = {r["variant"]: r for r in src.select(device="gpu") if r.get("variant")}
        return [gpu[name] for name in PEERS if name in gpu] + best_block_scans(src)

    rows = max(len(shown(s)) for s in srcs)
    fig, axes = new_figure(len(srcs), width=9.0 if len(srcs) == 1 else 6.5 * len(srcs), height=0.9 + 0.45 * rows)
    for ax, src in zip(axes, srcs):
        recs = shown(src)
        labels = [("numba, best " + r["variant"] if r.get("strategy") else r["variant"])
                  + (f", {r['of_copy']:.0%} of the copy" if r.get("of_copy") else "") for r in recs]
        vals = [r["gb_per_s"] for r in recs]
        ax.barh(range(len(recs)), vals, color=COLORS["gpu"], hatch="//" if src is not rs else None,
                alpha=0.6 if src is not rs else 1.0)
        ax.set_yticks(range(len(recs)), labels, fontsize=9)
        ax.invert_yaxis()
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:,.0f} GB/s", va="center", fontsize=9)
        ax.margins(x=0.25)
        ax.set_xlabel("GB/s = (bytes read + written) / time")
        when = "measured live" if src is rs else f"recorded {src.date}"
        ax.set_title(textwrap.fill(f"{src.gpu_name or 'GPU'} ({when}): n = {recs[0]['n']:,} float32", 60),
                     fontsize=9.5)
    fig.suptitle("GPU scans at one size, (read + written) / time", fontsize=10)
    add_footer(fig, rs if rs.select(device="gpu") else None, [s for s in srcs if s is not rs])
    said = [t for t in (_variant_takeaway(s) for s in srcs) if t]
    if said:
        set_takeaway(fig, "; ".join(said) + ".")
    return fig


@experiment("scan_operators", title="Every operator at one size: Blelloch against the sequential loop",
            lesson="04")
def scan_operators(devices, quick, progress):
    """Inclusive scans of n elements with add, max, 2x2 matrix products and affine maps: the
    level-by-level Blelloch scan against a Python loop (and the library where it has a scan)."""
    n = 2**12 if quick else 2**15
    rs = ResultSet("scan_operators", params={"n": n, "quick": quick})
    jobs = [(d, op, a) for d in devices for op in ("add", "max", "matmul", "affine")
            for a in ALGORITHMS[d] if a in ("numpy", "cupy", "blelloch", "sequential")]
    for dev, op, alg in (progress(jobs, total=len(jobs), desc="operators") if progress else jobs):
        if alg in ("numpy", "cupy") and op not in LIBRARY_OPS[dev]:
            if op in LIBRARY_OPS["cpu"]:          # CuPy's missing running maximum: say so
                rs.notes.append(f"{dev.upper()}: {alg} has no library scan for {op!r}")
            continue
        try:
            rs.add(**time_scan(alg, n, op, "float64", dev, repeat=3 if quick else 7,
                               budget_s=0.2 if quick else 2.0))
        except BadInputError as exc:      # refused up front: noted, the other records kept
            rs.notes.append(f"{dev.upper()} {alg} {op}: skipped ({exc})")
    return rs


@scan_operators.plot
def _(rs, references):
    recs = sorted(rs.records, key=lambda r: (r["device"], r["op"], r["algorithm"]))
    items = [(f"{r['device'].upper()} {r['op']}: {r['algorithm']}", r["median_s"] * 1e3, r["device"])
             for r in recs]
    fig = bar_figure(items, title=f"Inclusive scans of n = {rs.params.get('n', 0):,} float64 elements",
                     unit="ms", live=rs)
    vals = [i[1] for i in items]
    if vals and max(vals) > 100 * min(vals):      # the Python loop dwarfs the rest
        fig.axes[0].set_xscale("log")
    return fig
