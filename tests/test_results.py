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
    with pytest.warns(UserWarning, match="skipping a reference file"):
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


def _reference_dict(**gpu):
    d = _rs().to_dict()
    d["provenance"]["gpus"] = [{"name": "Test GPU 9000"}]
    d["records"].append({"device": "gpu", "n": 1, "median_s": 0.1})
    return d


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        path.write_text(json.dumps(content))
    elif content == "DIRECTORY":
        path.mkdir()
    else:
        path.write_text(content)


def _bad(mutate):
    d = _reference_dict()
    mutate(d)
    return d


BAD_FILES = {
    "truncated": lambda: json.dumps(_reference_dict())[:40],
    "not UTF-8": lambda: json.dumps(_reference_dict()).encode("utf-16"),
    "null provenance": lambda: _bad(lambda d: d.update(provenance=None)),
    "provenance a list": lambda: _bad(lambda d: d.update(provenance=[1, 2])),
    "date a number": lambda: _bad(lambda d: d["provenance"].update(date=2026)),
    "gpus a string": lambda: _bad(lambda d: d["provenance"].update(gpus="H100")),
    "params a list": lambda: _bad(lambda d: d.update(params=[1])),
    "notes of numbers": lambda: _bad(lambda d: d.update(notes=[1])),
    "timing as text": lambda: _bad(lambda d: d["records"][0].update(median_s="0.5")),
    "records an object": lambda: _bad(lambda d: d.update(records={"device": "cpu"})),
    "a directory": lambda: "DIRECTORY",
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_bad_reference_file_is_skipped_with_a_warning_naming_it(tmp_path, kind):
    _write(tmp_path / "demo__good.json", _reference_dict())
    _write(tmp_path / "demo__bad.json", BAD_FILES[kind]())
    with pytest.warns(UserWarning, match="demo__bad.json"):
        refs = load_reference("demo", tmp_path)
    assert len(refs) == 1 and refs[0].gpu_name == "Test GPU 9000"


def test_the_not_utf8_case_really_is_not_utf8():
    with pytest.raises(UnicodeDecodeError):
        BAD_FILES["not UTF-8"]().decode("utf-8")


def test_nan_and_infinity_round_trip_and_can_be_saved_again(tmp_path):
    rs = ResultSet("demo")
    rs.add(device="cpu", n=1, median_s=float("nan"), gb_per_s=float("inf"), low=float("-inf"))
    path = rs.save(tmp_path / "demo.json")
    text = path.read_text()
    assert '"NaN"' in text and '"Infinity"' in text and "-Infinity" in text
    back = ResultSet.load(path)
    r = back.records[0]
    assert r["median_s"] != r["median_s"] and r["gb_per_s"] == float("inf") and r["low"] == float("-inf")
    back.save(tmp_path / "again.json")  # what loading accepted, saving never refuses
    # Python's json also writes bare NaN / Infinity: a file holding those loads and saves too; as a
    # reference, the record holding NaN is no measurement to draw, so it is left out with a note
    d = _reference_dict()
    (tmp_path / "demo__bare.json").write_text(json.dumps(d).replace('"median_s": 0.1', '"median_s": NaN'))
    (ref,) = load_reference("demo", tmp_path)
    assert not ref.select(device="gpu") and any("has nan in 'median_s'" in note for note in ref.notes)
    assert ResultSet.load(tmp_path / "demo__bare.json").select(device="gpu")[0]["median_s"] != 0.1
    ref.save(tmp_path / "resaved.json")


def test_recording_a_reference_again_keeps_the_earlier_one_dated(tmp_path, monkeypatch):
    import importlib

    results = importlib.import_module("course.results")
    monkeypatch.setattr(results, "gpu_available", lambda: True)
    monkeypatch.setattr(results, "gpu_info", lambda: [{"name": "Test GPU 9000"}])
    first = ResultSet.from_dict(_reference_dict() | {"experiment": "demo"})
    first.provenance["date"] = "2026-01-02T00:00:00+00:00"
    save_reference(first, tmp_path)
    second = ResultSet.from_dict(_reference_dict() | {"experiment": "demo"})
    second.provenance["date"] = "2026-02-03T00:00:00+00:00"
    path = save_reference(second, tmp_path)
    assert ResultSet.load(path).date == "2026-02-03"
    assert (tmp_path / "archive" / "demo__test-gpu-9000__2026-01-02.json").is_file()
    assert [r.date for r in load_reference("demo", tmp_path)] == ["2026-02-03"]


# ----------------------------------------------------------------------- a GPU record's environment

class _FakeCupy:
    class cuda:  # noqa: N801 (the shape of cupy.cuda)
        class cublas:  # noqa: N801
            @staticmethod
            def getVersion(handle):  # noqa: N802
                assert handle == "handle"
                return 120904

        class cudnn:  # noqa: N801
            @staticmethod
            def getVersion():  # noqa: N802
                raise RuntimeError("no cuDNN in this CuPy")

        class device:  # noqa: N801
            @staticmethod
            def get_cublas_handle():
                return "handle"


class _FakeTorch:
    class backends:  # noqa: N801
        class cudnn:  # noqa: N801
            allow_tf32 = True

            @staticmethod
            def version():
                return 91002

        class cuda:  # noqa: N801
            class matmul:  # noqa: N801
                allow_tf32 = False


def test_gpu_environment_reads_driver_clocks_libraries_tf32_and_env_and_leaves_out_what_is_absent():
    from course.environment import gpu_environment

    seen = []

    def smi(cmd):
        seen.append(cmd)
        return ("580.82.07, 1980, 2619, 1980, 2619, 700.00, 700.00, Enabled\n"
                "580.82.07, 345, 2619, 1980, 2619, 700, 700, Enabled")

    env = gpu_environment(run=smi, env={"CUPY_ACCELERATORS": "cub,cutensor", "HOME": "x"},
                          modules={"cupy": _FakeCupy, "torch": _FakeTorch})
    assert seen[0][0] == "nvidia-smi" and not any("-pl" in c or "-lgc" in c for c in seen[0])   # read, never set
    assert env["driver_release"] == "580.82.07"
    assert [g["clocks.sm"] for g in env["clocks_and_power"]] == ["1980", "345"]
    assert env["clocks_and_power"][0]["power.limit"] == "700.00"
    assert env["cublas_version"] == 120904 and "cudnn_version_cupy" not in env
    assert env["cudnn_version_torch"] == 91002
    assert env["tf32"] == {"torch_matmul_allow_tf32": False, "torch_cudnn_allow_tf32": True}
    assert env["environment"] == {"CUPY_ACCELERATORS": "cub,cutensor"}
    assert gpu_environment(run=lambda cmd: None, env={}, modules={}) == {}


def test_git_commit_is_read_where_there_is_a_checkout_and_left_out_elsewhere(tmp_path):
    from course.environment import git_commit

    assert git_commit(run=lambda cmd: "abc123", root=tmp_path) == {}          # no .git here
    (tmp_path / ".git").mkdir()
    answers = {"rev-parse": "abc123", "status": " M course/x.py"}
    got = git_commit(run=lambda cmd: next(v for k, v in answers.items() if k in cmd), root=tmp_path)
    assert got == {"commit": "abc123", "dirty": True}
    assert git_commit(run=lambda cmd: None, root=tmp_path) == {}
