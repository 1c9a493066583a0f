"""Every exercise check answers an adversarial answer in words and says False: a result in complex numbers
or in strings, NaN, an object that cannot be read, a function that writes into its inputs, raises (on the
speed test's input too), or calls ``sys.exit``.  Each wrong answer is built from a right one, so a check that
let it through would have passed a wrong answer."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_long_exercises import EXERCISES, answer

import course.check
from course.bppsa.algorithm import backprop_sequential
from course.gemm.checks import tf32_a_fragment
from course.parallel.collectives import bytes_per_worker, ring_chunks
from course.parallel.data_parallel import average_gradients
from course.recurrences.checks import affine_combine, state_gradients
from course.scan.checks import down_sweep_level, exclusive_from_inclusive, up_sweep_level
from course.throughput.batch import batch_for_fraction
from course.vectorize.exercises import leaky_relu, softmax_rows


def _roofline(f, b, pf, pb):
    return "memory-bound" if f / b < pf / pb else "compute-bound"


#: check -> a right answer (the long exercises' answers come from the solutions notebooks)
RIGHT = {
    "check_affine_combine": lambda: affine_combine,
    "check_backprop_sequential": lambda: backprop_sequential,
    "check_batch_for_fraction": lambda: batch_for_fraction,
    "check_bppsa_operator": lambda: (lambda a, b: b @ a),
    "check_bytes_per_worker": lambda: bytes_per_worker,
    "check_down_sweep_level": lambda: down_sweep_level,
    "check_exclusive_from_inclusive": lambda: exclusive_from_inclusive,
    "check_gradient_average": lambda: average_gradients,
    "check_leaky_relu": lambda: leaky_relu,
    "check_linear_weight_grad": lambda: (lambda x, dout: x.T @ dout),
    "check_mma_fragment": lambda: tf32_a_fragment,
    "check_matmul_intensity": lambda: (lambda n, s: 2 * n ** 3 / (3 * n * n * s)),
    "check_reverse_recurrence": lambda: state_gradients,
    "check_ring_chunks": lambda: ring_chunks,
    "check_rnn_jacobian_t": lambda: (lambda W, h: W.T[None] * (1 - h ** 2)[:, None, :]),
    "check_roofline_bound": lambda: _roofline,
    "check_sigmoid_backward": lambda: (lambda d, o: d * o * (1 - o)),
    "check_softmax_rows": lambda: softmax_rows,
    "check_up_sweep_level": lambda: up_sweep_level,
} | {name: (lambda name=name: answer(name)) for name in EXERCISES if not name.startswith("check_kernel_")}

#: the checks whose learner answer is a kernel (run on the simulator), not a function of arrays
KERNEL_CHECKS = sorted(name for name in course.check.__all__ if name.startswith("check_kernel_"))


#: the checks of functions whose right answer the sweep does not know yet: the variants that need none
OTHERS = sorted(set(course.check.__all__) - set(RIGHT) - set(KERNEL_CHECKS))
WITHOUT_ANSWER = ("exit", "raise", "unreadable")


class Unreadable:
    """An answer nothing can read: every way of looking at it raises."""

    def _no(self, *args, **kwargs):
        raise RuntimeError("you cannot read me")

    __array__ = __len__ = __iter__ = __float__ = __int__ = __index__ = __getitem__ = __bool__ = _no
    __eq__ = __ne__ = __lt__ = __gt__ = __le__ = __ge__ = __add__ = __radd__ = __mul__ = __rmul__ = _no
    __hash__ = None


def _numeric(value) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating, np.ndarray)) and not isinstance(value, bool)
            and (not isinstance(value, np.ndarray) or value.dtype.kind in "iuf"))


def _spoil(how: str, value):
    """The right answer ``value`` made wrong in one way (recursively through tuples, lists and dicts)."""
    if isinstance(value, dict):
        return {k: _spoil(how, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_spoil(how, v) for v in value)
    if isinstance(value, str):
        return {"complex": 1e-9j, "str": np.array(value), "nan": float("nan")}[how]
    if _numeric(value):
        if how == "complex":
            return np.asarray(value) + 1e-9j if np.ndim(value) else np.complex128(value + 1e-9j)
        if how == "str":
            return np.asarray(value).astype(str)
        return np.full(np.shape(value), np.nan)
    return value


def _arrays_in(args) -> list[np.ndarray]:
    found = []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind in "iuf" and a.flags.writeable:
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found += _arrays_in(a)
        elif isinstance(a, dict):
            found += _arrays_in(list(a.values()))
    return found


def _variants(right):
    """name -> a wrong answer built from ``right``."""
    def spoiled(how):
        return lambda *a, **k: _spoil(how, right(*a, **k))

    def exits(*a, **k):
        sys.exit(3)

    def raises(*a, **k):
        raise ValueError("deliberately broken")

    def raises_when_big(*a, **k):
        if any(x.size > 1000 for x in _arrays_in(a) + _arrays_in(list(k.values()))):
            raise ValueError("broken on big inputs only")
        return right(*a, **k)

    def exits_when_big(*a, **k):
        if any(x.size > 1000 for x in _arrays_in(a) + _arrays_in(list(k.values()))):
            raise SystemExit(0)
        return right(*a, **k)

    def writes_its_input(*a, **k):
        """Right for the input it leaves behind (doubled), wrong for the input it was given."""
        for x in _arrays_in(a) + _arrays_in(list(k.values())):
            x *= 2
        return right(*a, **k)

    return {"complex": spoiled("complex"), "str": spoiled("str"), "nan": spoiled("nan"), "exit": exits,
            "raise": raises, "raise_when_big": raises_when_big, "exit_when_big": exits_when_big,
            "unreadable": lambda *a, **k: Unreadable(), "writes_its_input": writes_its_input}


CASES = [(check, how) for check in sorted(RIGHT) for how in _variants(None)]
CASES += [(check, how) for check in OTHERS for how in WITHOUT_ANSWER]


@pytest.mark.parametrize("check, how", CASES, ids=[f"{c}-{h}" for c, h in CASES])
def test_an_adversarial_answer_is_answered_in_words_and_fails(check, how, capsys):
    right = RIGHT[check]() if check in RIGHT else None
    wrong = _variants(right)[how]
    if how in ("raise_when_big", "exit_when_big", "writes_its_input"):
        seen = []

        def spy(*a, **k):
            seen.extend(x.size for x in _arrays_in(a) + _arrays_in(list(k.values())))
            return right(*a, **k)
        ok = getattr(course.check, check)(spy)
        capsys.readouterr()
        assert ok is True, f"{check} fails its own right answer"
        if how == "writes_its_input" and not seen or how != "writes_its_input" and not any(s > 1000 for s in seen):
            pytest.skip(f"{check} hands the learner no such array")
    result = getattr(course.check, check)(wrong)
    out = capsys.readouterr().out
    assert result is False, f"{check} passed a wrong answer ({how}): {out}"
    assert out.strip(), f"{check} said nothing"


def _exiting_kernel(out, a):
    sys.exit(3)


def _raising_kernel(*args):
    raise ValueError("deliberately broken")


@pytest.mark.parametrize("check", KERNEL_CHECKS)
@pytest.mark.parametrize("kernel", [_exiting_kernel, _raising_kernel, None, "relu"])
def test_a_kernel_check_answers_a_broken_kernel_in_words(check, kernel, capsys):
    assert getattr(course.check, check)(kernel) is False
    assert capsys.readouterr().out.strip()
