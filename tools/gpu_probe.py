"""What a GPU machine has, checked before anything is timed: the first step of ``tools/gpu_run.sh``.

    python tools/gpu_probe.py [--out probe.json] [--dry-run]

Prints one line per check and writes them all to ``--out``: the Python packages the course needs
(a missing one is installed from ``.whl/`` when that folder is here: ``tools/gpu_wheels.sh``), CuPy
and a real device call, numba-cuda, PyTorch and its GPU, ``nvidia-smi``'s driver, clocks and
temperature, the course's own cuBLAS handle (one product against CuPy's ``matmul``, inside and
outside a CUDA graph) and the CUDA driver's graph-node calls.  ``--dry-run`` runs on the stand-in GPU
and skips what needs a real one, with a line each.  Exit status 0 unless CuPy finds no GPU (3) or the
course's cuBLAS handle gives a wrong product (1).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Import name -> distribution, for what the GPU steps import (no Jupyter, no widgets).
NEEDED = {"numpy": "numpy", "scipy": "scipy", "matplotlib": "matplotlib", "sklearn": "scikit-learn",
          "tqdm": "tqdm", "numba": "numba", "threadpoolctl": "threadpoolctl", "pytest": "pytest",
          "hypothesis": "hypothesis"}
GPU_NEEDED = {"cupy": "cupy-cuda12x or cupy-cuda13x", "numba.cuda": "numba-cuda", "torch": "torch (CUDA build)"}
SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "temperature.gpu",
              "power.draw", "memory.used", "memory.total", "pstate")


def _try(fn):
    try:
        return fn()
    except Exception as exc:            # a probe reports, it never stops at the first problem
        return {"error": f"{type(exc).__name__}: {exc}"}


def install_wheels(missing: list[str]) -> str:
    """Install ``.whl/*.whl`` into ``/tmp/course-site`` (no index, no network) and put it on the path."""
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if not wheels:
        return f"missing {missing} and no .whl/ folder came along (tools/gpu_wheels.sh fetches them)"
    target = "/tmp/course-site"
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                          "--target", target, *map(str, wheels)], capture_output=True, text=True, timeout=120)
    sys.path.insert(0, target)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [target, os.environ.get("PYTHONPATH")]))
    return f"installed {len(wheels)} wheel(s) into {target}: exit {res.returncode} {res.stderr[-300:]}"


def packages() -> dict:
    out, missing = {}, []
    for mod, dist in {**NEEDED, **GPU_NEEDED}.items():
        try:
            m = importlib.import_module(mod)
            out[mod] = getattr(m, "__version__", "present")
        except Exception as exc:
            out[mod] = f"MISSING ({dist}): {type(exc).__name__}: {exc}"
            if mod in NEEDED:
                missing.append(mod)
    if missing:
        out["wheels"] = install_wheels(missing)
    return out


def nvidia_smi() -> dict:
    res = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return dict(zip(SMI_FIELDS, (v.strip() for v in res.stdout.strip().split(",")))) if res.returncode == 0 \
        else {"error": res.stderr.strip()[-300:]}


def devices() -> dict:
    from course.devices import gpu_info, gpu_unavailable_reason

    info = gpu_info()
    return {"gpu": info[0] if info else None, "why_none": gpu_unavailable_reason()}


def torch_gpu() -> dict:
    import torch

    ok = torch.cuda.is_available()
    return {"version": torch.__version__, "cuda": torch.version.cuda, "available": ok,
            "device": torch.cuda.get_device_name(0) if ok else None,
            "cudnn": torch.backends.cudnn.version() if ok else None}


def cublas_handle() -> dict:
    """One product through the course's cuBLAS handle against CuPy's, eager and captured."""
    import numpy as np

    from course.capture import capture_graph, cublas_library_path, cublas_status, graph_kernels, matmul_into
    from course.devices import cupy_module

    cp = cupy_module()
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((300, 200)).astype(np.float32))
    b = cp.asarray(rng.standard_normal((200, 100)).astype(np.float32))
    out, ref = cp.zeros((300, 100), cp.float32), cp.matmul(a, b)
    t0 = time.perf_counter()
    matmul_into(a.T.T, b, out)
    eager_err = float(cp.abs(out - ref).max().get())
    out.fill(0)
    captured = capture_graph(lambda: matmul_into(a, b, out), what="the probe's product")
    if captured.ok:
        captured.graph.launch(cp.cuda.get_current_stream())
    graph_err = float(cp.abs(out - ref).max().get()) if captured.ok else None
    return {"library": _try(cublas_library_path), "path": cublas_status(), "eager_max_error": eager_err,
            "graph_max_error": graph_err,
            "captured": captured.ok, "capture_failed": captured.reason, "graph_nodes": graph_kernels(captured.graph),
            "seconds": round(time.perf_counter() - t0, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write every check as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="on the stand-in GPU: skip what needs a real one")
    args = ap.parse_args(argv)
    report = {"python": sys.version.split()[0], "platform": platform.platform(),
              "date": time.strftime("%Y-%m-%d %H:%M")}
    report["packages"] = packages()
    report["devices"] = _try(devices)
    report["nvidia_smi"] = {"skipped": "dry run: no GPU"} if args.dry_run else _try(nvidia_smi)
    report["torch"] = _try(torch_gpu)
    report["cublas"] = _try(cublas_handle)
    for key, value in report.items():
        print(f"{key}: {json.dumps(value, default=str)[:600]}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    if not (report["devices"] or {}).get("gpu"):
        print("NO GPU answers: the GPU steps will say so")
        return 3
    cub = report["cublas"]
    bad = "error" in cub or (cub.get("eager_max_error") or 0) > 1e-3 or (cub.get("graph_max_error") or 0) > 1e-3
    if bad:
        print("FAILED: the course's cuBLAS handle did not give CuPy's product (see cublas above)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
