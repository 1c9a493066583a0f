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


def _step_vs_torch() -> str:
    for ref in load_reference("backprop_train_step"):
        ours = {r["width"]: r["median_s"] for r in ref.select(device="gpu", width=512)
                if r.get("rung") and not r["rung"].startswith("torch")}
        peer = [r for r in ref.select(device="gpu", width=512) if str(r.get("rung", "")).startswith("torch")]
        if ours and peer:
            best = min(ours.values())
            return (f"{best / min(r['median_s'] for r in peer):.2f}× PyTorch CUDA's eager step ({ref.label}).")
    return ("not recorded: the shipped training-step reference holds no PyTorch step (the GPU ladder is still "
            "to record).")


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
                       + ", ".join(f"{k} {100 * v:.0f} %" for k, v in rungs.items()))
    return "; ".join(out) + "." if out else "not recorded."


def _block_scan() -> str:
    for ref in load_reference("scan_kernel_variants"):
        recs = [r for r in ref.select(device="gpu") if r.get("of_library")]
        if recs:
            best = max(recs, key=lambda r: r["of_library"])
            return (f"the best variant, {best['variant']}, {100 * best['of_library']:.0f} % of `cupy.cumsum`'s "
                    f"throughput at n = {best['n']:,} ({ref.label}).")
    return "not recorded."


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
        out[-1] += f" ({ref.label})"
    return "; ".join(out) + "." if out else "not recorded."


def figures() -> str:
    """The list, one line per target, every number read from the shipped references."""
    return "\n".join([
        BEGIN,
        f"* one training step, CuPy over PyTorch CUDA (target ≤ 1.2×): {_step_vs_torch()}",
        f"* ReLU against the device-to-device copy (target ≥ 85 %): {_relu_vs_copy()}",
        f"* the numba block scan against `cupy.cumsum` at 2^26 float32 (target ≥ 50 %): {_block_scan()}",
        "* BPPSA backward, T = 30,000, hidden 20, batch 16 (targets: ≥ 108× the sequential backward, the paper's "
        f"figure against cuDNN; faster than cuDNN's `nn.RNN` at T ≥ 10,000): {_bppsa()}",
        END])


def readme_with_figures(text: str) -> str:
    """``text`` (the README) with its list between the markers written anew; refuses a README without them."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block to write the reference figures into")
    head, rest = text.split(BEGIN, 1)
    return head + figures() + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the README is out of step")
    args = ap.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    want = readme_with_figures(text)
    if want == text:
        print("README.md's reference figures agree with course/reference/")
        return 0
    if args.check:
        print("README.md's reference figures disagree with course/reference/: run python tools/reference_figures.py")
        return 1
    README.write_text(want, encoding="utf-8")
    print("README.md: reference figures written from course/reference/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
