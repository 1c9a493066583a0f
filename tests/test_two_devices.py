"""References from two GPUs side by side: every figure and app that draws recorded results names each device it
read, and no sentence assumes there is one GPU or that it is an H100.

The references are per device (``<experiment>__<gpu>.json``).  A second device's files are made here from the
shipped ones, renamed to a fake "NVIDIA H200" recorded on another date with every GPU time scaled by 0.7, so
the test holds on any checkout, before or after a real second device's files ship: with both devices every
figure's words (titles, legends, notes, footers) name both; with the fake device alone they never name the
H100, so no label was written in by hand.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

import course.results as results
from course.report import discover
from course.results import REFERENCE_DIR, ResultSet, load_reference
from course.widgets import figure_words

SHIPPED = {p.name.split("__")[0]: p for p in sorted(REFERENCE_DIR.glob("*.json"))}
#: What the GPU run records, in the shapes it records now, from its rehearsal on the stand-in GPU (NumPy on the
#: CPU; tools/gpu_run.sh --dry-run): lessons' figures must read these once a real GPU has recorded them.
STANDIN = {p.name.split("__")[0]: p for p in sorted((Path(__file__).parent / "standin_records").glob("*.json"))}
FIRST, FIRST_DATE = "Fake GPU X100", "2026-12-01"          # where no shipped reference exists yet
SECOND, SECOND_DATE = "Fake GPU X200", "2026-12-02"


def _renamed(path: Path, name: str, date: str, scale: float = 1.0) -> dict:
    d = json.loads(path.read_text())
    d["provenance"]["gpus"][0]["name"] = name
    d["provenance"]["date"] = f"{date}T00:00:00+00:00"
    for r in d["records"]:
        if r.get("device") == "gpu":
            for k, v in list(r.items()):
                if isinstance(v, float) and (k.endswith("_s") or k == "seconds"):
                    r[k] = v * scale
    return d


def _first(name: str) -> tuple[dict, str]:
    """The first device's set of ``name`` and its GPU's name: the shipped reference, else the stand-in's
    records under :data:`FIRST`."""
    if name in SHIPPED:
        d = json.loads(SHIPPED[name].read_text())
        return d, d["provenance"]["gpus"][0]["name"]
    return _renamed(STANDIN[name], FIRST, FIRST_DATE), FIRST


def _second(name: str) -> dict:
    """The second device's set: the GPU run's newest shape (the stand-in's records) where there is one, else the
    shipped reference's; renamed :data:`SECOND`, dated :data:`SECOND_DATE`, every GPU time × 0.7."""
    return _renamed(STANDIN.get(name, SHIPPED.get(name)), SECOND, SECOND_DATE, scale=0.7)


def _short(name: str) -> str:
    """The model word a label shows ("H100" of "NVIDIA H100 80GB HBM3", "X200" of "Fake GPU X200")."""
    return next(w for w in name.split() if re.search(r"\d", w))


@pytest.fixture
def references(tmp_path, monkeypatch):
    """``references(name, both=True)``: a reference directory, in place of the shipped one, holding ``name``'s
    sets of the two devices (``both=False``: the second device's alone); returns the first device's GPU name."""
    def make(name: str, both: bool = True) -> str:
        first, gpu = _first(name)
        if both:
            (tmp_path / f"{name}__first.json").write_text(json.dumps(first))
        (tmp_path / f"{name}__second.json").write_text(json.dumps(_second(name)))
        monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
        return gpu
    return make


def _live_from(refs: list[ResultSet]) -> ResultSet:
    """A live set (this machine's provenance) holding the first reference's records: what a figure that needs
    live records draws them from."""
    live = ResultSet(refs[0].experiment, params=dict(refs[0].params))
    live.records = [dict(r) for r in refs[0].records]
    return live


def _draw(name: str, plotter, refs: list[ResultSet]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return plotter(ResultSet(name), refs)
        except Exception:       # this figure needs its live records: give it the reference's CPU part
            return plotter(_live_from(refs), refs)


def _figure_text(fig) -> str:
    words = [figure_words(fig)]
    for ax in fig.axes:
        words += [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()]
    return "\n".join(words)


def _legend_entries(fig) -> list[str]:
    return [t.get_text() for leg in [ax.get_legend() for ax in fig.axes] + list(fig.legends) if leg is not None
            for t in leg.get_texts()]


def _drawn_text(name: str, legends: list | None = None) -> str:
    exp = discover()[name]
    fig = _draw(name, exp.plotter, load_reference(name))
    text = _figure_text(fig)
    if legends is not None:
        legends.extend(_legend_entries(fig))
    plt.close(fig)
    return text


PLOTTED = sorted(n for n, e in discover().items() if e.plotter is not None and (n in SHIPPED or n in STANDIN))


def _draws_references(name: str, monkeypatch_dir: Path) -> bool:
    """Whether ``name``'s report figure draws a reference at all (some draw the live run alone)."""
    first, gpu = _first(name)
    (monkeypatch_dir / f"{name}__first.json").write_text(json.dumps(first))
    saved, results.REFERENCE_DIR = results.REFERENCE_DIR, monkeypatch_dir
    try:
        return _short(gpu) in _drawn_text(name)
    finally:
        results.REFERENCE_DIR = saved


def _drawn():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return [n for n in PLOTTED if _draws_references(n, Path(d))]


#: The figures that draw no reference at all (they show the live run alone); any other must name its devices.
LIVE_ONLY = {"backprop_checkpointing", "backprop_layer_trace", "fusion", "scan_operators", "selective_training",
             "step_timelines", "vectorize_ladder"}


@pytest.mark.slow
def test_every_report_figure_draws_its_references_but_the_live_only_ones():
    drawn = _drawn()
    assert set(PLOTTED) - set(drawn) <= LIVE_ONLY, sorted(set(PLOTTED) - set(drawn) - LIVE_ONLY)
    assert len(drawn) >= 20 and {"gemm_gpu_ladder", "bppsa_rnn", "attention_sweep"} <= set(drawn), drawn


DRAWN = [n for n in PLOTTED if n not in LIVE_ONLY]      # listed, not drawn, at collection: it is quick


@pytest.mark.parametrize("name", DRAWN)
def test_every_report_figure_names_each_device_it_draws(name, references):
    gpu = references(name, both=True)
    assert sorted(r.gpu_name for r in load_reference(name)) == sorted([gpu, SECOND])
    entries = []
    text = _drawn_text(name, entries)
    for g in (gpu, SECOND):
        assert _short(g) in text, f"{name}'s figure does not name {g} among the references it read:\n{text}"
    assert SECOND_DATE in text, f"{name}'s figure does not date the second device's results:\n{text}"
    # each device and date said once, in the caption: never in every legend entry
    dated = [e for e in entries if "recorded on" in e or SECOND_DATE in e or FIRST_DATE in e]
    assert not dated, f"{name}'s legend repeats a device and date in its entries: {dated}"


@pytest.mark.slow
@pytest.mark.parametrize("name", DRAWN)
def test_a_figure_of_another_device_alone_names_no_other(name, references):
    gpu = references(name, both=False)
    text = _drawn_text(name)
    assert _short(SECOND) in text, text
    said = text.replace("(data sheet)", "")
    for other in (_short(gpu), "H100", "Stand-in"):
        assert other not in said, f"{name}'s figure names {other} though only {SECOND}'s references are there:\n{text}"


APPS = {   # the apps that choose among the references themselves (the rest draw them through the figures above)
    "throughput.fusion_app": lambda: __import__("course.throughput.widgets", fromlist=["x"]).fusion_app(),
    "throughput.roofline_app": lambda: __import__("course.throughput.widgets", fromlist=["x"]).roofline_app(),
    "hardware.matmul_app": lambda: __import__("course.hardware.widgets", fromlist=["x"]).matmul_app(
        sizes=(16, 32), size=16),
    "bppsa.timing_app": lambda: __import__("course.bppsa.widgets", fromlist=["x"]).timing_app(T=10, hidden=4, batch=1),
    "backprop.step_sweep_app": lambda: __import__("course.backprop.widgets", fromlist=["x"]).step_sweep_app(),
    "gemm.cpu_ladder_app": lambda: __import__("course.gemm.widgets", fromlist=["x"]).cpu_ladder_app(n=64),
}


@pytest.mark.slow
@pytest.mark.widgets
@pytest.mark.parametrize("app_name", sorted(APPS))
def test_an_app_showing_references_names_both_devices(app_name, tmp_path, monkeypatch):
    import course

    if course.gpu_available():
        pytest.skip("a GPU answers here: the apps measure it instead of drawing references")
    gpus = set()
    for name in set(SHIPPED) | set(STANDIN):
        first, gpu = _first(name)
        gpus.add(_short(gpu))
        (tmp_path / f"{name}__first.json").write_text(json.dumps(first))
        (tmp_path / f"{name}__second.json").write_text(json.dumps(_second(name)))
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = APPS[app_name]()
        if "device" in app.controls:
            app.controls["device"].value = "gpu"
    assert app.last_error is None, app.last_error
    words = "\n".join((app.figure_words, app.html.value, app.notice.value))
    assert _short(SECOND) in words and any(g in words for g in gpus - {_short(SECOND)}), words


def test_the_readme_facts_name_each_device_they_read(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("reference_figures",
                                                  Path(__file__).parents[1] / "tools" / "reference_figures.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    for name in ("backprop_train_step", "matmul_sweep", "vectorize_bandwidth", "vectorize_ladder",
                 "scan_kernel_variants", "bppsa_rnn"):
        (tmp_path / f"{name}__first.json").write_text(SHIPPED[name].read_text())
        (tmp_path / f"{name}__second.json").write_text(
            json.dumps(_renamed(SHIPPED[name], SECOND, SECOND_DATE, scale=0.7)))
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    targets = [line for line in tool.figures().splitlines() if line.startswith("* ")]
    assert len(targets) == 4
    for line in targets:
        assert line.count(SECOND) >= 1 and line.count("NVIDIA H100") >= 1, line
    # a step is judged against its own device's matrix product: the fake device's GEMM, not the H100's
    first = results.ResultSet.load(SHIPPED["backprop_train_step"], source="reference").label
    step = targets[0].split(f"({first})")[1]
    assert f"recorded on {SECOND}" in step and "H100" not in step
    summary = tool.summary()
    assert SECOND in summary and "NVIDIA H100" in summary


ONE_GPU = re.compile(r"\b(the|its|an) H100 reference\b|H100 (plain|padded|column)\b|the H100 column")


def test_no_sentence_assumes_the_reference_gpu_is_an_h100():
    root = Path(__file__).parents[1]
    files = [p for p in (root / "course").rglob("*.py")] + sorted((root / "notebooks").rglob("*.ipynb")) + \
        [root / n for n in ("README.md", "INSTRUCTORS.md", "CONTRIBUTING.md")] + sorted((root / "tools").glob("*.py"))
    found = [f"{p.relative_to(root)}: {m.group(0)}" for p in files for m in ONE_GPU.finditer(p.read_text())]
    assert not found, "say which device a reference is from, or 'each recorded GPU reference':\n" + "\n".join(found)


@pytest.mark.slow
def test_the_step_timelines_draw_one_device_per_figure_each_named(references):
    from course.backprop.ladder_plots import ladder_timeline_figure, timeline_devices
    from course.errors import BadInputError
    from course.timeline import load_timelines

    gpu = references("step_timelines", both=True)
    timelines, notes = load_timelines()
    assert not notes and timeline_devices(timelines) == sorted({gpu, SECOND}, key=[gpu, SECOND].index)
    for device, other in ((gpu, SECOND), (SECOND, gpu)):
        fig = ladder_timeline_figure(timelines, device=device)
        title = fig._suptitle.get_text() if fig._suptitle is not None else figure_words(fig)
        assert _short(device) in title and _short(other) not in title, title
        assert len(fig.axes) == len([t for t in timelines if t.device_name == device])      # one panel a rung
        plt.close(fig)
    with pytest.raises(BadInputError, match="device must name"):
        ladder_timeline_figure(timelines, device="NVIDIA B200")


def test_lesson_01s_ladder_tells_two_devices_apart_without_naming_them_in_every_entry(references):
    from course.backprop.ladder_plots import ladder_figure

    gpu = references("backprop_train_step", both=True)
    refs = load_reference("backprop_train_step")
    fig = ladder_figure(None, refs)
    entries, text = _legend_entries(fig), _figure_text(fig)
    assert _short(gpu) in text and _short(SECOND) in text and "Dotted" in text
    assert not [e for e in entries if "recorded" in e or SECOND_DATE in e], entries
    styles = {ln.get_linestyle() for ln in fig.axes[0].lines if len(ln.get_xdata()) >= 2}
    assert {"--", ":"} <= styles
    plt.close(fig)
