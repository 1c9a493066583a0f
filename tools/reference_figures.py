"""Write the README's "what the shipped references measured" list from ``course/reference/``.

The README names the GPU targets of ``python -m course gpu-check`` (goals the course sets itself) and,
beside them, what the reference results shipped in ``course/reference/`` actually measured.  Those
figures are written here, from the references, between the README's markers
``<!-- reference-figures:begin -->`` and ``<!-- reference-figures:end -->``; nothing in that list is
typed by hand, so a new recording changes it only through this script:

    python tools/reference_figures.py          # rewrite the list
    python tools/reference_figures.py --check  # exit 1 when the README and the references disagree (a test runs it)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course.bppsa.timing import speedups  # noqa: E402
from course.results import load_reference  # noqa: E402

README = ROOT / "README.md"
BEGIN, END = "<!-- reference-figures:begin -->", "<!-- reference-figures:end -->"
#: The README's sentence on what the shipped references cover, written here too.
SUMMARY_BEGIN, SUMMARY_END = "<!-- reference-summary:begin -->", "<!-- reference-summary:end -->"


def _gemm_rate(gpu: str | None) -> tuple[float, str] | None:
    """The float32 GEMM rate (FLOP/s) of the largest matrix product recorded on the GPU named ``gpu``, and its
    label: a step is judged against its own device's matrix product, never another's."""
    for ref in load_reference("matmul_sweep"):
        recs = [r for r in ref.select(device="gpu", dtype="float32") if r.get("gflops")]
        if recs and ref.gpu_name == gpu:
            return max(r["gflops"] for r in recs) * 1e9, ref.label
    return None


def _step_vs_torch() -> str:
    said = []
    for ref in load_reference("backprop_train_step"):      # every recorded GPU, each under its own name
        t = {(r["width"], r["rung"]): r["median_s"] for r in ref.select(device="gpu") if r.get("rung")}
        ours = ("eager", "no_readback", "fused", "graph")
        if (512, "graph") not in t or (512, "torch graph") not in t:
            continue
        best_eager = min(t[512, k] for k in ours[:3] if (512, k) in t)
        out = [f"at width 512, the course's graph-captured step {1e3 * t[512, 'graph']:.3f} ms, "
               f"{t[512, 'graph'] / t[512, 'torch graph']:.2f}× PyTorch's graph-captured step (TF32 off)",
               f"its best eager rung {best_eager / t[512, 'torch eager']:.2f}× PyTorch eager"]
        wide = [t[4096, k] for k in ours if (4096, k) in t]
        narrow = [t[64, k] for k in ours if (64, k) in t]
        gemm = _gemm_rate(ref.gpu_name)
        if wide and gemm:
            flops = next(r["flops"] for r in ref.select(device="gpu", width=4096) if r.get("rung"))
            out.append(f"at width 4,096, {100 * flops / min(wide) / gemm[0]:.0f} % of the float32 GEMM rate "
                       f"({gemm[0] / 1e12:.1f} TFLOP/s, 4,096² matrix product, {gemm[1]})")
        if wide and narrow:
            out.append(f"best step at width 4,096 / at width 64: {min(wide) / min(narrow):.1f}×")
        said.append("; ".join(out) + f" ({ref.label})")
    return ("; ".join(said) + "." if said else
            "not recorded: no shipped training-step reference holds a graph-captured step of either side.")


def _relu_vs_copy() -> str:
    out = []
    for ref in load_reference("vectorize_bandwidth"):
        big = max((r["n"] for r in ref.select(device="gpu", kind="vector")), default=None)
        if big is None:
            continue
        frac = {r["kind"]: r["copy_fraction"] for r in ref.select(device="gpu", n=big)}
        out.append(f"the course's 16-byte-load kernel {100 * frac['vector']:.0f} % of the device copy at n = {big:,}"
                   + (f", `cupy.maximum` into an output {100 * frac['out']:.0f} %" if "out" in frac else "")
                   + f" ({ref.label})")
    for ref in load_reference("vectorize_ladder"):
        rungs = {r["label"]: r["copy_fraction"] for r in ref.select(device="gpu") if r.get("rung") != "copy"}
        if rungs:
            out.append("the ladder's GPU rungs at n = " + f"{ref.params.get('n', 0):,}: "
                       + ", ".join(f"{k} {100 * v:.0f} %" for k, v in rungs.items()) + f" ({ref.label})")
    return "; ".join(out) + "." if out else "not recorded."


def _block_scan() -> str:
    said = []
    for ref in load_reference("scan_kernel_variants"):      # every recorded GPU, each under its own name
        recs = {r["variant"]: r for r in ref.select(device="gpu") if r.get("of_copy")}
        single = recs.get("single-pass (look-back)")
        if single is None:
            continue
        numba = [r for r in recs.values() if r.get("strategy")]
        out = [f"the single-pass scan {100 * single['of_copy']:.0f} % of the device copy at n = {single['n']:,}"]
        out += [f"{label} {100 * recs[name]['of_copy']:.0f} %" for name, label in
                (("cupy.cumsum", "`cupy.cumsum` (a copy, then CUB's scan in place)"),
                                ("torch.cumsum", "`torch.cumsum` (CUB's scan)")) if name in recs]
        if numba:
            best = max(numba, key=lambda r: r["of_copy"])
            out.append(f"the best numba block scan ({best['variant']}) {100 * best['of_copy']:.0f} %")
        said.append(", ".join(out) + f" ({ref.label})")
    return "; ".join(said) + "." if said else "not recorded."


def _bppsa() -> str:
    out = []
    for ref in load_reference("bppsa_rnn"):
        for method, what in (("scan", "the teaching scan"), ("fast", "the scan without copies")):
            Ts, loop = speedups(ref, "gpu", over="sequential", method=method)
            Tc, cudnn = speedups(ref, "gpu", over="torch", method=method)
            if not len(Ts):
                out.append(f"{what}: not recorded")
                continue
            vs = dict(zip((int(t) for t in Tc), cudnn))
            out.append(f"{what}: {loop[-1]:.0f}× the course's loop at T = {int(Ts[-1]):,}; against cuDNN's `nn.RNN` "
                       + ", ".join(f"{vs[t]:.2f}× at T = {t:,}" for t in (10_000, 30_000) if t in vs))
        Tc, cudnn = speedups(ref, "gpu", over="torch", method="fast")
        from_1000 = [v for t, v in zip(Tc, cudnn) if t >= 1000]
        if from_1000:
            out.append(f"the scan without copies against cuDNN from T = 1,000 up: at least {min(from_1000):.2f}×")
        out[-1] += f" ({ref.label})"
    return "; ".join(out) + "." if out else "not recorded."


def figures() -> str:
    """The list, one line per target, every number read from the shipped references."""
    return "\n".join([
        BEGIN,
        "* one training step, 784-w-w-10, batch 256, float32 (targets: at width 512 the graph-captured step ≤ 1.2× "
        "PyTorch's graph-captured step and ≤ 0.15 ms, the best eager step ≤ 0.6× PyTorch eager; at width 4,096 ≥ 50 % "
        f"of the float32 GEMM rate; the step at 4,096 ≥ 3× the step at 64): {_step_vs_torch()}",
        f"* ReLU against the device-to-device copy (target ≥ 85 %): {_relu_vs_copy()}",
        "* the single-pass scan, 2^26 float32, (bytes read + written) / time (target ≥ 80 % of the device copy): "
        f"{_block_scan()}",
        "* BPPSA backward, hidden 20, batch 16, float32, against cuDNN's `nn.RNN` backward, TF32 off (targets: "
        f"≥ 10× at T = 30,000; ≥ 1× from T = 1,000): {_bppsa()}",
        END])


def summary() -> str:
    """Which of the report's experiments have a GPU reference, recorded on which GPUs and when, and which have
    none: read from ``course/reference/`` and the report's registry."""
    from course.report import discover

    experiments = discover()
    recorded: dict[str, list] = {name: load_reference(name) for name in experiments}
    have = [name for name, refs in recorded.items() if refs]
    gpus: dict[str, set[str]] = {}
    for refs in recorded.values():
        for ref in refs:
            gpus.setdefault(ref.gpu_name or "an unnamed GPU", set()).add(ref.date)
    where = "; ".join(f"{gpu} on {', '.join(sorted(dates))}" for gpu, dates in sorted(gpus.items())) or "no GPU"
    missing: dict[str, list[str]] = {}
    for name, exp in experiments.items():
        if not recorded[name]:
            missing.setdefault(exp.lesson, []).append(f"`{name}`")
    without = "; ".join(f"lesson {lesson}: {', '.join(names)}" for lesson, names in sorted(missing.items()))
    return (f"{SUMMARY_BEGIN}\n**Reference GPU results ship** in `course/reference/` for {len(have)} of the "
            f"{len(experiments)} report experiments, recorded on {where} (each file holds its date, driver, CUDA "
            f"runtime and library versions). No GPU reference yet: {without or 'none'}.\n{SUMMARY_END}")


