"""A door new code cannot skip (issue 49): every public function and class of ``course`` that takes arguments
declares its rules (``@arguments``) or opens with a validation, and every declared rule refuses the generic bad
values of its kind with a :class:`~course.errors.CourseError` before the body runs.

The walk imports every module of the package (lessons, the spine, and any lesson still being written, such as
``course.gemm``) and reads the ``__all__`` of each.  A name passes the door when

* its function (a class: its ``__init__`` or its dataclass ``__post_init__``) carries ``@arguments``' rules, or
  opens (after its docstring) with a validation: a ``validate_*`` / ``require_*`` / ``whole_number`` /
  ``finite_number`` / ``random_generator`` call, or an ``if ...: raise``;
* it is a validator itself (``validate_*``, ``require_*``, the argument checks of ``course.errors``), an
  exception class, or an exercise check (``check_*`` of a ``checks`` module: its one argument is the learner's
  function, which it runs only through ``course.grading.call_learner``, and ``course.grading.in_words`` is its
  last guard);
* it is on :data:`ALLOWED`, each entry with the reason it needs no rule.

``tests/_door_debt.py`` lists, module by module, the names that already had no door when the walk was written:
the debt, frozen.  A new name without a door fails the test (declare its rules); a listed name that gains one
fails too, until it is taken off the list, so the list only shrinks.

The rules are then fed their kind's bad values directly, with the argument's declared name (the body never
runs, so nothing it would allocate is allocated): a rule must raise a ``CourseError`` — never a ``TypeError``,
never a silent pass — and may allocate at most :data:`PEAK_LIMIT` bytes while it refuses.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import math
import pkgutil
import re
import textwrap
import tracemalloc

import numpy as np
import pytest

import course
from course.arguments import Devices, Dtype, Given, OneOf, Optional, Real, Seed, Whole, Wholes
from course.errors import CourseError

PEAK_LIMIT = 64 * 2**20
VALIDATION_CALL = re.compile(r"^_?(validate_\w*|require_\w*|validate|whole_number|finite_number|random_generator)$")
VALIDATOR_NAME = re.compile(r"^(validate_\w*|require_\w*|whole_number|finite_number|random_generator|shown_value)$")

#: Public functions and classes that take arguments and need no rule, each with its reason.
ALLOWED = {
    "course.capture.Captured": "the record capture_graph returns (a graph or None, its stream, the reason): made "
                               "by the course's own code, never by a learner",
    "course.capture.graph_kernels": "takes whatever a capture returned (None for a failed one) and answers None "
                                    "where nobody can say: no value is bad",
    "course.timeline.record_timelines": "its first statement is whole_number on steps and warmup; fns are run "
                                        "only on a GPU, behind GPUUnavailableError",
    "course.backprop.memory.ActivationLedger.hold": "a method of a ledger the course's own checkpointing drives",
    "course.grading.in_words": "wraps an exercise check (a decorator the course applies, never a learner)",
    "course.arguments.arguments": "the door itself: it checks its rules against the function when declared",
    "course.gemm.ladder.RungSpec": "one rung's tile sizes, made once by the course in GPU_RUNG_SPECS, never by a "
                                   "learner",
    "course.gemm.machine.Emulation": "what one emulated launch did: made by emulate_launch, read by the tests",
    "course.gemm.machine.Launch": "the emulation's bookkeeping of one launch: made by emulate_launch from its "
                                  "validated arguments",
    "course.gemm.machine.SharedArray": "one shared-memory array of an emulated block: made by Launch.shared",
    "course.devices.Device": "one device as devices() found it: made by the course's own probe, never by a learner",
    "course.devices.array_device": "takes any value: whatever is not a GPU array is on the CPU, so no value is bad",
    "course.devices.xp_of": "takes any value: the namespace of whatever array_device says, so no value is bad",
    "course.devices.to_numpy": "takes any value np.asarray takes (a GPU array is copied back first): the course's one "
                               "host copy",
    "course.counting.CapturedGraph": "made by the stand-in's own stream capture from its counter, never by a learner",
    "course.counting.CountingArray": "an ndarray view the counting namespace makes (a.view(CountingArray)); numpy's "
                                     "own constructor checks its shape",
    "course.lead_spin.cupy_lead": "called only by course.timing.benchmark with the lead it validated (validate_lead) "
                                  "and its own stream",
    "course.lead_spin.torch_lead": "called only by course.torch_peer.benchmark_torch with the lead it validated "
                                   "(validate_lead)",
    "course.torch_peer.torch_tf32_flags": "reads a torch module or None (the imported one): provenance's own call; "
                                          "nothing to refuse",
    "course.arguments.Whole": "a rule class: its bounds are written by the course in @arguments, checked when the "
                              "decorator is declared",
    "course.arguments.Wholes": "a rule class: its bounds are written by the course in @arguments; each number is "
                               "Whole's",
    "course.arguments.Real": "a rule class: its bounds are written by the course in @arguments, never by a learner",
    "course.arguments.Dtype": "a rule class: device= names an argument, checked by @arguments when declared",
    "course.arguments.Given": "a rule class: wraps a validator of the course's own, written in @arguments",
    "course.arguments.Optional": "a rule class: wraps another rule of the course's own, written in @arguments",
    "course.takeaways.figure_takeaway": "reads any figure: one with no takeaway and no plotted numbers gives an empty "
                                        "string, so no value is bad",
    "course.legends.figure_legend": "called by the course's figure functions on the figure and axes they just drew, "
                                    "never by a learner",
    "course.legends.label_points": "called by the course's figure functions on the axes and points they just drew, "
                                   "never by a learner",
    "course.legends.devices_to_caption": "called by add_footer on the figure it was given and the references that "
                                         "figure drew, never by a learner",
    "course.legends.place_legend": "called by the course's figure functions on the axes they just drew, never by a "
                                   "learner",
    "course.report.Experiment": "the record @experiment registers (the tests make one the same way); run_report "
                                "validates what it runs",
    "course.kernels.counts.Counts": "the counts hardware_counts adds up from a simulator trace, never filled in by a "
                                    "learner",
    "course.kernels.grading.Grade": "what a check found: made by the course's exercise checks, read by in_words",
    "course.kernels.grading.worst_counts": "reads a Trace the course's simulator made, inside an exercise check",
    "course.kernels.tuned.reduce_interleaved": "a reference kernel (out, a) of the lesson, launched only by the "
                                               "simulator or numba.cuda on arrays the course makes; its body is GPU "
                                               "code",
    "course.kernels.tuned.reduce_sequential": "a reference kernel (out, a) of the lesson, launched only by the "
                                              "simulator or numba.cuda on arrays the course makes; its body is GPU "
                                              "code",
    "course.kernels.tuned.reduce_strided_index": "a reference kernel (out, a) of the lesson, launched only by the "
                                                 "simulator or numba.cuda on arrays the course makes; its body is GPU "
                                                 "code",
    "course.kernels.tuned.scan_padded": "a reference kernel (out, a) of the lesson, launched only by the simulator or "
                                        "numba.cuda on arrays the course makes; its body is GPU code",
    "course.kernels.tuned.scan_plain": "a reference kernel (out, a) of the lesson, launched only by the simulator or "
                                       "numba.cuda on arrays the course makes; its body is GPU code",
    "course.kernels.tuned.transpose_naive": "a reference kernel (out, a) of the lesson, launched only by the simulator"
                                            " or numba.cuda on arrays the course makes; its body is GPU code",
    "course.kernels.tuned.transpose_tiled": "a reference kernel (out, a) of the lesson, launched only by the simulator"
                                            " or numba.cuda on arrays the course makes; its body is GPU code",
    "course.kernels.tuned.transpose_tiled_padded": "a reference kernel (out, a) of the lesson, launched only by the "
                                                   "simulator or numba.cuda on arrays the course makes; its body is "
                                                   "GPU code",
    "course.kernels.exercises.AtScale": "one exercise's at-scale grading, declared by keyword in the course's own "
                                        "exercise table",
    "course.kernels.exercises.Exercise": "one kernel exercise, declared by keyword in the course's own table "
                                         "(test_names checks the keywords)",
    "course.kernels.tuning.Tuning": "one optimisation exercise, declared by keyword in the course's own table",
    "course.kernels.tuning.TuningGrade": "what grade_tuning found: made by the course's own grading, read by "
                                         "report_tuning",
    "course.parallel.model.AlphaBeta": "the fit fit_alpha_beta returns (alpha, beta and the records behind them), "
                                       "never made by a learner",
    "course.parallel.model.Interconnect": "one data-sheet link of the course's own INTERCONNECTS table, never made by "
                                          "a learner",
    # -- parallel, recurrences, kernels --
    "course.parallel.collectives.Message": "one message of a simulated step: made by the course's own all-reduces, "
                                           "read by the figures",
    "course.parallel.collectives.Step": "one simulated step's messages and buffers: made by the course's own "
                                        "all-reduces, never by a learner",
    "course.parallel.collectives.AllreduceRun": "what a simulated all-reduce returns: made by its validated run; "
                                                "the figures that take one check it (validate_run)",
    "course.parallel.tensor_parallel.TensorShard": "one rank's slice of the block: made by split_block from its "
                                                   "validated arguments; rank_step checks it (validate_shard)",
    "course.parallel.tensor_parallel.TensorParallelRun": "what simulate_tensor_parallel returns: made by the "
                                                         "course's own simulation, never by a learner",
    # -- throughput, scan, vectorize --
    # -- backprop, bppsa, attention --
    "course.backprop.checkpointing.CheckpointRun": "the record checkpointed_backward returns, filled from its own "
                                                   "validated run, never made by a learner",
    "course.backprop.trace.LayerTrace": "one layer's record, made by describe_step or rebuilt by trace_from_results "
                                        "from a validated ResultSet",
    "course.backprop.trace.StepTrace": "the record describe_step returns (or trace_from_results rebuilds); the "
                                       "functions that read one check it is a StepTrace",
    "course.backprop.train.History": "the record train() fills epoch by epoch, never made by a learner",
    # -- plots, widgets, results, standin, timing --
    "course.standin.StandinArray": "an ndarray view the stand-in's namespace makes (a.view(StandinArray)), as "
                                   "CountingArray is; numpy's own constructor checks its shape",
}

def _debt() -> dict[str, set[str]]:
    from _door_debt import UNVALIDATED as debt

    return {m: set(names.split()) for m, names in debt.items()}


def _modules():
    mods, failed = [], []
    for info in pkgutil.walk_packages(course.__path__, "course."):
        try:
            mods.append(importlib.import_module(info.name))
        except Exception as exc:  # noqa: BLE001 - a module that does not import is reported, by name
            failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
    return mods, failed


MODULES, IMPORT_FAILURES = _modules()


def _is_validation(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Raise) or isinstance(stmt, ast.If) and any(isinstance(s, ast.Raise) for s in stmt.body):
        return True
    if not isinstance(stmt, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) or stmt.value is None:
        return False
    return any(isinstance(n, ast.Call) and VALIDATION_CALL.match(getattr(n.func, "id", getattr(n.func, "attr", "")))
               for n in ast.walk(stmt.value))


def _opens_with_validation(fn) -> bool:
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return False
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return bool(body) and _is_validation(body[0])


def _doors(obj) -> list:
    """The functions that take ``obj``'s arguments: itself, or a class's own ``__init__`` / ``__post_init__``."""
    if not inspect.isclass(obj):
        return [obj]
    return [f for f in (obj.__dict__.get("__init__"), obj.__dict__.get("__post_init__")) if f is not None] or \
        [obj.__init__]


def _takes_arguments(obj) -> bool:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    return any(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())


def _public(mod):
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name, None)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and getattr(obj, "__module__", None) == mod.__name__:
            yield name, obj


def _has_door(mod, name: str, obj) -> bool:
    if VALIDATOR_NAME.match(name) or inspect.isclass(obj) and issubclass(obj, BaseException):
        return True
    if name.startswith("check_") and mod.__name__.split(".")[-1] == "checks":
        return True
    if f"{mod.__name__}.{name}" in ALLOWED:
        return True
    return any(hasattr(f, "rules") or _opens_with_validation(f) for f in _doors(obj))


def _without_door() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod in MODULES:
        for name, obj in _public(mod):
            if _takes_arguments(obj) and not _has_door(mod, name, obj):
                out.setdefault(mod.__name__, set()).add(name)
    return out


def test_every_module_of_the_package_imports():
    assert not IMPORT_FAILURES, "\n".join(IMPORT_FAILURES)


def test_every_public_function_declares_its_rules_or_validates_at_its_door():
    found, debt = _without_door(), _debt()
    new = sorted(f"{m}.{n}" for m, names in found.items() for n in names - debt.get(m, set()))
    assert not new, ("these public functions take arguments but declare no rules (@arguments from "
                     "course.arguments) and open with no validate_*/require_* call; declare them (or, for one that "
                     "truly needs none, add it to ALLOWED with the reason):\n" + "\n".join(new))


def test_the_frozen_debt_only_shrinks():
    found, debt = _without_door(), _debt()
    paid = sorted(f"{m}.{n}" for m, names in debt.items() for n in names - found.get(m, set()))
    assert not paid, ("these names now have a door (or are gone): take them off tests/_door_debt.py:\n"
                      + "\n".join(paid))


# ----------------------------------------------------------------------------- every rule, its bad values

HUGE = np.broadcast_to(np.float64(1.0), (10**12,))           # 10**12 elements, 8 bytes of memory
GENERIC = [None, "8", 2.5, math.nan, math.inf, [], -1, 0, True, HUGE]


def _same(v, c) -> bool:
    """Whether OneOf takes ``v`` for the choice ``c``: the same value, a string in another case, or an equal number
    (``0`` for ``False`` included, as Python compares them)."""
    if isinstance(v, np.ndarray) or isinstance(v, list):
        return False
    if isinstance(v, str) and isinstance(c, str):
        return v.lower() == c.lower()
    return v is c or isinstance(v, (int, float)) and isinstance(c, (int, float)) and v == c


def _bad_values(rule) -> list | None:
    """The generic bad values ``rule`` must refuse, or None where it is not a kind this test knows."""
    if isinstance(rule, Optional):
        inner = _bad_values(rule.rule)
        return None if inner is None else [v for v in inner if v is not None]
    if isinstance(rule, Whole):
        out = [None, "8", 2.5, math.nan, math.inf, True, [], HUGE]
        out += [rule.lo - 1] if isinstance(rule.lo, int) else []
        out += [rule.hi + 1, 10**400] if isinstance(rule.hi, int) else []
        return out
    if isinstance(rule, Wholes):
        return [None, "8", 2.5, [2.5], ["8"], [None], [True], HUGE] + ([[]] if rule.min_len >= 1 else [])
    if isinstance(rule, Real):
        out = [None, "8", math.nan, math.inf, -math.inf, True, 1j, [], HUGE, 10**400]
        out += [rule.lo - 1.0] if rule.lo is not None else []
        out += [rule.hi + 1.0] if rule.hi is not None else []
        out += [rule.above] if rule.above is not None else []
        return out
    if isinstance(rule, OneOf):
        return [v for v in GENERIC + [object()] if not any(_same(v, c) for c in rule.choices)]
    if isinstance(rule, Seed):
        return [-1, 2.5, "8", None, math.nan, True, []]
    if isinstance(rule, Dtype):
        return ["8", 2.5, [], "float128x"]
    if isinstance(rule, Devices):
        return ["8", 2.5, [], ["tpu"], True]
    return None


class _Known(dict):
    """The arguments before a rule, as the rule may read them: a bound named after an earlier argument reads 64."""

    def __missing__(self, key):
        return "cpu" if "device" in key else 64


def _declared():
    for mod in MODULES:
        for name, obj in _public(mod):
            for f in _doors(obj):
                for arg, rule in (getattr(f, "rules", None) or {}).items():
                    yield f"{mod.__name__}.{name}", arg, rule


DECLARED = list(_declared())
MODULES_WITH_RULES = sorted({q.rsplit(".", 1)[0] for q, _, _ in DECLARED})


def _refused(rule, arg, value) -> str | None:
    """None when ``rule`` refuses ``value`` with a CourseError and little memory; else what it did."""
    tracemalloc.start()
    try:
        try:
            got = rule(arg, value, _Known())
        except CourseError:
            return None if tracemalloc.get_traced_memory()[1] < PEAK_LIMIT else "allocated too much refusing"
        except Exception as exc:  # noqa: BLE001 - any other exception is the finding
            return f"raised {type(exc).__name__}: {str(exc)[:100]}"
        return f"accepted it as {got!r:.60}"
    finally:
        tracemalloc.stop()


def test_the_walk_finds_the_declared_rules():
    assert len(DECLARED) > 200 and "course.backprop.mixed" in MODULES_WITH_RULES


def _findings(qual: str, arg: str, rule) -> list[str]:
    """What ``rule`` (argument ``arg`` of ``qual``) did with its kind's bad values, where it did wrong."""
    values = _bad_values(rule)
    if values is not None:
        return [f"{qual}({arg}={v!r:.40}): {said}" for v in values if (said := _refused(rule, arg, v))]
    if isinstance(rule, Given) and rule.earlier:
        return []                                # it reads earlier arguments this walk cannot make up
    bad = []                                     # a lesson's own validator: whatever it says must be the course's
    for v in (None, "8", 2.5, math.nan, [], HUGE):
        said = _refused(rule, arg, v)
        if said and not said.startswith("accepted"):
            bad.append(f"{qual}({arg}={v!r:.40}): {said}")
    return bad


