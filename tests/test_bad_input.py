"""Bad input gets a clear course error naming the argument, never a silently wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

from course.backprop.gradcheck import gradient_errors
from course.backprop.layers import MLP, Linear, mse, softmax_cross_entropy
from course.bppsa.models import MLPChain, TanhRNN, finite_difference_check
from course.errors import BadInputError


@pytest.mark.parametrize("labels", [np.array([0, 10]), np.array([-1, 3]), np.array([0.0, 1.0]), np.array([[0, 1]])])
def test_the_cross_entropy_and_lesson_05s_models_refuse_labels_that_name_no_class(labels):
    logits = np.zeros((2, 10))
    with pytest.raises(BadInputError, match="label|integer"):
        softmax_cross_entropy(logits, labels)
    rnn, chain = TanhRNN(hidden_size=3, n_classes=10, dtype="float64"), MLPChain(width=4, depth=2, n_classes=10)
    with pytest.raises(BadInputError, match="label|integer"):
        rnn.forward(rnn.example_data(3, batch=2)[0], labels)
    with pytest.raises(BadInputError, match="label|integer"):
        chain.forward(chain.example_data(batch=2)[0], labels)


def test_an_rnn_refuses_out_of_range_labels_instead_of_scoring_another_class():
    rnn = TanhRNN(hidden_size=4, n_classes=3, dtype="float64")
    x, _ = rnn.example_data(5, batch=2)
    with pytest.raises(BadInputError, match="out of range"):
        rnn.forward(x, np.array([0, 3]))


def test_an_integer_chain_is_refused_instead_of_zeroing_its_weights():
    with pytest.raises(BadInputError, match="floating-point"):
        MLPChain(dtype="int32")


def test_mse_refuses_shapes_that_would_broadcast_to_a_wrong_loss():
    with pytest.raises(BadInputError, match="same shape"):
        mse(np.zeros((4, 1)), np.zeros(4))
    loss, _ = mse(np.ones(4), np.zeros(4))
    assert loss == 1.0


@pytest.mark.parametrize("n_in, n_out", [(0, 3), (3, 0), (2.5, 3), (-1, 2)])
def test_a_linear_layer_without_inputs_or_outputs_is_refused(n_in, n_out):
    with pytest.raises(BadInputError, match="n_in|n_out"):
        Linear(n_in, n_out)


@pytest.mark.parametrize("kwargs, match", [({"n_checks": 0}, "n_checks"), ({"eps": 0.0}, "eps"),
                                           ({"eps": -1e-6}, "eps")])
def test_a_finite_difference_check_that_would_check_nothing_is_refused(kwargs, match):
    rnn = TanhRNN(hidden_size=3, n_classes=2, dtype="float64")
    x, y = rnn.example_data(4, batch=2)
    with pytest.raises(BadInputError, match=match):
        finite_difference_check(rnn, x, y, **kwargs)


@pytest.mark.parametrize("eps", [0.0, -1e-6, float("nan"), 2.0])
def test_gradient_errors_refuse_a_step_of_zero(eps):
    model = MLP([3, 4, 2], dtype="float64")
    x, y = np.ones((2, 3)), np.array([0, 1])
    with pytest.raises(BadInputError, match="eps"):
        gradient_errors(model, x, y, eps=eps)
