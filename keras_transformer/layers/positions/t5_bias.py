"""T5's relative attention bias (Raffel et al., 2020, §2.1)."""

import dataclasses

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers.positions.scheme import PositionScheme
from keras_transformer.layers.relative import relative_buckets
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class T5Bias(PositionScheme):
    """A learned scalar per head and distance bucket, added to the logits of every
    self-attention (`layers.relative.relative_buckets`). No table.

    Each self-attention holds a `(num_buckets, H)` table,
    `relative_attention_bias`. An encoder's buckets are bidirectional, a
    decoder's look only back.

    Args:
        num_buckets: distance buckets (32 in T5); short distances have one each,
            longer ones share buckets spaced logarithmically.
        max_distance: the distance from which all keys share the last bucket
            (128 in T5).

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000, positions=T5Bias())
        ```
    """

    name = "relative_bias"
    num_buckets: int = 32
    max_distance: int = 128

    def __post_init__(self):
        check_positive_int("num_buckets", self.num_buckets)
        check_positive_int("max_distance", self.max_distance)
        if self.num_buckets < 4 or self.num_buckets % 2:
            raise ArgumentError(
                "`num_buckets` must be even and at least 4: half the buckets of an encoder "
                f"look each way, half of those are exact. Received: num_buckets={self.num_buckets}"
            )

    @property
    def in_attention(self):
        return True

    def attention_weights(self, attention):
        bias = attention.add_weight(
            name="relative_attention_bias",
            shape=(self.num_buckets, attention.num_heads),
            initializer=attention.kernel_initializer,
        )  # (buckets, H)
        return (bias,)

    def attention_terms(self, weights, query_positions, key_positions, bidirectional):
        (table,) = weights
        buckets = relative_buckets(
            query_positions, key_positions, bidirectional, self.num_buckets, self.max_distance
        )  # (T, S)
        bias = ops.take(table, buckets, axis=0)  # (T, S, H)
        return {"logit_bias": ops.transpose(bias, (2, 0, 1))}  # (H, T, S)
