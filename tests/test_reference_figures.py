"""The README says which GPU figures are targets and which were measured, and the measured ones are read from
the shipped references (``tools/reference_figures.py``), so a target never reads as an achievement."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("reference_figures", ROOT / "tools" / "reference_figures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_readmes_measured_figures_agree_with_the_shipped_references(capsys):
    assert _tool().main(["--check"]) == 0, capsys.readouterr().out


def test_the_readme_calls_its_targets_targets_and_sets_the_measurements_beside_them():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = text.split("**GPU targets**", 1)[1].split("<!-- reference-figures:begin -->", 1)[0]
    assert "goals the course sets itself" in targets and "not" in targets and "results" in targets
    measured = text.split("<!-- reference-figures:begin -->", 1)[1].split("<!-- reference-figures:end -->", 1)[0]
    # every line names its target and says what was recorded, or that nothing was
    lines = [line for line in measured.splitlines() if line.startswith("* ")]
    assert len(lines) == 4 and all("target" in line for line in lines)
    assert all("recorded on" in line or "not recorded" in line for line in lines)


def test_a_new_recording_changes_the_readmes_figures(monkeypatch):
    """The figures are computed from the references: scale the recorded scan's times and the line moves."""
    tool = _tool()
    before = tool.figures()
    real = tool.load_reference

    def faster_scan(name):
        sets = real(name)
        if name == "bppsa_rnn":
            for rs in sets:
                for r in rs.records:
                    if r.get("method") == "scan":
                        r["backward_s"] /= 2
        return sets

    monkeypatch.setattr(tool, "load_reference", faster_scan)
    after = tool.figures()
    # the teaching scan's speed-up over the loop at the longest chain, read from the file itself
    import json

    [path] = sorted((ROOT / "course" / "reference").glob("bppsa_rnn__*.json"))
    recs = [r for r in json.loads(path.read_text(encoding="utf-8"))["records"] if r["device"] == "gpu"]
    T = max(r["T"] for r in recs)
    time = {r["method"]: r["backward_s"] for r in recs if r["T"] == T}
    assert after != before and f"{2 * time['sequential'] / time['scan']:.0f}× the course's loop" in after
