"""Widget fuzz: every app's controls at their extremes and at a few seeded random values.

Every app is found the way ``benchmarks/bench_widgets.py`` finds them (each public ``*_app`` of a
``course`` module named ``widgets``, plus lesson 00's), so a new lesson's apps are held to the same
rules without a list to update:

* a refresh ends with no error, or with a course error shown in the app's output area (never a raw
  traceback);
* no refresh hangs (a generous bound, only to catch a hang: speed is a benchmark, never a test);
* no measurement an app starts costs more than :data:`course.widgets.WIDGET_LIMIT_S` by the app's own
  count: the costly measurement functions are replaced by fakes that record what they were asked for
  and say so with a course error, and each request's cost (counted work over the rate the app
  measured at a small size) must stay within the limit.  So the test checks that the bound holds,
  not how fast this machine is.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import random

import numpy as np
import pytest

import course
from course.errors import BadInputError, CourseError
from course.widgets import WIDGET_LIMIT_S, error_message

pytestmark = pytest.mark.widgets

#: Seconds one refresh may take before the test calls it a hang (a fake stands in for every costly
#: measurement, so a real refresh here takes well under a second).
HANG_S = 60.0
#: Random values tried per control, besides its minimum and maximum.
RANDOM_VALUES = 1
#: Slack on the cost bound: rates are measured, and an estimate is compared with the limit as is.
SLACK = 1.0 + 1e-9


def discover() -> list[tuple[str, object]]:
    """``(name, builder)`` for every public ``*_app`` function of the widget modules."""
    names = [m.name for m in pkgutil.walk_packages(course.__path__, "course.")
             if m.name.rsplit(".", 1)[-1] == "widgets" and m.name != "course.widgets"]
    found = []
    for mod_name in sorted(set(names)):
        mod = importlib.import_module(mod_name)
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.endswith("_app") and not name.startswith("_") and fn.__module__ == mod.__name__:
                found.append((f"{mod_name.removeprefix('course.')}.{name}", fn))
    return found


def _needs_arguments(fn) -> bool:
    return any(p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in inspect.signature(fn).parameters.values())


APPS = [(n, f) for n, f in discover() if not _needs_arguments(f)]


class Measured(BadInputError):
    """What a fake measurement raises: the request was recorded (a course error, so apps show it)."""


# ----------------------------------------------------------------- the costs of what an app asks for

def _matmul_cost(n, dtypes=("float32",), devices=("cpu",), rungs=None, **_):
    from course.vectorize.matmul import CPU_FLOAT16_MATMUL_MAX_N, MATMUL_LIMITS
    from course.vectorize.widgets import MATMUL_CALLS, matmul_rate

    total = 0.0
    for rung in rungs or ("loop", "dots", "blas"):
        for dt in dtypes:
            if rung == "gpu" or (rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]) or (
                    rung != "torch" and dt == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N):
                continue     # the ladder skips these itself, with a note
            work = float(n) ** 2 if rung == "dots" else 2.0 * float(n) ** 3
            total += MATMUL_CALLS[rung] * work / matmul_rate(rung, dt)
    return total


def _ladder_cost(op="relu", n=2 ** 16, dtype="float32", devices=("cpu",), lanes=8, **_):
    from course.vectorize.widgets import ladder_cost_s

    return ladder_cost_s(op, n, dtype, lanes) if n > 2 ** 20 and dtype != "bfloat16" else 0.0


def _scan_cost(algorithm, n, op="add", dtype="float32", device="cpu", **_):
    from course.scan import operation_counts
    from course.scan.widgets import SCAN_CALLS, scan_rate

    if device != "cpu":
        return 0.0
    work = n if algorithm in ("numpy", "sequential") else operation_counts(algorithm, n)["work"]
    return SCAN_CALLS * work / scan_rate(algorithm, op)


def _point_cost(op, n, dtype="float32", device="cpu", **_):
    from course.throughput.costs import POINT_CALLS
    from course.throughput.widgets import point_rate

    if device != "cpu" or op not in ("matmul", "mlp step"):
        return 0.0
    if op == "matmul":
        flops = 2.0 * n ** 3
    else:
        from course.backprop import MLP
        from course.throughput.batch import DEFAULT_MLP_SIZES

        flops = MLP(list(DEFAULT_MLP_SIZES), seed=0).flops_per_step(n)
    return POINT_CALLS * flops / point_rate(op, dtype)


def _sweep_cost(op, sizes, dtype="float32", devices=("cpu",), **_):
    from course.throughput.costs import SWEEP_CALLS
    from course.throughput.widgets import op_rate

    if "cpu" not in devices:
        return 0.0
    return sum(SWEEP_CALLS * (2.0 * n ** 3 if op == "matmul" else float(n)) / op_rate(op, dtype) for n in sizes)


def _fusion_cost(n=2 ** 20, steps=4, dtype="float32", devices=("cpu",), **_):
    from course.throughput.widgets import fusion_cost_s

    return fusion_cost_s(n, steps, dtype) if "cpu" in devices and n > 2 ** 20 else 0.0


def _async_cost(device, n=2 ** 16, chain=20, **_):
    from course.throughput.widgets import async_cost_s

    return async_cost_s(n, chain) if device == "cpu" and chain * n > 8 * 2 ** 20 else 0.0


def _sizes(width, depth):
    return [784] + [int(width)] * int(depth) + [10]


def _mlp_flops(width, depth, batch):
    from course.backprop import MLP

    return MLP(_sizes(width, depth)).flops_per_step(batch)


def _trace_cost(model, x, y, **_):
    from course.backprop.widgets import STEP_CALLS, step_rate

    if model.device != "cpu":
        return 0.0
    return STEP_CALLS["trace"] * model.flops_per_step(int(x.shape[0])) / step_rate(model.sizes, model.dtype.name)


def _step_sweep_cost(widths, depth, batch, dtype="float32", **_):
    from course.backprop.widgets import STEP_CALLS, step_rate

    return sum(STEP_CALLS["sweep"] * _mlp_flops(w, depth, batch) / step_rate(_sizes(w, depth), dtype) for w in widths)


def _checkpoint_cost(depth, width, batch, **_):
    from course.backprop.widgets import STEP_CALLS, step_rate

    ks = {k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, depth + 1) if k <= depth + 1}
    return STEP_CALLS["checkpoint"] * len(ks) * _mlp_flops(width, depth, batch) / step_rate(_sizes(width, depth),
                                                                                           "float32")


def _rnn_cost(T, hidden, batch, device="cpu", torch=False, budget_s=10.0, **_):
    from course.bppsa.widgets import round_rate

    if device != "cpu":
        return 0.0
    one = T / round_rate(hidden, batch)
    return max(2 * one, budget_s + one)


def _attention_cost(method, n, d=64, *_a, block=64, **_k):
    from course.attention.widgets import attention_cost_s

    return attention_cost_s(method, n, d, block)


def _none(*_a, **_k):
    return None


#: module -> {function name: cost(args, kwargs) in estimated seconds, or None when it has no bound to check}.
FAKES = {
    "course.vectorize.widgets": {"ladder": _ladder_cost, "relu_bandwidth": _none, "matmul_ladder": _matmul_cost},
    "course.throughput.widgets": {"smallest_op_latency": _none, "throughput_sweep": _sweep_cost,
                                  "async_chain": _async_cost, "batch_sweep": _none, "fusion_compare": _fusion_cost,
                                  "precision_sweep": _none, "roofline_point": _point_cost, "cached_peaks": _none},
    "course.throughput.memory": {"memory_latency_sweep": _none},
    "course.scan.widgets": {"time_scan": _scan_cost},
    "course.backprop.widgets": {"train": _none, "trace_step": _trace_cost, "step_time_sweep": _step_sweep_cost,
                                "checkpoint_sweep": _checkpoint_cost},
    "course.bppsa.widgets": {"timing_update": _rnn_cost},
    "course.recurrences.widgets": {"time_recurrence": _none},
    "course.attention.widgets": {"time_attention": _attention_cost},
    "course.hardware.widgets": {"time_matmul": _none, "matmul_sweep": _none},
}
#: Fakes that answer with the real function at its smallest size instead of raising (the app makes
#: several such calls per refresh, and draws what they return).
SMALLEST = {"matmul_ladder": 16}


@pytest.fixture
def requests(monkeypatch):
    """Replace every costly measurement by a recorder; yields the list of ``(function, cost_s)`` asked for."""
    asked: list[tuple[str, float | None, tuple, dict]] = []
    for mod_name, fns in FAKES.items():
        mod = importlib.import_module(mod_name)
        for fn_name, cost in fns.items():
            if not hasattr(mod, fn_name):
                continue

            real = getattr(mod, fn_name)

            def fake(*args, _name=fn_name, _cost=cost, _real=real, **kwargs):
                asked.append((_name, _cost(*args, **kwargs), args, kwargs))
                if _name in SMALLEST:
                    return _real(SMALLEST[_name], *args[1:], **(kwargs | {"repeat": 1, "budget_s": 0.01}))
                raise Measured(f"{_name} was asked to measure (a fake in this test)")

            monkeypatch.setattr(mod, fn_name, fake)
    yield asked


# ----------------------------------------------------------------- driving the controls

def _values(widget, rng: random.Random) -> list:
    """Minimum, maximum and a few random values of a control (first, last and random options of a menu)."""
    opts = getattr(widget, "options", None)
    if opts:
        values = [o[1] if isinstance(o, tuple) else o for o in opts]
        return [values[0], values[-1]] + rng.sample(values[1:-1], min(RANDOM_VALUES, max(len(values) - 2, 0)))
    if isinstance(widget.value, bool):
        return [False, True]
    lo, hi = getattr(widget, "min", None), getattr(widget, "max", None)
    if lo is None or hi is None:
        return []
    if isinstance(widget.value, float):
        return [lo, hi] + [rng.uniform(lo, hi) for _ in range(RANDOM_VALUES)]
    return [lo, hi] + [rng.randint(lo, hi) for _ in range(RANDOM_VALUES)]


def _check_refresh(app, name: str, setting: str) -> None:
    err = app.last_error
    assert app.last_seconds < HANG_S, f"{name} {setting}: a refresh took {app.last_seconds:.0f} s"
    if err is None:
        return
    assert isinstance(err, CourseError), (
        f"{name} {setting}: {type(err).__name__}: {err} (not a course error)")
    shown = app.shown_error()
    assert error_message(err) in shown, f"{name} {setting}: the error is not shown in the app"


def _check_costs(asked, name: str, setting: str) -> None:
    for fn_name, cost, args, kwargs in asked:
        if cost is not None:
            assert cost <= WIDGET_LIMIT_S * SLACK, (
                f"{name} {setting}: {fn_name}{args[:4]} {kwargs} was asked for, estimated at {cost:.1f} s "
                f"(the limit is {WIDGET_LIMIT_S:g} s)")


@pytest.mark.slow        # seconds per app: the full tier (make test) runs it, under ipywidgets 8 and 7.7.1
@pytest.mark.parametrize("name,builder", APPS, ids=[n for n, _ in APPS])
def test_every_setting_refreshes_within_the_cost_bound(name, builder, requests):
    rng = random.Random(f"fuzz {name}")
    app = builder()
    _check_refresh(app, name, "at its defaults")
    controls = dict(app.controls)
    # each control alone, through its extremes and a few random values
    for key, widget in controls.items():
        for value in _values(widget, rng):
            requests.clear()
            calls = app.calls
            try:
                widget.value = value      # the app refreshes itself when a value changes
            except Exception:       # a value the widget itself refuses (e.g. outside a linked range)
                continue
            if app.calls == calls:
                app.refresh()
            setting = f"with {key}={value!r} ({app.values()})"
            _check_refresh(app, name, setting)
            _check_costs(requests, name, setting)
    # every control at its maximum together, then at its minimum together: the costliest corner
    for end in (1, 0):
        for widget in controls.values():
            vals = _values(widget, random.Random(0))
            if vals:
                try:
                    widget.value = vals[end]
                except Exception:
                    continue
        requests.clear()
        app.refresh()
        setting = f"at {app.values()}"
        _check_refresh(app, name, setting)
        _check_costs(requests, name, setting)
    # a refused or slow corner leaves the app usable: back at the defaults it still works
    builder_app = builder()
    _check_refresh(builder_app, name, "rebuilt at its defaults")


def test_the_fuzz_finds_every_lesson():
    found = {n.split(".")[0] for n, _ in APPS}
    assert {"backprop", "vectorize", "throughput", "scan", "bppsa", "recurrences", "parallel", "hardware",
            "attention"} <= found


def test_matmul_plan_keeps_every_size_under_the_limit():
    from course.vectorize.widgets import matmul_plan

    for n in (16, 96, 384, 512, 1024, 2048):
        plan, left_out = matmul_plan(n, ("float32", "float16"), ("loop", "dots", "blas"))
        total = sum(_matmul_cost(n, dtypes=(dt,), rungs=rungs) for dt, rungs in plan.items() if rungs)
        assert total <= WIDGET_LIMIT_S * SLACK, (n, plan, total)
    plan, _ = matmul_plan(2048, ("float16",), ("blas",))
    assert plan["float16"] == [], "the emulated float16 product at n = 2048 must not be timed"


def test_a_refused_setting_says_how_long_and_what_to_choose(monkeypatch):
    """The slow corner of the issue (a float16 MLP step at batch 2^16) is refused before measuring,
    with the estimate and a smaller size; the next valid setting measures again."""
    from course.throughput import widgets as tw

    monkeypatch.setattr(tw, "point_rate", lambda op, dtype: 1e9)   # 1 GFLOP/s, whatever the machine does
    calls = []
    monkeypatch.setattr(tw, "roofline_point", lambda *a, **k: calls.append(a) or (_ for _ in ()).throw(
        Measured("measured")))
    app = tw.roofline_app(op="mlp step", exponent=8)
    app.controls["dtype"].value = "float16"
    calls.clear()
    app.controls["exponent"].value = 16
    assert calls == [] and isinstance(app.last_error, BadInputError)
    msg = str(app.last_error)
    assert "would take about" in msg and "Choose a size of at most 2^" in msg
    app.controls["exponent"].value = 4
    assert calls and isinstance(app.last_error, Measured)


def test_fake_requests_are_recorded(requests):
    """The recorder sees what an app asks for (else the cost checks above would check nothing)."""
    from course.scan import widgets as sw

    app = sw.timing_app(n=2 ** 6)
    assert any(name == "time_scan" for name, *_ in requests)
    assert app.last_error is None or isinstance(app.last_error, CourseError)
    assert np.isfinite(sum(c for _, c, *_ in requests if c is not None))
