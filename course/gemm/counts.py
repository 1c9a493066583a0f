"""Why each rung is faster, counted: loads, FMAs and bytes per thread and per block, from the tile sizes alone.

For an ``m × n × k`` product on one rung of :data:`~course.gemm.ladder.GPU_RUNG_SPECS`
(:func:`rung_counts`), per thread:

* ``fma``: multiply-adds (on the mma rungs, the warp's tensor-core multiply-adds divided by 32);
* ``global_loads`` and ``global_load_bytes``: load instructions from DRAM/L2 and the bytes they ask for
  (a float4 or a 16-byte ``cp.async`` is one instruction);
* ``shared_loads`` and ``shared_load_bytes``: shared-memory load instructions (an ``ldmatrix.x4`` is one)
  and bytes; ``shared_loads_per_fma``.

Per block, the DRAM bytes when each block reads its A panel (``bm × k``) and B panel (``k × bn``) once and
writes its ``bm × bn`` outputs, and the arithmetic intensity that gives (FLOP per DRAM byte).  For the two
rungs without tiles that is what the caches would have to achieve; ``sector_bytes_per_fma`` says what
their warps actually ask the memory system for (32-byte sectors: 32 per uncoalesced warp load).

:func:`limiter` turns the counts into cycles per SM for each resource from data-sheet ratios
(:data:`DATA_SHEET`, each with its source) and names the largest.  These are predictions to hold
against the timings, not measurements.  :mod:`course.gemm.emulate` counts the same loads thread by
thread, and the tests compare the two.

>>> c = rung_counts("blocktile_2d", 4096, 4096, 4096)
>>> c["fma"], c["shared_loads_per_fma"], round(c["intensity"], 1)
(262144.0, 0.25, 31.5)
>>> limiter("naive", 4096, 4096, 4096)["limiter"]
'L1/L2 traffic'
"""

from __future__ import annotations

from ..arguments import OneOf, Whole, arguments
from .ladder import GPU_RUNG_SPECS, GPU_RUNGS

__all__ = ["DATA_SHEET", "rung_counts", "limiter", "counts_table"]

#: Hardware ratios per SM and clock, each a data-sheet figure with its source (not a measurement).
DATA_SHEET = {
    "fp32_fma_per_clk": (128, "data sheet: 128 FP32 lanes per SM on Hopper (NVIDIA H100 whitepaper; A100: 64)"),
    "shared_bytes_per_clk": (128, "data sheet: 32 banks of 4 bytes per clock (CUDA C++ Programming Guide)"),
    "l1_bytes_per_clk": (128, "data sheet: L1 and shared memory are one 128 B/clock array (H100 whitepaper)"),
    "tf32_fma_per_clk": (512, "data sheet: A100 TF32 156 TFLOP/s dense on 108 SMs at 1.41 GHz = 512 FMA/clock/SM "
                              "(mma.sync; Hopper's wgmma reaches twice that)"),
    "bf16_fma_per_clk": (1024, "data sheet: A100 bf16 312 TFLOP/s dense = 1024 FMA/clock/SM (mma.sync)"),
    "dram_bytes_per_clk": (18, "data sheet: H200 4.8 TB/s over 132 SMs at 1.98 GHz = 18 B/clock/SM"),
}


