"""Measurements with their provenance, stored: the result set and the shipped references.

A :class:`ResultSet` is one experiment's records (plain dicts: parameters and
measured values) plus a *provenance* block naming the CPU model, every GPU that
answered, driver and runtime versions, library versions and the date (read by
:mod:`course.environment`).  It is stored as JSON (never pickle), written
atomically, and validated on load.

**Reference results** are result sets recorded on real GPUs and shipped in
``course/reference/``.  Plots overlay them, labelled "recorded on <device>,
<date>", when no GPU is present here.  :func:`save_reference` refuses to write
one unless its GPU records were measured live on a GPU in this process, so a
reference can only come from a real GPU run.

>>> rs = ResultSet("demo", params={"sizes": [1, 2]})
>>> rs.add(device="cpu", n=1, median_s=0.5)
>>> rs.select(device="cpu")[0]["n"]
1
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .arguments import Given, Optional, arguments
from .devices import gpu_available, gpu_info
from .environment import provenance
from .errors import BadInputError, ResultsError
from .standin import standin_active
from .torch_peer import torch_tf32_flags

__all__ = ["ResultSet", "load_reference", "save_reference", "validate_results", "validate_references",
           "REFERENCE_DIR", "SCHEMA_VERSION", "shared_file_mode"]


def shared_file_mode() -> int:
    """The mode a plain ``open()`` would give a new file here (``0o666`` less the umask).

    ``tempfile.mkstemp`` makes its files ``0o600``; a file written through one and renamed into
    place gets this mode instead, so the JSON and HTML are as readable as the PNGs beside them.
    """
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask

SCHEMA_VERSION = 1
REFERENCE_DIR = Path(__file__).resolve().parent / "reference"


#: How a number that is not finite is written in JSON (plain JSON has no NaN or infinity): as one of
#: these strings, read back as the float it names.  Saving and loading round-trip exactly.
_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _plain(v: Any) -> Any:
    """numpy scalars, arrays and dtypes as plain Python values (NaN and infinities stay floats)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, np.dtype):
        return v.name
    return v


