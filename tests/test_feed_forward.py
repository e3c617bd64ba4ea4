import numpy as np
import pytest
from keras import ops

from keras_transformer import layers


def test_feed_forward_is_relu_dense_then_dense():
    ffn = layers.FeedForward(d_model=6, dff=10)
    x = np.random.default_rng(0).normal(size=(2, 4, 6)).astype("float32")
    y = ops.convert_to_numpy(ffn(x))
    w1, b1, w2, b2 = (ops.convert_to_numpy(w) for w in ffn.weights)
    np.testing.assert_allclose(y, np.maximum(0, x @ w1 + b1) @ w2 + b2, atol=1e-5)


def test_gelu_sigmoid_is_marians_gelu_and_keeps_its_name():
    """Marian's `gelu`: x * sigmoid(1.702 x), which is neither Keras' exact nor tanh GELU."""
    ffn = layers.FeedForward(d_model=6, dff=10, activation="gelu_sigmoid")
    x = np.random.default_rng(1).normal(size=(3, 6)).astype("float32") * 3
    y = ops.convert_to_numpy(ffn(x))
    w1, b1, w2, b2 = (ops.convert_to_numpy(w) for w in ffn.weights)
    inner = x @ w1 + b1
    expected = (inner / (1 + np.exp(-1.702 * inner))) @ w2 + b2
    np.testing.assert_allclose(y, expected, atol=1e-5)
    assert ffn.get_config()["activation"] == "gelu_sigmoid"
    assert layers.FeedForward.from_config(ffn.get_config()).activation is ffn.activation


def test_feed_forward_rejects_non_positive_dff():
    with pytest.raises(ValueError, match=r"`dff` must be a positive integer.*dff=0"):
        layers.FeedForward(d_model=6, dff=0)
