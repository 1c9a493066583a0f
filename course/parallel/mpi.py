"""Start real MPI processes from Python (a notebook cell) and read their results back.

Why a launcher rather than ipyparallel's MPI engines: ``mpiexec`` with a course module is the very
command a learner would type on a cluster, it needs nothing but ``pip install mpich mpi4py``, and
each run starts from a clean slate, so a rank that dies or hangs cannot leave a notebook's kernel
stuck: :func:`run_mpi` runs ``mpiexec`` in its own process group with a timeout, kills the whole
group when the time is up, and turns every failure into a :class:`MPIError` that says what to do.

The ranks talk over shared memory on this machine (loopback only; nothing leaves it).  Each rank
runs with one BLAS thread, so p ranks use p cores; with more ranks than cores they share cores
(*oversubscribed*) and every timing says so.

>>> find_mpiexec() is None or find_mpiexec().name.startswith("mpiexec")
True
"""

from __future__ import annotations

import functools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ..arguments import Given, Real, arguments
from ..cpu import usable_cores
from ..errors import BadInputError, CourseError
from .collectives import validate_workers

__all__ = ["MPIError", "TASK_NAMES", "find_mpiexec", "mpi_family", "mpi_unavailable_reason", "mpi_available",
           "max_ranks", "cores", "oversubscribed", "run_mpi", "INSTALL_HINT"]

INSTALL_HINT = "pip install mpich mpi4py  (MPICH from the package index: no system MPI needed)"


class MPIError(CourseError, RuntimeError):
    """MPI could not start, a rank failed, or a run did not finish in time."""

#: The tasks a rank can run (:data:`course.parallel.worker.TASKS` maps each to its function).
TASK_NAMES = ("ring_check", "allreduce_timing", "data_parallel", "dp_timing", "pipeline", "tensor_parallel",
              "tp_timing", "nccl_ring", "shard_collectives", "zero_train", "zero_timing", "sleep")


def find_mpiexec() -> Path | None:
    """``mpiexec`` next to this Python first (the mpich wheel puts it there), then on the PATH."""
    here = Path(sys.executable).parent
    for name in ("mpiexec", "mpiexec.exe", "mpiexec.hydra"):
        if (here / name).is_file() and os.access(here / name, os.X_OK):
            return here / name
    found = shutil.which("mpiexec")
    return Path(found) if found else None


def mpi_family(text: str) -> str | None:
    """The MPI family a version text names: "Open MPI", "MPICH" (MPICH, its Hydra launcher, and the
    MPICH-compatible MVAPICH and Intel MPI), or None when it names neither.

    >>> mpi_family("MPICH Version: 4.2.3"), mpi_family("mpiexec (OpenRTE) 4.1.2"), mpi_family("?")
    ('MPICH', 'Open MPI', None)
    """
    if not isinstance(text, str):
        raise BadInputError(f"text must be what mpiexec --version printed, a string; got {text!r:.80}")
    t = text.lower()
    if "open mpi" in t or "openrte" in t:
        return "Open MPI"
    if any(word in t for word in ("mpich", "hydra", "mvapich", "intel(r) mpi")):
        return "MPICH"
    return None


@functools.lru_cache(maxsize=4)
def _families(mpiexec: str) -> tuple[str | None, str | None]:
    """(the family of the MPI library mpi4py loads, the family of ``mpiexec``); None where unknown.
    Asked in child processes, so that loading an MPI library can never upset the notebook's kernel."""
    def ask(cmd: list[str]) -> str | None:
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return mpi_family(done.stdout + done.stderr) if done.returncode == 0 else None
    library = ask([sys.executable, "-c", "import mpi4py; mpi4py.rc.initialize = False; "
                   "from mpi4py import MPI; print(MPI.Get_library_version())"])
    return library, ask([mpiexec, "--version"])


def mpi_unavailable_reason() -> str | None:
    """Why MPI cannot start here (None when it can): no mpi4py, no ``mpiexec``, or an ``mpiexec`` of
    another MPI than the one mpi4py loads (its ranks would each run alone, as rank 0 of 1)."""
    if find_spec("mpi4py") is None:
        return f"mpi4py is not installed. Install it with: {INSTALL_HINT}"
    exe = find_mpiexec()
    if exe is None:
        return (f"no mpiexec next to {Path(sys.executable).parent} or on the PATH. Install MPICH "
                f"with: {INSTALL_HINT}")
    library, launcher = _families(str(exe))
    if library and launcher and library != launcher:
        return (f"mpi4py here loads {library}, but the mpiexec found ({exe}) is {launcher}'s: its ranks "
                f"would not find each other (each would run alone as rank 0 of 1). Use one MPI for both: "
                f"put {library}'s mpiexec first on the PATH, or install mpi4py and MPICH side by side in "
                f"this environment ({INSTALL_HINT}).")
    return None


def mpi_available() -> bool:
    """True when mpi4py imports and an ``mpiexec`` was found."""
    return mpi_unavailable_reason() is None


def cores() -> int:
    """Cores the ranks may use: :func:`course.cpu.usable_cores` (affinity and CPU quota)."""
    return usable_cores()