def _encode(v: Any) -> Any:
    """A plain value made JSON-safe: non-finite floats become "NaN", "Infinity" or "-Infinity"."""
    v = _plain(v)
    if isinstance(v, dict):
        return {k: _encode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return "NaN" if np.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v


def _decode(v: Any) -> Any:
    """The inverse of :func:`_encode` (a bare NaN/Infinity that Python's json parser accepts stays a float)."""
    if isinstance(v, dict):
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    return v


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite_or_not_number(v: Any) -> bool:
    """False for NaN or an infinity, also inside a list; True for anything else."""
    if isinstance(v, list):
        return all(_finite_or_not_number(x) for x in v)
    return not isinstance(v, float) or math.isfinite(v)


def _kind(v: Any) -> str:
    return "number" if _is_number(v) else "text" if isinstance(v, str) else "list" if isinstance(v, list) else \
        "null" if v is None else type(v).__name__


#: How a timing was taken, not what it measured: a peer library's timing (PyTorch's events) leaves them None.
NOT_READ_FIELDS = frozenset({"threads", "load"})


def _unlike_peers(r: dict, judged: tuple[list[dict], int]) -> str:
    """What record ``r`` lacks or holds unlike its peers (see :meth:`ResultSet.incomplete_records`), or ""."""
    peers, few = judged
    if not peers:
        return ""
    most = len(peers) // 2 + 1
    fields = {k for s in peers for k in s if k != "device"}
    needed = len(peers) if few else most          # records of other kinds: only what every one of them has
    missing = sorted(k for k in fields - set(r) if sum(k in s for s in peers) >= needed)
    if missing and (not few or len(missing) <= few):
        return f"lacks {', '.join(map(repr, missing))}"
    for k, v in r.items():
        if v is None and k in NOT_READ_FIELDS:
            continue
        kinds = [_kind(s[k]) for s in peers if k in s]
        for kind in ("number", "list", "text"):
            if _kind(v) != kind and kinds.count(kind) >= most and kinds.count(_kind(v)) < most:
                return f"has {v!r} in {k!r}"
    return ""


@dataclass
class ResultSet:
    """One experiment's records and the provenance of the run that made them.

    Attributes
    ----------
    experiment : the experiment's registered name (``"matmul_sweep"``).
    params : the parameters of the whole run (sizes, dtype, ...).
    records : one dict per measurement; each has at least ``"device"``.
    provenance : from :func:`provenance`, filled in at creation.
    notes : free text (e.g. "stopped early by the time budget").
    """

    experiment: str
    params: dict = field(default_factory=dict)
    records: list = field(default_factory=list)
    provenance: dict = field(default_factory=provenance)
    notes: list = field(default_factory=list)
    schema: int = SCHEMA_VERSION
    source: str = "live"  # "live" or "reference"

    def __post_init__(self) -> None:
        """Fields of the wrong kind are refused at once; :meth:`validate` checks the rest when the set is saved
        or loaded (a set being filled in may hold a GPU record before its provenance is complete)."""
        self._validate_fields()

    def _validate_fields(self) -> None:
        if not isinstance(self.experiment, str):
            raise ResultsError(f"experiment must be a string naming the experiment, got {self.experiment!r:.80}")
        if self.source not in ("live", "reference"):
            raise ResultsError(f"source must be 'live' or 'reference', got {self.source!r:.80}")
        name = self.experiment                      # "" is an empty placeholder; validate() refuses to save it
        if not isinstance(self.params, dict):
            raise ResultsError(f"params of {name!r} must be an object, got {type(self.params).__name__}")
        if not isinstance(self.notes, list) or not all(isinstance(n, str) for n in self.notes):
            raise ResultsError(f"notes of {name!r} must be a list of strings")
        if not isinstance(self.provenance, dict):
            raise ResultsError(f"provenance of {name!r} must be an object, got {type(self.provenance).__name__}")
        if not isinstance(self.records, list):
            raise ResultsError(f"records of {name!r} must be a list")

    # ------------------------------------------------------------ recording
    def add(self, **record: Any) -> None:
        """Append one record (must name its ``device``)."""
        if "device" not in record:
            raise ResultsError(f"a record must say which device it was measured on: {record!r}")
        self.records.append(_plain(record))

    def add_timing(self, timing: Any, **params: Any) -> None:
        """Append a :class:`~course.measurement.Timing` with the parameters it was measured at."""
        self.add(**(timing.as_record() | params))

    def extend(self, other: ResultSet) -> None:
        self.records.extend(other.records)
        self.notes.extend(other.notes)

    # ------------------------------------------------------------ reading
    def select(self, **where: Any) -> list[dict]:
        """Records whose fields equal every given value."""
        return [r for r in self.records if all(r.get(k) == v for k, v in where.items())]

    def column(self, key: str, **where: Any) -> np.ndarray:
        return np.asarray([r.get(key) for r in self.select(**where)], dtype=float)

    def devices(self) -> list[str]:
        return sorted({r["device"] for r in self.records})

    @property
    def gpu_name(self) -> str | None:
        g = self.provenance.get("gpus") or []
        return g[0].get("name") if g else None

    @property
    def date(self) -> str:
        return str(self.provenance.get("date", ""))[:10]

    @property
    def cpu_name(self) -> str:
        return str(self.provenance.get("cpu", {}).get("model", "CPU"))

    @property
    def label(self) -> str:
        """``"recorded on NVIDIA H200, 2026-11-22"`` for a reference; the live device otherwise."""
        if self.source == "reference":
            return f"recorded on {self.gpu_name or self.cpu_name}, {self.date}"
        return f"measured live on {self.gpu_name or self.cpu_name}, {self.date}"

    # ------------------------------------------------------------ (de)serialising
    def to_dict(self) -> dict:
        """JSON-ready: plain types only, non-finite numbers written as "NaN"/"Infinity"/"-Infinity".

        A live GPU set whose provenance could not read PyTorch's TF32 switches (PyTorch was imported
        only after the set was made) reads them now, if PyTorch is imported by now, marked
        ``"tf32_read": "when the results were saved"``: provenance says what it knows, whatever the
        order of imports.  It never imports PyTorch itself."""
        self._read_torch_tf32_late()
        return {"schema": self.schema, "experiment": self.experiment, "params": _encode(self.params),
                "provenance": _encode(self.provenance), "notes": [str(n) for n in self.notes],
                "records": _encode(self.records)}

    def _read_torch_tf32_late(self) -> None:
        env = self.provenance.get("gpu_environment") if isinstance(self.provenance, dict) else None
        if self.source != "live" or not isinstance(env, dict) or "tf32" in env:
            return
        try:
            flags = torch_tf32_flags()                # None while PyTorch is not imported
        except Exception:
            flags = None
        if flags:
            env.update(tf32=flags, tf32_read="when the results were saved")

    @classmethod
    def from_dict(cls, d: dict, source: str = "live") -> ResultSet:
        """Build and validate a result set from :meth:`to_dict`'s form; :class:`ResultsError` if malformed."""
        if not isinstance(d, dict):
            raise ResultsError(f"a result set must be a JSON object, got {type(d).__name__}")
        d = _decode(d)
        rs = cls(experiment=d.get("experiment", ""), params=d.get("params", {}),
                 records=d.get("records", []), provenance=d.get("provenance", {}),
                 notes=d.get("notes", []), schema=d.get("schema", -1), source=source)
        rs.validate()
        rs.records, rs.notes = list(rs.records), list(rs.notes)
        return rs

    def validate(self) -> None:
        """Raise :class:`ResultsError` saying what is wrong (keys *and* types), or return None."""
        if self.schema != SCHEMA_VERSION:
            raise ResultsError(f"results schema {self.schema!r} is not {SCHEMA_VERSION}; "
                               "re-record them with this version of the course")
        if not isinstance(self.experiment, str) or not self.experiment:
            raise ResultsError("results have no experiment name")
        self._validate_fields()
        name, prov = self.experiment, self.provenance
        for key, kind in (("date", str), ("cpu", dict), ("libraries", dict), ("gpus", list)):
            if key not in prov:
                raise ResultsError(f"results for {name!r} lack provenance field {key!r}")
            if not isinstance(prov[key], kind):
                raise ResultsError(f"provenance field {key!r} of {name!r} must be a {kind.__name__}, "
                                   f"got {type(prov[key]).__name__}")
        if not all(isinstance(g, dict) for g in prov["gpus"]):
            raise ResultsError(f"provenance field 'gpus' of {name!r} must list objects")
        if not isinstance(self.records, list):
            raise ResultsError(f"records of {name!r} must be a list")
        for i, r in enumerate(self.records):
            if not isinstance(r, dict) or r.get("device") not in ("cpu", "gpu"):
                raise ResultsError(f"record {i} of {name!r} does not name its device ('cpu' or 'gpu'): {r!r}")
            if r["device"] == "gpu" and not prov["gpus"]:
                raise ResultsError(f"record {i} of {name!r} is a GPU record, but the "
                                   "provenance names no GPU")
            for k, v in r.items():  # times are numbers, lists of numbers (samples) or null; never text
                if k.endswith("_s") and v is not None and not (
                        _is_number(v) or (isinstance(v, list) and all(_is_number(x) for x in v))):
                    raise ResultsError(f"record {i} of {name!r}: {k} must be a number of seconds (or a list of "
                                       f"them), got {str(v)[:200]}")

    def incomplete_records(self) -> list[tuple[int, str]]:
        """``(index, what is wrong)`` for each record a figure could not read.  Three rules:

        * NaN or an infinity anywhere in it (a number or inside a list) is no measurement: a record holding
          one is left out, whatever field it is in;
        * a field its *peers* have (at least half of them, or the one there is) that it lacks, or where they
          hold a number, a list or text and it holds something else (None, a number for a list);
        * a field that every other record holding it holds as a number, a list or text, and it holds as
          something else;
        * None in a field of :data:`NOT_READ_FIELDS` (how a timing was taken: a peer library's timing leaves
          the thread count and the load unread) is not damage;
        * its peers: the other records with the same text fields (device, method, op, ...), else the records
          of its device with text in the same fields (then only a field every one of them has counts, and
          at most two may be missing: a record of another kind lacks many).

        A record of a kind the file holds once, missing a field no other record has, cannot be judged
        here: only its figure knows it needs that field.

        :func:`load_reference` leaves these records out, with a note.

        >>> rs = ResultSet("demo")
        >>> for n in (1, 2, 3):
        ...     rs.add(device="gpu", n=n, median_s=0.1 * n)
        >>> rs.records[1].pop("median_s")
        0.2
        >>> rs.records[2]["n"] = float("nan")
        >>> rs.incomplete_records()
        [(1, "lacks 'median_s'"), (2, "has nan in 'n'")]
        """
        bad = []
        for i, r in enumerate(self.records):
            nonfinite = next((k for k, v in r.items() if not _finite_or_not_number(v)), None)
            if nonfinite is not None:
                bad.append((i, f"has {r[nonfinite]!r} in {nonfinite!r}"))
                continue
            why = _unlike_peers(r, self._peers(i, r)) or self._unlike_the_rest(i, r)
            if why:
                bad.append((i, why))
        return bad

    def _unlike_the_rest(self, i: int, r: dict) -> str:
        """A field that every other record holding it (two or more) holds as a number, a list or text, and
        this one holds as something else (None, a number for text): what a record of any kind lacks."""
        for k, v in r.items():
            if v is None and k in NOT_READ_FIELDS:
                continue
            kinds = {_kind(s[k]) for j, s in enumerate(self.records) if j != i and k in s}
            count = sum(k in s for j, s in enumerate(self.records) if j != i)
            if count >= 2 and len(kinds) == 1 and _kind(v) not in kinds and kinds <= {"number", "list", "text"}:
                return f"has {v!r} in {k!r}"
        return ""

    def _peers(self, i: int, r: dict) -> tuple[list[dict], int]:
        """The records to judge record ``i`` by, and how many fields it may lack (0: any number)."""
        text = {k: v for k, v in r.items() if isinstance(v, str)}
        peers = [s for j, s in enumerate(self.records) if j != i and all(s.get(k) == v for k, v in text.items())]
        if peers:
            return peers, 0
        keys = set(text)                  # none alike: the records of its device with text in the same fields
        return [s for j, s in enumerate(self.records) if j != i and s.get("device") == r.get("device")
                and {k for k, v in s.items() if isinstance(v, str)} == keys], 2

    def save(self, path: str | os.PathLike) -> Path:
        """Write JSON atomically (a temporary file, then a rename): never half-written."""
        self.validate()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=1, sort_keys=False, allow_nan=False)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        try:
            os.fchmod(fd, shared_file_mode())
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, source: str = "live") -> ResultSet:
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ResultsError(f"no results file at {path}") from None
        except UnicodeDecodeError as exc:
            raise ResultsError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path} is not valid JSON ({exc})") from None
        except OSError as exc:  # a directory, no permission, ...
            raise ResultsError(f"{path} cannot be read ({type(exc).__name__}: {exc.strerror or exc})") from None
        if not isinstance(d, dict):
            raise ResultsError(f"{path} does not hold a result set")
        try:
            return cls.from_dict(d, source=source)
        except ResultsError as exc:
            raise ResultsError(f"{path.name}: {exc}") from None


