"""Lesson 02: which SIMD code numpy really runs for each operation, and what it costs.

numpy is compiled several times over for different instruction-set levels and
picks, per ufunc and per dtype, the best one this CPU supports when it starts.
:func:`ufunc_dispatch` asks numpy (``numpy.lib.introspect.opt_func_info``, numpy
2.0 and later) which level each ufunc of the ladder's operations runs with here.

The level is not the whole story: inside one ufunc numpy has several inner
loops, e.g. one for two contiguous arrays and one for an array and a scalar, and
they need not be equally fast.  :func:`course.vectorize.timing.operand_probe` times ``maximum`` both ways
on an array that fits in the cache (so the memory does not hide the difference).

>>> info = ufunc_dispatch("relu", "float32")
>>> list(info) == ["maximum"] or info == {}
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Dtype, arguments
from ..errors import BadInputError

__all__ = ["OP_UFUNCS", "LEVELS", "ufunc_dispatch", "dispatch_table_html"]

#: The numpy ufuncs each elementwise op of :mod:`course.vectorize` calls, in order.
OP_UFUNCS = {"relu": ("maximum",), "sigmoid": ("negative", "exp", "add", "reciprocal"),
             "affine_relu": ("multiply", "add", "maximum")}

#: What numpy's dispatch target names mean (x86-64 micro-architecture levels and others).
LEVELS = {
    "X86_V4": "AVX-512 (x86-64-v4): 512-bit registers, 16 float32 lanes",
    "X86_V3": "AVX2 + FMA (x86-64-v3): 256-bit registers, 8 float32 lanes",
    "X86_V2": "SSE4.2 (x86-64-v2): 128-bit registers, 4 float32 lanes",
    "AVX512_SKX": "AVX-512 (Skylake-X): 16 float32 lanes", "AVX512F": "AVX-512: 16 float32 lanes",
    "AVX512_ICL": "AVX-512 (Ice Lake): 16 float32 lanes", "AVX2": "AVX2: 8 float32 lanes",
    "ASIMD": "ARM NEON/ASIMD: 128-bit, 4 float32 lanes", "NEON": "ARM NEON: 4 float32 lanes",
    "SVE": "ARM SVE: scalable vectors", "VSX": "POWER VSX: 4 float32 lanes",
}


def _nbits_sig(dtype: np.dtype, nargs: int) -> str:
    return np.dtype(dtype).char * nargs


def ufunc_dispatch(op: str, dtype: Any = "float32") -> dict[str, dict[str, str]]:
    """For each ufunc ``op`` uses: ``{"current": target numpy runs here, "available": all built}``.

    Returns ``{}`` on numpy older than 2.0, which cannot report it.

    >>> isinstance(ufunc_dispatch("sigmoid"), dict)
    True
    """
    if op not in OP_UFUNCS:
        raise BadInputError(f"op must be one of {tuple(OP_UFUNCS)}, got {op!r}")
    dt = np.dtype(dtype)
    try:
        from numpy.lib.introspect import opt_func_info
    except ImportError:
        return {}
    out: dict[str, dict[str, str]] = {}
    for name in OP_UFUNCS[op]:
        uf = getattr(np, name)
        sig = _nbits_sig(dt, uf.nin + uf.nout)
        try:
            info = opt_func_info(func_name=f"^{name}$").get(name, {})
        except Exception:
            info = {}
        entry = info.get(sig)
        if entry:
            out[name] = {"current": str(entry.get("current", "?")), "available": str(entry.get("available", ""))}
        else:
            out[name] = {"current": f"not dispatched for {dt.name} (one generic build)", "available": ""}
    return out


def _meaning(target: str) -> str:
    key = target.replace("baseline(", "").rstrip(")")
    return LEVELS.get(key, "")


@arguments(dtype=Dtype())
def dispatch_table_html(dtype: Any = "float32", ops: tuple[str, ...] = tuple(OP_UFUNCS)) -> str:
    """An HTML table: op, ufunc, the SIMD target numpy runs here, what that target means."""
    import html

    rows = []
    for op in ops:
        info = ufunc_dispatch(op, dtype)
        if not info:
            return ("<p>This numpy (before 2.0) cannot report which SIMD loop each ufunc runs; "
                    "numpy 2 answers through <code>numpy.lib.introspect.opt_func_info</code>.</p>")
        for name, d in info.items():
            rows.append(f"<tr><td>{html.escape(op)}</td><td><code>np.{name}</code></td>"
                        f"<td>{html.escape(d['current'])}</td><td>{html.escape(_meaning(d['current']))}</td>"
                        f"<td><small>{html.escape(d['available'])}</small></td></tr>")
    return ("<table><tr><th>op</th><th>ufunc</th><th>runs here</th><th>meaning</th>"
            f"<th>built for</th></tr>{''.join(rows)}</table>")
