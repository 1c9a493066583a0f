"""Lesson 04: the decoupled look-back protocol (Merrill & Garland, 2016) in plain Python, launch after launch.

:mod:`course.scan.singlepass` scans a whole array in one GPU launch: tiles of it run at once, and each
tile learns what comes before it by reading the status words the tiles before it publish (flag
``A``: that tile's aggregate; ``P``: the inclusive prefix up to it; ``X``: nothing yet).  Here the
same protocol runs tile by tile in a random interleaving, so it can be read, traced and tested
without a GPU -- and launch after launch on one device state, as the kernel runs: the status words
are never cleared, the tile ticket, the finished count and the epoch live on the device, and the
last tile of each launch resets them for the next one.

>>> out, stats = lookback_model(np.arange(1, 11), tile=3, seed=0)
>>> out.tolist()
[1, 3, 6, 10, 15, 21, 28, 36, 45, 55]
>>> stats["tiles"], stats["state"]
(4, (0, 0, 1))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Optional, Seed, Whole, arguments
from ..errors import BadInputError, random_generator, whole_number
from ..limits import require_fits

__all__ = ["FLAG_NAMES", "EPOCHS", "RESIDENT", "MAX_TILES", "lookback_model", "lookback_launches"]

#: The tile states: not yet published, aggregate of the tile alone, inclusive prefix.
FLAG_NAMES = {0: "X", 1: "A", 2: "P"}
#: The epoch counts launches modulo 2^30: it shares a status word's high 32 bits with a 2-bit flag.
EPOCHS = 2**30
#: Tiles running at once, at most: a GPU holds a bounded number of blocks on its SMs (an H100's 132 SMs hold
#: one or two of the kernel's 256-thread tiles each), and a tile starts only when one has finished.  It also
#: keeps each look-back short, so a model run takes time in proportion to its tiles.
RESIDENT = 128
#: The most tiles one call models: each is a Python generator stepped one statement at a time (about 10 µs a
#: tile), so a million elements in tiles of 4 would take many seconds; larger arrays are what
#: :func:`course.scan.singlepass.single_pass_scan` and the blocked scans are for.
MAX_TILES = 2**16


@arguments(tile=Whole(hint="elements per tile"), window=Whole(hint="predecessor flags read at once (a warp: 32)"),
           seed=Optional(Seed()))
def lookback_model(x: Any, tile: int = 4, window: int = 1, seed: int | None = 0) -> tuple[np.ndarray, dict]:
    """Inclusive sum of ``x`` by the decoupled look-back protocol, tiles interleaved at random.

    One launch of :func:`lookback_launches` on a fresh device state.

    Parameters
    ----------
    x : 1-D array of numbers.
    tile : elements per tile (the kernel's: 256 threads x 16 items, :mod:`course.scan.singlepass`).
    window : predecessors read at once (the kernel's warp reads 32).
    seed : the random interleaving (``None``: tiles run one after the other, no waiting).

    At most :data:`RESIDENT` tiles run at once, as on a GPU, and one call models at most :data:`MAX_TILES`
    tiles (a larger array is refused with the tile size to use instead).

    Returns
    -------
    (out, stats): the inclusive scan, and the launch's statistics (see :func:`lookback_launches`).
    """
    outs, stats = lookback_launches([x], tile=tile, window=window, seed=seed)
    return outs[0], stats[0]


def lookback_launches(xs: Any, tile: int = 4, window: int = 1, seed: int | None = 0,
                      epochs: int = EPOCHS) -> tuple[list[np.ndarray], list[dict]]:
    """Scan each array of ``xs`` in turn, launch after launch on ONE device state, as the kernel does.

    The device state is what the kernel keeps between launches: one status word (epoch, flag,
    value) per tile, not cleared between launches, and three counters -- the tile ticket, the tiles finished and
    the epoch.  Nothing on the host resets them.  Each tile is a Python generator that pauses
    where a GPU tile may be overtaken (after taking its ticket, after every read of other tiles'
    flags, before counting itself finished), so a random scheduler can run the tiles in any
    interleaving a GPU might: a tile that finds ``X`` (nothing published *in this epoch*) pauses
    and reads again later.  Tiles *start* in order (the ticket) but run, publish and finish in
    any order; the tile that finishes last resets the ticket and the count and advances the
    epoch, and clears every status word when the epoch wraps to 0.

    Parameters
    ----------
    xs : 1-D arrays of numbers, one per launch (an empty one is not launched, as on the GPU).
    tile : elements per tile.
    window : predecessors read at once (the kernel's warp reads 32).
    seed : the random interleaving (``None``: tiles run one after the other, no waiting).
    epochs : the epoch counts launches modulo this (the kernel's :data:`EPOCHS`; small to see a wrap).

    Returns
    -------
    (outs, stats): the inclusive scan of each array, and per launch ``tiles``, ``flag_reads`` (flags
    read in all), ``waits`` (reads that found ``X``), ``longest_lookback`` (most tiles one look-back
    passed), ``epoch`` (the launch's) and ``state`` (ticket, finished, epoch) after it.

    >>> outs, stats = lookback_launches([np.ones(9, int), np.ones(2, int)], tile=2)
    >>> [o.tolist()[-1] for o in outs], [s["state"] for s in stats]
    ([9, 2], [(0, 0, 1), (0, 0, 2)])
    """
    xs, tile, window, epochs = _validate_launches(xs, tile, window, epochs, seed)
    device = {"counter": 0, "finished": 0, "epoch": 0,
              "status": [(0, 0)] * max([-(-x.size // tile) for x in xs] + [1])}   # allocated once
    rng = None if seed is None else np.random.default_rng(seed)
    outs, stats = [], []
    for x in xs:
        out, st = np.empty_like(x), {"tiles": -(-x.size // tile), "flag_reads": 0, "waits": 0,
                                     "longest_lookback": 0, "epoch": device["epoch"]}
        if x.size:
            _run_launch(x, tile, window, rng, device, epochs, out, st)
        st["state"] = (device["counter"], device["finished"], device["epoch"])
        outs.append(out)
        stats.append(st)
    return outs, stats


def _run_launch(x, tile, window, rng, device, epochs, out, stats) -> None:
    """One launch: start tiles in ticket order, step them in a random interleaving until all finish."""
    tiles = stats["tiles"]
    status = device["status"]

    def run():
        b = device["counter"]                                            # atomicAdd(counter, 1)
        device["counter"] += 1
        epoch = device["epoch"]                                          # read once, at the start
        yield
        part = np.cumsum(x[b * tile:(b + 1) * tile], dtype=x.dtype)
        aggregate = part[-1]
        status[b] = (epoch * 4 + (2 if b == 0 else 1), aggregate)       # publish at once
        exclusive, k = x.dtype.type(0), b - 1
        while k >= 0:                                                    # look back
            seen = list(range(k, max(k - window, -1), -1))
            yield                                                        # the reads take time
            stats["flag_reads"] += len(seen)
            flags = [tag & 3 if tag >> 2 == epoch else 0 for tag, _ in (status[j] for j in seen)]
            if 0 in flags:                                               # X: another epoch's word, or none
                stats["waits"] += 1
                continue                                                 # read the window again
            nearest = flags.index(2) if 2 in flags else len(seen) - 1
            for j in seen[:nearest + 1]:
                exclusive = exclusive + status[j][1]
            if flags[nearest] == 2:
                k = seen[nearest]
                break
            k -= window
        stats["longest_lookback"] = max(stats["longest_lookback"], b - max(k, 0))
        if b:
            status[b] = (epoch * 4 + 2, exclusive + aggregate)
        out[b * tile:(b + 1) * tile] = part + exclusive
        yield                                                            # other tiles may finish first
        done = device["finished"]                                        # atomicAdd(finished, 1)
        device["finished"] += 1
        if done == tiles - 1:                                            # the last tile of the launch
            if len(running) != 1 or started != tiles:
                raise RuntimeError("the last tile reset the state while another tile was still running")
            device.update(counter=0, finished=0, epoch=(epoch + 1) % epochs)
            if device["epoch"] == 0:                                     # the wrap: no stale tag may alias
                status[:] = [(0, 0)] * len(status)

    running: list[tuple[int, Any]] = []
    started = 0
    while started < tiles or running:
        if started < tiles and len(running) < RESIDENT and (rng is None or not running or rng.random() < 0.5):
            running.append((started, run()))                             # the hardware starts a block
            started += 1
        pick = 0 if rng is None else int(rng.integers(len(running)))
        try:
            next(running[pick][1])
        except StopIteration:
            running.pop(pick)


def _validate_launches(xs: Any, tile: int, window: int, epochs: int,
                       seed: Any) -> tuple[list[np.ndarray], int, int, int]:
    xs = [np.asarray(x) for x in ([xs] if isinstance(xs, np.ndarray) else xs)]
    bad = next((x.shape for x in xs if x.ndim != 1), None)
    if bad is not None:
        raise BadInputError(f"lookback_model scans 1-D arrays, got shape {bad}; flatten it with x.ravel().")
    if seed is not None:
        random_generator(seed)
    tile = whole_number("tile", tile, hint="elements per tile")
    tiles = sum(-(-x.size // tile) for x in xs)
    if tiles > MAX_TILES:
        raise BadInputError(f"{tiles:,} tiles is more than the {MAX_TILES:,} this Python model steps through in a "
                            f"few seconds; use a larger tile (tile={-(-sum(x.size for x in xs) // MAX_TILES):,} or "
                            "more) or a shorter array. A large scan is single_pass_scan's or blocked_scan's job.")
    require_fits(sum(x.size * x.dtype.itemsize for x in xs) + 2 * max([min(x.size, tile) * x.dtype.itemsize
                                                                       for x in xs] + [0]),
                 "cpu", what=f"the look-back model's outputs for {sum(x.size for x in xs):,} elements")
    return (xs, tile, whole_number("window", window, hint="predecessor flags read at once (the kernel's warp: 32)"),
            whole_number("epochs", epochs, 2, EPOCHS, hint="launches the epoch counts before it wraps"))

