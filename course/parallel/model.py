"""The α–β model of communication, fitted to this machine's measurements and extrapolated.

Sending a message of b bytes costs about ``α + b·β``: a fixed latency α (seconds) plus the bytes
over the bandwidth (β = seconds per byte = 1 / bandwidth).  An all-reduce of N bytes on p workers
then costs, for its busiest worker:

* ring: ``2 (p - 1)`` steps, each moving N/p bytes:   ``2 (p - 1) α + 2 (p - 1) / p · N β``;
* naive: the root receives p - 1 vectors, then sends p - 1: ``2 (p - 1) α + 2 (p - 1) · N β``.

For large N the β term dominates: the ring's stays below ``2 N β`` whatever p is, the naive one
grows linearly with p.  For small N the α term dominates, and there the ring pays ``2 (p - 1)``
latencies (a tree would pay ``2 log2 p``): this is why libraries switch algorithm by message size.

:func:`fit_alpha_beta` fits α and β to measured times (least squares on *relative* errors, both
non-negative).  :data:`INTERCONNECTS` holds bandwidths from public data sheets, labelled as such,
for the extrapolation to 8 and 1,024 workers, which is a *model*, not a measurement; each link only
as far as it reaches (NVLink joins 8 GPUs in one HGX server, up to 256 through NVLink switches).

>>> round(model_time("ring", 8, 1e9, alpha=0.0, beta=1e-9), 3)
1.75
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import BadInputError
from ..results import ResultSet
from .collectives import validate_workers

__all__ = ["Interconnect", "INTERCONNECTS", "AlphaBeta", "model_terms", "model_time", "fit_alpha_beta"]


@dataclass(frozen=True)
class Interconnect:
    """A link's bandwidth per direction, from a data sheet (not measured here), and the most workers
    it joins (``max_workers``, None: a switched network of any size)."""

    name: str
    bytes_per_s: float
    source: str
    max_workers: int | None = None
    reach: str = ""

    @property
    def label(self) -> str:
        reach = f"; {self.reach}" if self.reach else ""
        return f"{self.name}: {self.bytes_per_s / 1e9:g} GB/s per direction (data sheet: {self.source}{reach})"


#: Bandwidths from public data sheets (per direction), for the model's extrapolation only.
INTERCONNECTS = (
    Interconnect("NVLink 4 (H100 SXM)", 450e9,
                 "NVIDIA H100 Tensor Core GPU datasheet, NVLink 900 GB/s total, i.e. 450 GB/s each way",
                 max_workers=256, reach="8 GPUs per HGX server, up to 256 through the NVLink Switch System"),
    Interconnect("InfiniBand NDR", 50e9,
                 "NVIDIA ConnectX-7 / Quantum-2 datasheets, 400 Gb/s per port = 50 GB/s each way"),
)


def model_terms(algorithm: str, p: int, nbytes: float) -> tuple[float, float]:
    """``(latencies, bytes)`` the busiest worker pays: the time is ``latencies·α + bytes·β``.

    >>> model_terms("ring", 4, 1000), model_terms("naive", 4, 1000)
    ((6, 1500.0), (6, 6000.0))
    """
    p = validate_workers(p)
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real) or not 0 <= nbytes < math.inf:
        raise BadInputError(f"nbytes must be a number of bytes >= 0, got {nbytes!r}")
    if not isinstance(algorithm, str):
        raise BadInputError(f"algorithm must be 'ring' or 'naive', got {algorithm!r}")
    if algorithm.startswith("ring"):
        return 2 * (p - 1), 2 * (p - 1) / p * nbytes
    if algorithm.startswith("naive"):
        return 2 * (p - 1), 2 * (p - 1) * float(nbytes)
    raise BadInputError(f"the α–β model here covers 'ring' and 'naive'; got {algorithm!r}.")


def model_time(algorithm: str, p: int, nbytes: float, alpha: float, beta: float) -> float:
    """Seconds the α–β model predicts for one all-reduce of ``nbytes`` on ``p`` workers.

    ``alpha`` (seconds per message) and ``beta`` (seconds per byte) must be finite and >= 0.
    """
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 <= v < math.inf:
            raise BadInputError(f"{name} must be a finite number of seconds >= 0 (a latency, or seconds per "
                                f"byte = 1 / bandwidth), got {v!r}")
    lat, b = model_terms(algorithm, p, nbytes)
    return lat * alpha + b * beta


@dataclass
class AlphaBeta:
    """A fitted α (s) and β (s/byte), with the records they were fitted to."""

    alpha: float
    beta: float
    n_points: int
    rel_rms: float                 # how far the measurements sit from the model, relative
    ps: tuple = ()                 # the rank counts fitted to

    @property
    def bandwidth(self) -> float:
        """1 / β in bytes per second (inf when β is 0)."""
        return 1.0 / self.beta if self.beta > 0 else float("inf")

    def predict(self, algorithm: str, p: int, nbytes: float) -> float:
        return model_time(algorithm, p, nbytes, self.alpha, self.beta)

    def __str__(self) -> str:
        return (f"α = {self.alpha * 1e6:.3g} µs, β = {self.beta * 1e9:.3g} ns/byte "
                f"(bandwidth {self.bandwidth / 1e9:.3g} GB/s), fitted to {self.n_points} timings"
                f"{' at p = ' + ', '.join(map(str, self.ps)) if self.ps else ''}; "
                f"typical distance from the model {100 * self.rel_rms:.0f} %")


def _nonnegative_lstsq(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ||a·c − y|| over c >= 0, for two columns: the plain least-squares answer when it is
    non-negative, else the better of the two one-column fits (the optimum then lies on an edge)."""
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    if (coef >= 0).all():
        return coef
    best, best_res = np.zeros(2), float(y @ y)
    for k in range(2):
        col = a[:, k]
        c = max(float(col @ y) / float(col @ col), 0.0) if col @ col > 0 else 0.0
        res = float(np.sum((y - c * col) ** 2))
        if res < best_res:
            best, best_res = np.eye(2)[k] * c, res
    return best


def fit_alpha_beta(rs: ResultSet, algorithms: Sequence[str] = ("ring (course)", "naive (course)"),
                   ps: Sequence[int] | None = None) -> AlphaBeta:
    """Fit one α and one β to the timings of the given algorithms in ``rs`` (every size).

    ``ps``: the rank counts to fit to; by default those that were not oversubscribed (a rank that
    waits for a core is not the link's latency), or every p when all were.  Minimises the squared
    *relative* error (times span several decades), with α, β >= 0.
    """
    if ps is None:
        fair = {r["p"] for r in rs.records if r.get("algorithm") in algorithms and not r.get("oversubscribed")}
        ps = fair or {r.get("p") for r in rs.records}
    rows, times = [], []
    for r in rs.records:
        if r.get("algorithm") in algorithms and r.get("p") in ps:
            lat, b = model_terms(r["algorithm"].split()[0], r["p"], r["nbytes"])
            rows.append((lat, b))
            times.append(r["median_s"])
    if len(rows) < 2:
        raise BadInputError(f"fitting α and β needs at least two timings of {list(algorithms)}; "
                            f"the result set has {len(rows)}.")
    a = np.array(rows, dtype=float)
    t = np.array(times, dtype=float)
    scale = np.array([1e-6, 1e-9])                 # work in µs and ns/byte: a well-scaled system
    alpha, beta = _nonnegative_lstsq(a * scale / t[:, None], np.ones_like(t)) * scale
    pred = a @ np.array([alpha, beta])
    rel = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return AlphaBeta(float(alpha), float(beta), len(t), rel, tuple(sorted(ps)))