def validate_results(rs: object, what: str = "results") -> ResultSet:
    """``rs`` if it is a :class:`ResultSet`; else a :class:`~course.errors.BadInputError` naming ``what``."""
    if not isinstance(rs, ResultSet):
        raise BadInputError(f"{what} must be a course.results.ResultSet (what a sweep returns, or "
                            f"load_reference(name)), got {type(rs).__name__} {rs!r:.60}")
    return rs


def validate_references(sets: object, what: str = "references", none: bool = False) -> list[ResultSet]:
    """``sets`` as a list of :class:`ResultSet` (a list, tuple or generator of them; one alone is refused);
    ``none=True`` lets None stand among them (a live set that is not there)."""
    if isinstance(sets, (str, bytes, dict, ResultSet, np.ndarray)) or not isinstance(sets, Iterable):
        raise BadInputError(f"{what} must be a list of course.results.ResultSet (load_reference(name) gives one), "
                            f"got {type(sets).__name__} {sets!r:.60}")
    sets = list(sets)
    bad = [s for s in sets if not isinstance(s, ResultSet) and not (none and s is None)]
    if bad:
        raise BadInputError(f"{what} must hold only course.results.ResultSet, got a {type(bad[0]).__name__} among "
                            "them")
    return sets


_EXPERIMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _validate_experiment(name: object) -> str:
    if not isinstance(name, str) or not _EXPERIMENT.fullmatch(name):
        raise BadInputError(f"experiment must be an experiment's name (letters, digits and _, such as "
                            f"'matmul_sweep'), got {name!r:.60}")
    return name


