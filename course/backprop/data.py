"""Small real datasets that ship with a dependency: nothing is downloaded at run time.

:func:`load_digits` gives the 1,797 handwritten digits (8×8 grey images, 10
classes) that come inside scikit-learn, split into train and test sets the same
way every time, with each pixel standardised by the *training* set's mean and
standard deviation, already on the device you ask for.

>>> d = load_digits()
>>> d.x_train.shape, d.x_test.shape, d.n_classes
((1347, 64), (450, 64), 10)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arguments import Seed, Whole, arguments
from ..devices import normalize_device, to_device
from ..errors import BadInputError, whole_number
from .validate import require_order_fits, validate_digits

__all__ = ["Dataset", "load_digits", "batches"]


@dataclass
class Dataset:
    """Train and test arrays on one device, plus what is needed to read them.

    Attributes
    ----------
    x_train, y_train, x_test, y_test : features (float) and integer labels, on ``device``.
    n_classes : how many classes.  name, device, dtype : what they are and where.
    images_test : the raw test images (host numpy, ``(n, 8, 8)``) for pictures.
    mean, std : the training set's per-feature statistics used to standardise (host numpy).
    """

    name: str
    x_train: Any
    y_train: Any
    x_test: Any
    y_test: Any
    n_classes: int
    device: str
    dtype: str
    images_test: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    def __post_init__(self) -> None:
        self.n_classes = whole_number("n_classes", self.n_classes, lo=2, hint="the classes the labels name")
        self.device = normalize_device(self.device)
        for part in ("train", "test"):
            x, y = getattr(self, f"x_{part}"), getattr(self, f"y_{part}")
            if len(getattr(x, "shape", ())) != 2 or tuple(getattr(y, "shape", ())) != (x.shape[0],):
                raise BadInputError(f"x_{part} must be a 2-D array of features and y_{part} one label per row, "
                                    f"got shapes {getattr(x, 'shape', None)} and {getattr(y, 'shape', None)}")

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])

    def __repr__(self) -> str:
        return (f"Dataset({self.name}: {self.x_train.shape[0]} train / {self.x_test.shape[0]} test, "
                f"{self.n_features} features, {self.n_classes} classes, {self.dtype} on {self.device})")


def load_digits(device: Any = "cpu", dtype: Any = "float32", test_fraction: float = 0.25,
                seed: int = 0) -> Dataset:
    """The 8×8 handwritten digits from scikit-learn, split, standardised and on ``device``.

    Parameters
    ----------
    device : ``"cpu"`` or ``"gpu"`` (the arrays are copied there once, explicitly).
    dtype : feature dtype (labels are int64).
    test_fraction : share of the images held out for testing, stratified by class.
    seed : the split is a function of the seed alone.
    """
    dev, dt = validate_digits(device, dtype, test_fraction)
    try:
        from sklearn.datasets import load_digits as _sk_digits
    except ImportError:  # pragma: no cover - scikit-learn is a dependency of the course
        raise BadInputError("the digits come with scikit-learn: pip install scikit-learn") from None
    raw = _sk_digits()
    x = raw.data.astype(np.float64)
    y = raw.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    test_idx = []
    for c in np.unique(y):                       # stratified: each class split in proportion
        idx = np.flatnonzero(y == c)
        rng.shuffle(idx)
        test_idx.append(idx[: int(round(test_fraction * len(idx)))])
    test = np.zeros(len(y), dtype=bool)
    test[np.concatenate(test_idx)] = True
    train_idx = rng.permutation(np.flatnonzero(~test))
    test_idx = np.flatnonzero(test)
    mean = x[train_idx].mean(axis=0)
    std = x[train_idx].std(axis=0)
    std[std == 0] = 1.0                          # pixels that are always blank stay at 0
    xs = (x - mean) / std
    return Dataset(
        name="digits", n_classes=10, device=dev, dtype=dt.name,
        x_train=to_device(xs[train_idx].astype(dt), dev), y_train=to_device(y[train_idx], dev),
        x_test=to_device(xs[test_idx].astype(dt), dev), y_test=to_device(y[test_idx], dev),
        images_test=raw.images[test_idx], mean=mean, std=std)


@arguments(n=Whole(lo=0, hint="the number of examples to cover"),
           batch_size=Whole(hint="the examples in one step, e.g. 64"), seed=Seed(), then=require_order_fits)
def batches(n: int, batch_size: int, seed: int | np.random.Generator = 0,
            shuffle: bool = True) -> Iterator[np.ndarray]:
    """Index arrays (host numpy) that cover ``range(n)`` in batches of ``batch_size`` (last one smaller),
    shuffled by ``seed`` (a whole number, or a numpy ``Generator`` that goes on from epoch to epoch)."""
    order = seed.permutation(n) if shuffle else np.arange(n)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]