@arguments(rung=OneOf(*GPU_RUNGS), m=Whole(), n=Whole(), k=Whole())
def rung_counts(rung: str, m: int, n: int, k: int) -> dict:
    """Loads, FMAs and bytes of one rung's kernel on an ``m × n × k`` product (sizes rounded up to its tile,
    as :func:`~course.gemm.ladder.gpu_matmul` pads them), per thread and per block."""
    s = GPU_RUNG_SPECS[rung]
    mults = s.multiple if not s.bounds_checked else (s.bm, s.bn, 1)
    m, n, k = (-(-v // q) * q for v, q in zip((m, n, k), mults))
    esize = 2 if s.precision == "bfloat16" else 4
    blocks = (m // s.bm) * (n // s.bn)
    fma = m * n * k / (blocks * s.threads)
    tiles = k / s.bk
    if rung in ("naive", "coalesced"):                     # two scalar loads per k, no shared memory
        g_instr, g_bytes, s_instr, s_bytes = 2.0 * k, 8.0 * k, 0.0, 0.0
    else:
        per_tile = (s.bm * s.bk + s.bk * s.bn) / s.threads  # elements of A and B each thread brings per k-tile
        width = {"vectorized": 4, "warptile": 4, "mma_tf32": 4, "mma_bf16": 8}.get(rung, 1)
        g_instr, g_bytes = tiles * per_tile / width, tiles * per_tile * esize
        if rung == "shared":
            s_instr, s_bytes = 2.0 * s.bk, 8.0 * s.bk
        elif rung == "blocktile_1d":
            s_instr, s_bytes = s.bk * (1 + s.tm), 4.0 * s.bk * (1 + s.tm)
        elif rung == "blocktile_2d":
            s_instr, s_bytes = s.bk * (s.tm + s.tn), 4.0 * s.bk * (s.tm + s.tn)
        elif rung == "vectorized":
            s_instr, s_bytes = s.bk * (s.tm + s.tn) / 4, 4.0 * s.bk * (s.tm + s.tn)
        elif rung == "warptile":
            s_instr, s_bytes = s.bk * (s.tm + s.tn / 4), 4.0 * s.bk * (s.tm + s.tn)
        else:                                              # the mma rungs: fragments of MI x NI tiles per k-step
            mi, ni = s.warp_tile[0] // 16, s.warp_tile[1] // 8
            steps = s.bk / s.mma[2]
            if rung == "mma_tf32":                         # 4 scalar loads per A fragment, 2 per B fragment
                s_instr, s_bytes = steps * (4 * mi + 2 * ni), 4.0 * steps * (4 * mi + 2 * ni)
            else:                                          # one ldmatrix.x4 per A tile, one per two B tiles
                s_instr, s_bytes = steps * (mi + ni / 2), 16.0 * steps * (mi + ni / 2)
        s_instr, s_bytes = s_instr * tiles, s_bytes * tiles
    dram = (s.bm + s.bn) * k * esize + s.bm * s.bn * 4
    sectors = {"naive": 33 * 32 / 32, "coalesced": 5 * 32 / 32}.get(rung)   # per warp-k-step: A + B sectors
    return {"rung": rung, "m": m, "n": n, "k": k, "blocks": blocks, "threads": s.threads, "fma": fma,
            "global_loads": g_instr, "global_load_bytes": g_bytes, "shared_loads": s_instr,
            "shared_load_bytes": s_bytes, "shared_loads_per_fma": s_instr / fma,
            "dram_bytes_per_block": float(dram), "intensity": 2.0 * s.bm * s.bn * k / dram,
            "sector_bytes_per_fma": sectors if sectors is not None else g_bytes / fma}


@arguments(rung=OneOf(*GPU_RUNGS), m=Whole(), n=Whole(), k=Whole())
def limiter(rung: str, m: int, n: int, k: int) -> dict:
    """Cycles per SM each resource needs for the whole product (data-sheet ratios, :data:`DATA_SHEET`), and the
    ``limiter``: "DRAM (no L2 reuse)", "L1/L2 traffic", "shared-memory issue", "FMA issue" or "tensor-core issue".
    The DRAM term is an upper bound: it charges every block its whole A and B panels from DRAM, as if the L2
    cache kept nothing between blocks; on a real GPU neighbouring blocks share panels through L2, so a rung
    named "DRAM (no L2 reuse)" may well be bound by its tensor-core issue instead (only the timing says).
    The model has no latency term: a rung measured far slower than its limiter's cycles allow is bound by
    latency (one k-tile in flight, too few warps per SM), which only the timing shows."""
    c = rung_counts(rung, m, n, k)
    s = GPU_RUNG_SPECS[rung]
    ds = {key: v[0] for key, v in DATA_SHEET.items()}
    total_fma, threads = c["fma"] * c["blocks"] * s.threads, c["blocks"] * s.threads
    rate = {"float32": ds["fp32_fma_per_clk"], "tf32": ds["tf32_fma_per_clk"], "bfloat16": ds["bf16_fma_per_clk"]}
    cycles = {"FMA issue" if s.precision == "float32" else "tensor-core issue": total_fma / rate[s.precision],
              "DRAM (no L2 reuse)": c["dram_bytes_per_block"] * c["blocks"] / ds["dram_bytes_per_clk"],
              "L1/L2 traffic": c["sector_bytes_per_fma"] * total_fma / ds["l1_bytes_per_clk"],
              "shared-memory issue": c["shared_load_bytes"] * threads / ds["shared_bytes_per_clk"]}
    name = max(cycles, key=cycles.get)
    return {"rung": rung, "cycles_per_sm_summed": cycles, "limiter": name,
            "sources": {key: v[1] for key, v in DATA_SHEET.items()}}


@arguments(m=Whole(), n=Whole(), k=Whole())
def counts_table(m: int = 4096, n: int = 4096, k: int = 4096) -> list[dict]:
    """:func:`rung_counts` of every rung with its :func:`limiter`, in teaching order, for the lesson to print."""
    return [dict(rung_counts(r, m, n, k), limiter=limiter(r, m, n, k)["limiter"]) for r in GPU_RUNGS]
