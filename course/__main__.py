"""Command line: ``python -m course report [--quick] [--out DIR]``, ``python -m course devices``,
``python -m course gpu-check [--quick] [--out DIR]`` (see :mod:`course.gpu_machine`)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course",
                                     description="How GPUs accelerate backpropagation: the course's tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="run every registered experiment; write index.html + results.json")
    rep.add_argument("--out", default="report", help="output folder (default: ./report)")
    size = rep.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: a few seconds per experiment")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: every step runs, nothing measured is worth "
                      "keeping (a rehearsal on the stand-in GPU, COURSE_STANDIN_GPU=1)")
    rep.add_argument("--only", nargs="*", help="run only these experiments")
    only_dev = rep.add_mutually_exclusive_group()
    only_dev.add_argument("--cpu-only", action="store_true", help="skip the GPU even where one answers")
    only_dev.add_argument("--gpu-only", action="store_true",
                          help="measure the GPU alone (with --record-reference: learners measure their own CPU)")
    rep.add_argument("--record-reference", action="store_true",
                     help="on a GPU machine: also store the GPU results in course/reference/")
    rep.add_argument("--reference-dir", default=None,
                     help="where --record-reference writes (default: course/reference/, which lessons read)")
    rep.add_argument("--list", action="store_true", help="list the experiments and exit")
    sub.add_parser("devices", help="describe this machine's devices")
    chk = sub.add_parser("gpu-check", help="check a GPU machine end to end: GPU tests, benchmarks, targets, "
                                           "the full report with --record-reference")
    chk.add_argument("--out", default="gpu-check", help="output folder (default: ./gpu-check)")
    chk.add_argument("--quick", action="store_true", help="small sizes and few repeats: a sanity run")
    chk.add_argument("--skip", nargs="*", default=[], choices=["tests", "benchmarks", "targets", "report"],
                     help="steps to leave out")
    args = parser.parse_args(argv)

    from .errors import CourseError

    if args.command == "gpu-check":
        from .gpu_machine import run_gpu_check

        try:
            return run_gpu_check(args.out, quick=args.quick, skip=tuple(args.skip))
        except CourseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    if args.command == "devices":
        from .devices import devices, gpu_unavailable_reason

        for d in devices():
            print(d)
        reason = gpu_unavailable_reason()
        if reason:
            print(f"No GPU: {reason}")
        return 0

    from .report import ReportInterrupted, discover, run_report

    if args.list:
        for name, exp in discover().items():
            print(f"{exp.lesson}  {name:28s} {exp.title}")
        return 0
    try:
        index = run_report(args.out, quick="smoke" if args.smoke else args.quick, only=args.only,
                           devices=["cpu"] if args.cpu_only else ["gpu"] if args.gpu_only else None,
                           record_reference=args.record_reference, reference_dir=args.reference_dir)
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ReportInterrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr)
        return 128 + exc.signum
    print(f"wrote {index} and {index.parent / 'results.json'}")
    import json

    failures = json.loads((index.parent / "results.json").read_text())["failures"]
    if failures:
        print(f"these experiments failed (see the page): {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
