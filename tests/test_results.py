"""Result sets: provenance, JSON round trips, validation, atomic saves, references."""

from __future__ import annotations

import json

import pytest

import course
from course.errors import ResultsError
from course.results import ResultSet, load_reference, save_reference


def _rs():
    rs = ResultSet("demo", params={"sizes": [1, 2]})
    rs.add_timing(course.benchmark(sum, [1, 2], repeat=3), n=1)
    rs.add(device="cpu", n=2, median_s=0.5)
    return rs


def test_provenance_names_date_cpu_versions_and_gpus():
    p = course.provenance()
    assert p["date"][:2] == "20" and p["cpu"]["model"] == course.cpu_info()["model"]
    assert "numpy" in p["libraries"] and "python" in p
    assert isinstance(p["gpus"], list)


def test_save_and_load_round_trip(tmp_path):
    rs = _rs()
    path = rs.save(tmp_path / "sub" / "demo.json")
    back = ResultSet.load(path)
    assert back.records == rs.records and back.params == rs.params
    assert back.provenance["cpu"] == rs.provenance["cpu"]
    assert [r["n"] for r in back.select(device="cpu")] == [1, 2]
    assert back.label.startswith("measured live on")
    assert not list(tmp_path.glob("sub/.tmp-*"))  # no temporary file left behind


def test_a_failed_save_leaves_the_old_file_whole(tmp_path):
    rs = _rs()
    path = rs.save(tmp_path / "demo.json")
    before = path.read_text()
    rs.add(device="cpu", bad=float("nan"))
    rs.records[-1]["bad"] = object()  # not JSON serialisable
    with pytest.raises(TypeError):
        rs.save(path)
    assert path.read_text() == before
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.update(schema=99), "schema"),
    (lambda d: d["provenance"].pop("cpu"), "provenance field 'cpu'"),
    (lambda d: d["records"].append({"n": 3}), "does not name its device"),
    (lambda d: d["records"].append({"device": "gpu"}), "provenance names no GPU"),
    (lambda d: d.update(experiment=""), "no experiment name"),
])
def test_validation_says_what_is_wrong(tmp_path, mutate, match):
    d = _rs().to_dict()
    d["provenance"]["gpus"] = []
    mutate(d)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ResultsError, match=match):
        ResultSet.load(p)


def test_loading_garbage_or_nothing_is_a_clear_error(tmp_path):
    with pytest.raises(ResultsError, match="no results file"):
        ResultSet.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        ResultSet.load(tmp_path / "x.json")


def test_records_must_name_their_device():
    with pytest.raises(ResultsError, match="which device"):
        ResultSet("demo").add(n=1)


def test_references_are_labelled_with_device_and_date(tmp_path):
    d = _rs().to_dict()
    d["experiment"] = "demo"
    d["provenance"]["gpus"] = [{"name": "Test GPU 9000"}]
    d["provenance"]["date"] = "2026-01-02T03:04:05+00:00"
    d["records"].append({"device": "gpu", "n": 1, "median_s": 0.1})
    (tmp_path / "demo__test-gpu-9000.json").write_text(json.dumps(d))
    (tmp_path / "demo__broken.json").write_text("{")
    with pytest.warns(UserWarning, match="skipping reference file"):
        refs = load_reference("demo", tmp_path)
    assert len(refs) == 1 and refs[0].source == "reference"
    assert refs[0].label == "recorded on Test GPU 9000, 2026-01-02"


def test_references_can_only_be_saved_from_a_live_gpu(tmp_path):
    if course.gpu_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ResultsError, match="only be recorded on a machine where a GPU answers"):
        save_reference(_rs(), tmp_path)


def test_shipped_reference_files_are_valid_and_come_from_gpus():
    for path in course.results.REFERENCE_DIR.glob("*.json"):
        rs = ResultSet.load(path, source="reference")
        assert rs.provenance["gpus"], f"{path.name} names no GPU"
        assert rs.select(device="gpu"), f"{path.name} has no GPU records"
