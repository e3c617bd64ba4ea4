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


def test_feed_forward_rejects_non_positive_dff():
    with pytest.raises(ValueError, match=r"`dff` must be a positive integer.*dff=0"):
        layers.FeedForward(d_model=6, dff=0)
