"""Lessons 01 and 05's doors (issue 49's debt): the inputs that gave a silently wrong answer, or a traceback far from
the call, are refused at the door with a course error naming the argument; the valid calls answer as before."""

from __future__ import annotations

import numpy as np
import pytest

from course.backprop.bench import checkpoint_sweep
from course.backprop.data import Dataset
from course.backprop.gradcheck import rel_error
from course.backprop.layers import mse, mse_backward, softmax_cross_entropy, softmax_cross_entropy_backward
from course.backprop.step_kernels import REFERENCE
from course.backprop.timing import step_time_sweep
from course.bppsa.algorithm import bppsa_operator, inplace_scan
from course.errors import BadInputError


def test_rel_error_refuses_two_shapes_numpy_would_broadcast():
    a = np.array([1.0, 2.0, 3.0])
    assert rel_error(a, a.copy()) == 0.0
    with pytest.raises(BadInputError, match="same shape"):      # was a (3, 3) difference: a wrong error, no word
        rel_error(a, a[:, None])


def test_a_loss_backward_refuses_what_is_not_its_cache():
    loss, cache = softmax_cross_entropy(np.zeros((2, 3)), np.array([0, 2]))
    assert softmax_cross_entropy_backward(cache).shape == (2, 3)
    assert mse_backward(mse(np.ones(4), np.zeros(4))[1]).shape == (4,)
    with pytest.raises(BadInputError, match="cache"):
        softmax_cross_entropy_backward(np.zeros((2, 3)))
    with pytest.raises(BadInputError, match="cache"):
        softmax_cross_entropy_backward((np.zeros((2, 3)), np.array([0, 1, 2])))   # a label per row, not three
    with pytest.raises(BadInputError, match="cache"):
        mse_backward(np.ones(4))


def test_a_kernels_numpy_version_refuses_a_bias_it_would_broadcast():
    h = np.ones((3, 4), np.float32)
    REFERENCE["bias_relu"](h, np.full(4, -2.0, np.float32))
    assert (h == 0).all()
    with pytest.raises(BadInputError, match="b must be an array of shape"):
        REFERENCE["bias_relu"](np.ones((3, 4), np.float32), np.ones((3, 1), np.float32))   # was one bias per row
    with pytest.raises(BadInputError, match="db"):
        REFERENCE["mask_bias_grad"](np.ones((3, 4)), np.ones((3, 4)), np.zeros(3))
    with pytest.raises(BadInputError, match="g must be"):
        REFERENCE["sgd_flat"](np.ones(8, np.float32), np.ones(1, np.float32), 0.1)


def test_checkpoint_sweep_refuses_ks_with_none_the_network_has():
    with pytest.raises(BadInputError, match="ks must hold at least one k from 1 to 3"):   # was an IndexError
        checkpoint_sweep(depth=2, width=4, batch=2, ks=[50], repeat=1)


def test_the_step_sweep_records_the_dtype_by_its_name_however_it_was_given():
    rs = step_time_sweep(widths=(8,), depth=1, batch=4, n_in=6, n_out=3, dtype=np.float64, devices=["cpu"],
                         repeat=1, budget_s=0.05)
    assert rs.params["dtype"] == "float64" and {r["dtype"] for r in rs.records} == {"float64"}   # was "<class ...>"


def test_a_dataset_refuses_labels_that_do_not_match_its_rows():
    x, y = np.zeros((4, 2), np.float32), np.zeros(4, np.int64)
    parts = dict(name="d", n_classes=2, device="cpu", dtype="float32", images_test=np.zeros((4, 1, 2)),
                 mean=np.zeros(2), std=np.ones(2))
    assert Dataset(x_train=x, y_train=y, x_test=x, y_test=y, **parts).n_features == 2
    with pytest.raises(BadInputError, match="y_test one label per row"):
        Dataset(x_train=x, y_train=y, x_test=x, y_test=y[:3], **parts)


def test_the_scan_operator_refuses_matrices_numpy_would_broadcast():
    a = np.eye(3)[None].repeat(2, axis=0)
    assert np.allclose(bppsa_operator(a, a), a)
    with pytest.raises(BadInputError, match="n×n matrices"):
        bppsa_operator(a, np.ones((2, 3, 1)))
    with pytest.raises(BadInputError, match="buf"):
        inplace_scan(np.zeros(0), np.add, 0)                        # was an IndexError on buf[-1]
