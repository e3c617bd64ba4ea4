"""A trained table of absolute positions (BERT, Marian's `Wpos`, OpenNMT)."""

import dataclasses

import keras

from keras_transformer.layers.positional_encoding import LearnedPositionalEncoding
from keras_transformer.layers.positions.scheme import PositionScheme
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class Learned(PositionScheme):
    """A `(max_positions, D)` table learned with the model, one row per position.

    Unlike the sinusoidal table it places no position past its last row: the
    model reads and writes at most `max_positions` tokens a side.

    Args:
        max_positions: rows of the table.
        placement: `"input"`, `"every_layer"` or `"queries_and_keys"`, as for
            `Sinusoidal`.

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000, positions=Learned(256))
        ```
    """

    name = "learned"
    max_positions: int = dataclasses.field()  # required, not the base's None
    placement: str = "input"

    def __post_init__(self):
        check_positive_int("max_positions", self.max_positions)
        self._check_placement()

    def table(self, **layer_kwargs):
        return LearnedPositionalEncoding(self.max_positions, **layer_kwargs)
