"""The α–β model of communication, fitted to this machine's measurements and extrapolated.

Sending a message of b bytes costs about ``α + b·β``: a fixed latency α (seconds) plus the bytes
over the bandwidth (β = seconds per byte = 1 / bandwidth).  An all-reduce of N bytes on p workers
then costs, for its busiest worker:

* ring: ``2 (p - 1)`` steps, each moving N/p bytes:   ``2 (p - 1) α + 2 (p - 1) / p · N β``;
* naive: the root receives p - 1 vectors, then sends p - 1: ``2 (p - 1) α + 2 (p - 1) · N β``.

For large N the β term dominates: the ring's stays below ``2 N β`` whatever p is, the naive one
grows linearly with p.  For small N the α term dominates, and there the ring pays ``2 (p - 1)``
latencies (a tree would pay ``2 log2 p``): this is why libraries switch algorithm by message size.

:func:`course.parallel.timing.fit_alpha_beta` fits α and β to measured times (least squares on
*relative* errors, both non-negative).  :data:`INTERCONNECTS` holds bandwidths from public data sheets,
labelled as such, for the extrapolation to 8 and 1,024 workers, which is a *model*, not a measurement; each link only
as far as it reaches (NVLink joins 8 GPUs in one HGX server, up to 256 through NVLink switches).

>>> round(model_time("ring", 8, 1e9, alpha=0.0, beta=1e-9), 3)
1.75
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..arguments import Given, Real, arguments
from ..errors import BadInputError
from .collectives import validate_workers

__all__ = ["Interconnect", "INTERCONNECTS", "AlphaBeta", "validate_fit", "validate_model_algorithm", "model_terms",
           "model_time"]


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


def validate_model_algorithm(algorithm: Any) -> str:
    """``"ring"`` or ``"naive"``, or a clear error; a timing's label (``"ring (course)"``) names its algorithm
    first."""
    for kind in ("ring", "naive"):
        if isinstance(algorithm, str) and algorithm.startswith(kind):
            return kind
    raise BadInputError(f"the α–β model here covers 'ring' and 'naive'; got {algorithm!r}.")


@arguments(algorithm=Given(validate_model_algorithm), p=Given(validate_workers), nbytes=Real(lo=0, hint="bytes"))
def model_terms(algorithm: str, p: int, nbytes: float) -> tuple[float, float]:
    """``(latencies, bytes)`` the busiest worker pays: the time is ``latencies·α + bytes·β``.

    >>> model_terms("ring", 4, 1000), model_terms("naive", 4, 1000)
    ((6, 1500.0), (6, 6000.0))
    """
    if algorithm == "ring":
        return 2 * (p - 1), 2 * (p - 1) / p * nbytes
    return 2 * (p - 1), 2 * (p - 1) * nbytes


@arguments(alpha=Real(lo=0, hint="seconds per message: a latency"),
           beta=Real(lo=0, hint="seconds per byte = 1 / bandwidth"))
def model_time(algorithm: str, p: int, nbytes: float, alpha: float, beta: float) -> float:
    """Seconds the α–β model predicts for one all-reduce of ``nbytes`` on ``p`` workers.

    ``alpha`` (seconds per message) and ``beta`` (seconds per byte) must be finite and >= 0.
    """
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


def validate_fit(fit: Any) -> AlphaBeta:
    """``fit`` if it is an :class:`AlphaBeta` (what :func:`course.parallel.timing.fit_alpha_beta` returns), or a
    clear error."""
    if not isinstance(fit, AlphaBeta):
        raise BadInputError(f"fit must be an AlphaBeta, what course.parallel.fit_alpha_beta(rs) returns; got "
                            f"{type(fit).__name__}")
    return fit
