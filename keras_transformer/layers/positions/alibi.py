"""ALiBi, attention with linear biases (Press et al., 2022, "Train Short, Test Long")."""

import dataclasses
import math

import keras
import numpy as np
from keras import ops

from keras_transformer.layers.positions.scheme import PositionScheme


def alibi_slopes(num_heads):
    """The paper's fixed slope m_h of each head: a geometric sequence from 2^(-8/H).

    With H a power of two, m_h = 2^(-8h/H) for h = 1..H. Otherwise the H' = the
    largest power of two below H heads take the slopes of H', and the rest every
    other slope of 2H' (the paper's reference code).

    Args:
        num_heads: H.

    Returns:
        float32 NumPy `(H,)`, decreasing.

    Examples:
        >>> alibi_slopes(8)
        [0.5, 0.25, 0.125, ..., 0.00390625]
    """

    def powers(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    base = 2 ** math.floor(math.log2(num_heads))
    slopes = powers(base) + powers(2 * base)[0::2][: num_heads - base]
    return np.asarray(slopes, np.float32)


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class ALiBi(PositionScheme):
    """Every self-attention adds `-m_h * |i - j|` to the logit of query i and key j
    in head h, with fixed slopes m_h (`alibi_slopes`). No table, no weights, and
    no longest position: the paper trains short and reads longer.

    An encoder's bias is symmetric in distance; in a decoder the keys after the
    query are masked, so only the distance back counts. The slopes are
    constants of each self-attention, not weights.

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000, positions=ALiBi())
        ```
    """

    name = "alibi"

    @property
    def in_attention(self):
        return True

    def attention_weights(self, attention):
        return (alibi_slopes(attention.num_heads),)  # fixed: a constant, not a weight

    def attention_terms(self, weights, query_positions, key_positions, bidirectional):
        (slopes,) = weights  # (H,)
        queries = ops.cast(query_positions, "float32")[:, None]  # (T, 1)
        keys = ops.cast(key_positions, "float32")[None, :]  # (1, S)
        distance = ops.abs(keys - queries)  # (T, S); keys ahead of a decoder's query are masked
        return {"logit_bias": -slopes[:, None, None] * distance[None]}  # (H, T, S)