def _between(text: str, begin: str, end: str, new: str, what: str) -> str:
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        backwards = begin in text and end in text and text.index(begin) > text.index(end)
        found = f"{text.count(begin)} {begin} and {text.count(end)} {end}" + (", the end before the begin"
                                                                             if backwards else "")
        raise SystemExit(f"README.md needs one {begin} ... {end} block (begin first) to write {what} into; it has "
                         f"{found}")
    head, rest = text.split(begin, 1)
    return head + new + rest.split(end, 1)[1]


def readme_with_summary(text: str) -> str:
    """``text`` with its sentence on what the references cover written anew between its markers."""
    return _between(text, SUMMARY_BEGIN, SUMMARY_END, summary(), "the reference summary")


def readme_with_figures(text: str) -> str:
    """``text`` (the README) with its list between the markers written anew; refuses a README without them."""
    return _between(text, BEGIN, END, figures(), "the reference figures")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the README is out of step")
    args = ap.parse_args(argv)
    try:
        text = README.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"cannot read {README} ({getattr(exc, 'strerror', None) or exc}): the script writes the "
                         "reference figures into the repository's README.md") from None
    want = readme_with_summary(readme_with_figures(text))
    if want == text:
        print("README.md's reference figures agree with course/reference/")
        return 0
    if args.check:
        print("README.md's reference figures disagree with course/reference/: run python tools/reference_figures.py")
        return 1
    try:
        README.write_text(want, encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"cannot write {README} ({exc.strerror or exc})") from None
    print("README.md: reference figures written from course/reference/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
