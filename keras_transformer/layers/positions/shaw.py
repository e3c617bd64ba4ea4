"""Shaw et al.'s relative position representations (2018)."""

import dataclasses

import keras
from keras import ops

from keras_transformer.layers.positions.scheme import PositionScheme
from keras_transformer.layers.relative import relative_indices
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class ShawRelative(PositionScheme):
    """A learned vector per clipped distance, added to the keys and values of every
    self-attention (`layers.relative`). No table.

    Each self-attention holds two `(2k + 1, K)` tables, `relative_keys` and
    `relative_values`, shared by its heads: row `clip(j - i, -k, k) + k` is
    added to key j and value j for query i.

    Args:
        max_distance: the clipping distance k (16 to 20 is usual).

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000, positions=ShawRelative(16))
        ```
    """

    name = "relative"
    max_distance: int

    def __post_init__(self):
        check_positive_int("max_distance", self.max_distance)

    @property
    def in_attention(self):
        return True

    def attention_weights(self, attention):
        rows = 2 * self.max_distance + 1  # one per clipped distance -k..k
        return tuple(
            attention.add_weight(
                name=name, shape=(rows, attention.depth), initializer=attention.kernel_initializer
            )
            for name in ("relative_keys", "relative_values")
        )  # (2k + 1, K) each

    def attention_terms(self, weights, query_positions, key_positions, bidirectional):
        keys, values = weights
        rows = relative_indices(query_positions, key_positions, self.max_distance)  # (T, S)
        return {
            "relative_keys": ops.take(keys, rows, axis=0),  # (T, S, K)
            "relative_values": ops.take(values, rows, axis=0),
        }