def _validate_directory(directory: object) -> Path:
    if not isinstance(directory, (str, os.PathLike)) or not str(directory).strip():
        raise BadInputError(f"directory must be a folder's path (a str or Path) or None for course/reference/, "
                            f"got {type(directory).__name__} {directory!r:.60}")
    return Path(directory)


@arguments(experiment=Given(_validate_experiment), directory=Optional(Given(_validate_directory)))
def load_reference(experiment: str, directory: str | os.PathLike | None = None) -> list[ResultSet]:
    """Reference result sets recorded on real GPUs for ``experiment`` (maybe none).

    Files are ``<directory>/<experiment>__<gpu>.json``; a malformed file is
    skipped with a warning rather than breaking a lesson, and so are the records of a file that lack
    a field or a number their peers have, or hold NaN (:meth:`ResultSet.incomplete_records`): they are
    left out, with a note in the set's ``notes`` saying which and why.
    """
    directory = Path(directory) if directory is not None else REFERENCE_DIR
    out = []
    for p in sorted(directory.glob(f"{experiment}__*.json")):
        try:
            rs = ResultSet.load(p, source="reference")
        except ResultsError as exc:
            import warnings

            warnings.warn(f"skipping a reference file: {exc}", stacklevel=3)   # the caller, past the door
            continue
        if rs.experiment != experiment:
            continue
        bad = rs.incomplete_records()
        if bad:
            listed = "; ".join(f"record {i} {why}" for i, why in bad[:3]) + ("; ..." if len(bad) > 3 else "")
            rs.notes.append(f"{len(bad)} record(s) of the reference {rs.label} left out of its figures "
                            f"({p.name}: {listed})")
            drop = {i for i, _ in bad}
            rs.records = [r for i, r in enumerate(rs.records) if i not in drop]
        out.append(rs)
    return out


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in s).strip("-").lower() or "gpu"


