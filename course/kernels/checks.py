"""The kernel exercises' checks, collected as ``course.check.<name>`` (see ``course/check.py``).

Each runs your kernel on the CUDA simulator (and on a GPU where one answers), prints precisely what
is wrong or that it is right, and returns True/False.

>>> from course.kernels import reference
>>> check_kernel_map(reference.relu_map)
Correct: ...
True
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_kernel_map", "check_kernel_guard", "check_kernel_zip", "check_kernel_scale_rows",
           "check_kernel_block_sum", "check_kernel_matmul_tiled", "check_kernel_hillis_steele", "check_kernel_blelloch",
           "check_kernel_transpose_fast", "check_kernel_reduction_fast", "check_kernel_scan_fast"]


def _check(name: str, kernel: Any) -> bool:
    from .grading import grade, worst_counts
    g = grade(name, kernel)
    if not g.ok and g.problems[0].startswith("Not done yet"):
        print(g.problems[0])
        return False
    if not g.ok:
        many = len(g.problems) > 1
        print(f"Not yet ({name}):" if many else "Not yet:", *g.problems, sep="\n  - " if many else " ")
        return False
    from .exercises import exercise
    worst = worst_counts(g.trace)
    used = ", ".join(f"{worst.get(k, (0,))[0]} {k.replace('_', ' ')}" for k in exercise(name).budget)
    print(f"Correct: right values, no race, every index in bounds; the busiest thread made {used} "
          f"(within the budget).", *g.notes)
    return True


def check_kernel_map(kernel: Any) -> bool:
    """Check the ReLU map kernel ``kernel(out, a)`` (8 threads, one element each)."""
    return _check("map", kernel)


def check_kernel_guard(kernel: Any) -> bool:
    """Check the guarded ReLU kernel ``kernel(out, a, n)`` (n = 10, 3 blocks of 4 threads)."""
    return _check("guard", kernel)


def check_kernel_zip(kernel: Any) -> bool:
    """Check the fused multiply-add kernel ``kernel(out, w, x, b, n)``: out = w * x + b."""
    return _check("zip", kernel)


def check_kernel_scale_rows(kernel: Any) -> bool:
    """Check the row scaling ``kernel(out, a, s)``: out[r, c] = a[r, c] * s[r], graded on its memory sectors too."""
    return _check("scale_rows", kernel)


def check_kernel_block_sum(kernel: Any) -> bool:
    """Check the shared-memory block reduction ``kernel(out, a, n)``: out[b] = sum of block b's tile."""
    return _check("block_sum", kernel)


def check_kernel_matmul_tiled(kernel: Any) -> bool:
    """Check the tiled matrix product ``kernel(c, a, b, n)``: c = a @ b with shared-memory tiles."""
    return _check("matmul_tiled", kernel)


def check_kernel_hillis_steele(kernel: Any) -> bool:
    """Check the Hillis-Steele inclusive block scan ``kernel(out, a)``."""
    return _check("hillis_steele", kernel)


def check_kernel_blelloch(kernel: Any) -> bool:
    """Check the Blelloch exclusive block scan ``kernel(out, a)``."""
    return _check("blelloch", kernel)


def check_kernel_transpose_fast(kernel: Any) -> bool:
    """Check the transpose ``kernel(out, a)``: out = a.T, with global sectors and bank conflicts on target."""
    from .tuning import report_tuning
    return report_tuning("transpose", kernel)


def check_kernel_reduction_fast(kernel: Any) -> bool:
    """Check the block reduction ``kernel(out, a)``: divergent warps and bank conflicts on target."""
    from .tuning import report_tuning
    return report_tuning("reduction", kernel)


def check_kernel_scan_fast(kernel: Any) -> bool:
    """Check the tile scan ``kernel(out, a)``: exclusive scan of each tile, bank conflicts on target."""
    from .tuning import report_tuning
    return report_tuning("scan", kernel)