def max_ranks() -> int:
    """The most ranks :func:`run_mpi` starts here: 4 per core (at least 8)."""
    return max(8, 4 * cores())


@arguments(p=Given(validate_workers))
def oversubscribed(p: int) -> bool:
    """True when p ranks are more than the cores here (they take turns, so timings stretch)."""
    return p > cores()


def _validate_ranks(p: Any) -> int:
    p = validate_workers(p)
    if p > max_ranks():
        raise BadInputError(f"p = {p} ranks is more than this machine can start sensibly ({cores()} cores, "
                            f"at most {max_ranks()} ranks: 4 per core). Use fewer ranks, or run on a "
                            f"cluster under the site's mpiexec.")
    return p


def _validate_task(task: Any) -> str:
    if not isinstance(task, str) or task not in TASK_NAMES:
        raise BadInputError(f"unknown MPI task {task!r}; choose one of {sorted(TASK_NAMES)}.")
    return task


def _require_mpi() -> None:
    why = mpi_unavailable_reason()
    if why:
        raise MPIError(f"MPI cannot start: {why}")


def _reader(stream: Any, lines: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)
    stream.close()


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill mpiexec and every rank it started (they share its process group)."""
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@arguments(task=Given(_validate_task), p=Given(_validate_ranks), timeout_s=Real(above=0, hint="seconds"),
           then=_require_mpi)
def run_mpi(task: str, p: int, params: dict | None = None, timeout_s: float = 120.0,
            progress: Callable[[str], None] | None = print) -> dict:
    """Run ``course.parallel.worker``'s ``task`` on ``p`` MPI ranks and return rank 0's result.

    Parameters
    ----------
    task : a name in :data:`TASK_NAMES` (``"ring_check"``, ``"pipeline"``, ...).
    p : ranks to start (1 .. :func:`max_ranks`).
    params : JSON-ready parameters the task reads.
    timeout_s : wall-clock limit; past it every rank is killed and :class:`MPIError` says so.
    progress : called with each progress line (default ``print``); None for silence.

    Raises
    ------
    BadInputError : p < 1, or more ranks than this machine can start.
    MPIError : MPI not installed, a rank that failed or died, or a run over its time limit.

    Examples
    --------
    >>> r = run_mpi("ring_check", 2, {"lengths": [5]}, progress=None)  # doctest: +SKIP
    >>> r["checks"][0]["identical_on_every_rank"]                       # doctest: +SKIP
    True
    """
    with tempfile.TemporaryDirectory(prefix="course-mpi-") as tmp:
        pin, pout = Path(tmp) / "params.json", Path(tmp) / "result.json"
        pin.write_text(json.dumps(params or {}), encoding="utf-8")
        cmd = [str(find_mpiexec()), "-n", str(p), sys.executable, "-m", "course.parallel.worker",
               task, str(pin), str(pout)]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
        root = str(Path(__file__).resolve().parents[2])   # the ranks import this very course
        env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        began = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, start_new_session=True)
        lines: queue.Queue = queue.Queue()
        reader = threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True)
        reader.start()
        log: list[str] = []
        try:
            while True:
                try:
                    rc = proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    rc = None
                while not lines.empty():
                    line = lines.get()
                    if line.startswith("@@progress "):
                        if progress:
                            progress(f"[{p} ranks, {time.perf_counter() - began:.1f} s] {line[11:].strip()}")
                    else:
                        log.append(line)
                if rc is not None:
                    reader.join(timeout=10)      # the ranks' last lines (their tracebacks) may still be in the pipe
                    while not lines.empty():
                        line = lines.get()
                        if not line.startswith("@@progress "):
                            log.append(line)
                    break
                if time.perf_counter() - began > timeout_s:
                    _kill_group(proc)
                    raise MPIError(f"the {task!r} run on {p} ranks did not finish within {timeout_s:g} s, "
                                   f"so every rank was killed. A rank may have hung or the machine is very "
                                   f"busy: try fewer ranks, smaller sizes or a longer timeout_s."
                                   + _tail(log))
        except BaseException:
            if proc.poll() is None:          # an interrupt (the stop button) kills the ranks too
                _kill_group(proc)
            raise
        if rc != 0 or not pout.is_file():
            raise MPIError(f"the {task!r} run on {p} ranks failed (mpiexec exit status {rc}): a rank "
                           f"raised an error or died." + _tail(log))
        result = json.loads(pout.read_text(encoding="utf-8"))
    result["wall_s"] = time.perf_counter() - began
    result["oversubscribed"] = oversubscribed(p)
    return result


_ERROR_LINE = re.compile(r"^(rank \d+: )?[\w.]*(Error|Exception)\b: ")


def _tail(log: list[str], n: int = 15) -> str:
    """The ranks' error lines (each once), then the last ``n`` lines of their output."""
    errors = list(dict.fromkeys(line.strip() for line in log if _ERROR_LINE.match(line.strip())))[-4:]
    text = "".join(log[-n:]).strip()
    return (("\nThe error: " + "\n".join(errors)) if errors else "") + (
        f"\nLast lines from the ranks:\n{text}" if text else "")