@arguments(rs=Given(validate_results, what="rs"), directory=Optional(Given(_validate_directory)))
def save_reference(rs: ResultSet, directory: str | os.PathLike | None = None) -> Path:
    """Store ``rs`` as a reference result in ``course/reference/``.

    Refuses unless a GPU answers in this process, ``rs`` holds GPU records and its
    provenance names that GPU: references come only from real GPU runs.  An earlier
    reference of the same experiment and GPU moves to ``reference/archive/``, dated.
    """
    if not gpu_available():
        raise ResultsError("reference results can only be recorded on a machine where a GPU answers")
    directory = Path(directory) if directory is not None else REFERENCE_DIR
    if standin_active() and directory.resolve() == REFERENCE_DIR.resolve():
        raise ResultsError("the stand-in GPU (COURSE_STANDIN_GPU=1) is NumPy on the CPU: its results are never "
                           "stored among the references lessons show; give another directory to rehearse the saving")
    if not rs.select(device="gpu"):
        raise ResultsError(f"{rs.experiment!r} has no GPU records; nothing to record as a reference")
    live = {g["name"] for g in gpu_info()}
    if rs.gpu_name not in live:
        raise ResultsError(f"{rs.experiment!r} names GPU {rs.gpu_name!r}, which is not this machine's")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{rs.experiment}__{_slug(rs.gpu_name)}.json"
    if path.is_file():  # keep the earlier recording, dated, where lessons don't load it
        try:
            old_date = ResultSet.load(path).date or "undated"
        except ResultsError:
            old_date = "unreadable"
        archive = directory / "archive"
        archive.mkdir(parents=True, exist_ok=True)
        os.replace(path, archive / f"{path.stem}__{old_date}.json")
    return rs.save(path)


def merge(sets: Iterable[ResultSet]) -> list[dict]:
    """All result sets as one JSON-ready list (for a report's results.json)."""
    return [s.to_dict() | {"source": s.source} for s in sets]
