"""Every CUDA C source the course hands to CuPy compiles for sm_75 (Colab's T4), sm_80 and sm_90, with no
register spilled to local memory: ``ptxas -v`` read through nvcc, or NVRTC where nvcc is missing (no GPU
needed).  The list of sources is tools/ptxas_report.py's, and a test checks that it names them all."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from _nvrtc import no_compiler

from course.cuda_c import ARCHS, parse_ptxas, ptxas_rows

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("ptxas_report", ROOT / "tools" / "ptxas_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name, module, attr", TOOL.SOURCES, ids=[s[0] for s in TOOL.SOURCES])
def test_each_cuda_c_source_compiles_without_spills(name, module, attr, arch):
    source = TOOL.source_text(module, attr)             # read now: a source may change under the test
    try:
        rows = ptxas_rows(source, arch)
    except FileNotFoundError as exc:
        no_compiler(str(exc))
    declared = set(re.findall(r'extern "C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(',
                              source))
    assert {r["kernel"] for r in rows} == declared, f"{name}: ptxas reported {rows}"
    for r in rows:
        assert "registers" in r, f"{name} {r['kernel']} ({arch}): no register count in the ptxas report"
        assert r["spill_stores"] == r["spill_loads"] == 0, (
            f"{name} {r['kernel']} spills on {arch}: {r} (lower __launch_bounds__ pressure or the per-thread items)")


def _handed_to_cupy() -> set[tuple[str, str]]:
    """(module, attribute) of each name passed as the code of a RawModule or RawKernel in course/."""
    found = set()
    for path in sorted((ROOT / "course").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for attr in re.findall(r"Raw(?:Module\(code=|Kernel\()\s*([A-Z_][A-Z0-9_]*)", text):
            found.add((".".join(path.relative_to(ROOT).with_suffix("").parts), attr))
    return found


def test_the_report_lists_every_source_handed_to_raw_module_or_raw_kernel():
    listed = {(module, attr) for _, module, attr in TOOL.SOURCES}
    found = _handed_to_cupy()
    assert {("course.scan.singlepass", "SINGLE_PASS_SOURCE"), ("course.throughput.memory", "CHASE_KERNEL")} <= found
    assert found <= listed, f"add to tools/ptxas_report.py SOURCES: {sorted(found - listed)}"


def test_the_tool_takes_several_archs_and_fails_on_a_spill(monkeypatch, capsys):
    import course.cuda_c

    asked = []

    def fake_rows(source, arch):
        asked.append(arch)
        return [{"kernel": "k", "registers": 255, "spill_stores": 8 if arch == "sm_75" else 0, "spill_loads": 0,
                 "compiler": "nvcc"}]

    monkeypatch.setattr(course.cuda_c, "ptxas_rows", fake_rows)
    assert TOOL.main(["--arch", "sm_80", "sm_90"]) == 0
    assert asked == ["sm_80", "sm_90"] * len(TOOL.SOURCES)
    assert TOOL.main([]) == 1 and "spills 8 stores" in capsys.readouterr().out
    assert asked[-len(ARCHS):] == list(ARCHS)


def test_parse_ptxas_reads_a_spill():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_75'\n"
           "ptxas         .     16 bytes stack frame, 12 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]\n")
    assert parse_ptxas(log) == [{"kernel": "k", "stack": 16, "spill_stores": 12, "spill_loads": 8,
                                 "registers": 255, "smem_bytes": 1024}]
