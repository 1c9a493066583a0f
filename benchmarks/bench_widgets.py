"""Widget benchmark: how long every live app takes to draw, to rerun, and to redraw a view-only control.

Every app is found by convention, not by a list: each public function whose name ends in ``_app``,
defined in a module of the ``course`` package whose name contains ``widgets`` (``course/scan/widgets.py``,
``course/<lesson>/widgets.py``), plus the modules in :data:`EXTRA_MODULES`.  Each is built with its
defaults (the first draw: it measures), then refreshed with the same values a few times (a rerun: the
median is compared with the 1 s target), then each control it names in ``app.view_only`` is moved to
another value and back (those must redraw from the app's cache, without measuring again).

A miss is printed, never raised: this is a benchmark, not a test.  The machine's load is printed
with the table, since a busy 2-core machine can double every number.

    python benchmarks/bench_widgets.py [--repeat 3] [--only NAME ...] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import pkgutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import course

TARGET_S = 1.0
#: Modules outside the ``*widgets*`` convention that hold an app (lesson 00's lives with its hardware code).
EXTRA_MODULES = ("course.hardware",)


def discover(extra: tuple[str, ...] = EXTRA_MODULES) -> list[tuple[str, Callable]]:
    """``(module.name, builder)`` for every public ``*_app`` function of the widget modules."""
    names = [m.name for m in pkgutil.walk_packages(course.__path__, "course.") if "widgets" in m.name.rsplit(".", 1)[-1]
             or m.name.endswith(".widgets")]
    found = []
    for mod_name in sorted(set(names) | set(extra)):
        try:
            mod = importlib.import_module(mod_name)
        except Exception as exc:  # a lesson whose optional dependency is missing: say so, go on
            print(f"  (skipped {mod_name}: {type(exc).__name__}: {exc})")
            continue
        for name, fn in inspect.getmembers(mod, inspect.isfunction):
            if name.endswith("_app") and not name.startswith("_") and fn.__module__ == mod.__name__:
                found.append((f"{mod_name.removeprefix('course.')}.{name}", fn))
    return found


def needs_arguments(fn: Callable) -> list[str]:
    """The parameters ``fn`` has no default for (an app built from a measurement the notebook made)."""
    return [p.name for p in inspect.signature(fn).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _other_value(widget):
    """A value for ``widget`` different from its current one (to move a view-only control)."""
    v = widget.value
    opts = getattr(widget, "options", None)
    if opts:
        values = [o[1] if isinstance(o, tuple) else o for o in opts]
        others = [x for x in values if x != v]
        return others[len(others) // 2] if others else v
    if isinstance(v, bool):
        return not v
    lo, hi = getattr(widget, "min", None), getattr(widget, "max", None)
    if lo is not None and hi is not None:
        return hi if v != hi else lo
    return v


def _timed_refresh(app) -> tuple[float, float]:
    app.refresh()
    if app.last_error is not None:
        raise RuntimeError(f"{type(app.last_error).__name__}: {app.last_error}")
    return app.last_seconds, app.last_render_seconds


def bench_app(builder: Callable, repeat: int) -> dict:
    """First draw, median rerun, and the redraw after each view-only control moves."""
    t0 = time.perf_counter()
    app = builder()
    first = time.perf_counter() - t0
    if app.last_error is not None:
        return {"first_s": first, "error": f"{type(app.last_error).__name__}: {app.last_error}"}
    timed = [_timed_refresh(app) for _ in range(repeat)]
    reruns = [t for t, _ in timed]
    cache = getattr(app, "cache", None)
    measured_before = getattr(cache, "measured", None)
    views = {}
    for name in getattr(app, "view_only", ()):
        w = app.controls[name]
        before, other = w.value, _other_value(w)
        times = []
        for value in (other, before) * max(1, repeat // 2):
            w.value = value
            times.append(app.last_seconds)
        views[name] = statistics.median(times)
    remeasured = (None if measured_before is None else cache.measured - measured_before)
    return {"first_s": first, "rerun_s": statistics.median(reruns), "reruns_s": reruns,
            "render_s": statistics.median(r for _, r in timed),
            "view_only_s": views, "view_only_remeasured": remeasured}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="reruns per app (median reported)")
    ap.add_argument("--only", nargs="*", help="run only apps whose name contains one of these")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TQDM_DISABLE", "1")

    load_before = os.getloadavg()[0]
    print(f"load average before: {load_before:.2f} (1 min) on {os.cpu_count()} logical cores; "
          f"BLAS threads {course.threads.get_threads()}")
    apps = discover()
    if args.only:
        apps = [(n, f) for n, f in apps if any(s in n for s in args.only)]
    print(f"{len(apps)} apps found; target: a rerun at the defaults in at most {TARGET_S:.1f} s\n")
    head = f"{'app':<38} {'first draw':>10} {'rerun':>8} {'of which drawing':>16} {'target':>7}   view-only redraws"
    print(head)
    print("-" * len(head))
    results: dict = {}
    misses = 0
    for name, builder in apps:
        if needs_arguments(builder):
            print(f"{name:<38} {'':>10} {'':>8} {'':>16} {'-':>7}   "
                  f"(skipped: needs {', '.join(needs_arguments(builder))})")
            continue
        try:
            r = bench_app(builder, args.repeat)
        except Exception as exc:
            r = {"error": f"{type(exc).__name__}: {exc}"}
        results[name] = r
        if "error" in r:
            misses += 1
            print(f"{name:<38} {'':>10} {'':>8} {'':>16} {'ERROR':>7}   {r['error'][:70]}")
            continue
        verdict = "PASS" if r["rerun_s"] <= TARGET_S else "MISS"
        misses += verdict == "MISS"
        views = ", ".join(f"{k} {v:.2f} s" for k, v in r["view_only_s"].items())
        if r["view_only_remeasured"]:
            views += f" (re-measured {r['view_only_remeasured']}×!)"
        print(f"{name:<38} {r['first_s']:9.2f}s {r['rerun_s']:7.2f}s {r['render_s']:15.2f}s {verdict:>7}   "
              f"{views or '-'}")
    timed = len(results)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}.  {timed - misses} of {timed} apps "
          f"rerun within {TARGET_S:.1f} s.")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"target_s": TARGET_S, "load_before": load_before, "load_after": os.getloadavg()[0],
                       "apps": results}, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