@functools.lru_cache(maxsize=1)
def _all_findings() -> dict[str, list[tuple[str, str]]]:
    """module -> [(``qual(arg)``, what its rule did wrong)], every declared rule fed once."""
    out: dict[str, list[tuple[str, str]]] = {}
    for qual, arg, rule in DECLARED:
        for said in _findings(qual, arg, rule):
            out.setdefault(qual.rsplit(".", 1)[0], []).append((f"{qual}({arg})", said))
    return out


def _rule_gaps() -> set[str]:
    from _door_debt import RULE_GAPS

    return set(RULE_GAPS.split())


@pytest.mark.parametrize("module", MODULES_WITH_RULES)
def test_every_declared_rule_refuses_its_kinds_bad_values_with_a_course_error(module):
    gaps = _rule_gaps()
    bad = [said for key, said in _all_findings().get(module, []) if key not in gaps]
    assert not bad, "rules that let a bad value through, or refuse it with no course error:\n" + "\n".join(bad)


def test_the_frozen_rule_gaps_only_shrink():
    found = {key for findings in _all_findings().values() for key, _ in findings}
    paid = sorted(_rule_gaps() - found)
    assert not paid, "these rules now refuse their bad values: take them off RULE_GAPS in tests/_door_debt.py:\n" + \
        "\n".join(paid)
