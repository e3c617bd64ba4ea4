"""The paper's fixed sine and cosine table (Vaswani et al., 2017, §3.5)."""

import dataclasses

import keras

from keras_transformer.layers.positional_encoding import LAYOUTS, PositionalEncoding
from keras_transformer.layers.positions.scheme import PositionScheme, check_even
from keras_transformer.validation import check_choice, check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class Sinusoidal(PositionScheme):
    """PE(pos, 2i) = sin(pos / w^(2i/D)), PE(pos, 2i+1) = cos(same), added to vectors.

    Args:
        layout: `"interleaved"` (the paper: sin and cos of a frequency side by
            side) or `"concatenated"` (all sines, then all cosines, as the
            TensorFlow tutorial and Marian).
        max_wavelength: w, 10000 in the paper.
        placement: where the table is added: `"input"` (the embeddings, the
            paper), `"every_layer"` (also the input of every further layer) or
            `"queries_and_keys"` (only the query and key inputs of every
            self-attention, never its values).

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000,
                            positions=Sinusoidal(layout="concatenated"))
        ```
    """

    name = "sinusoidal"
    layout: str = "interleaved"
    max_wavelength: int = 10000
    placement: str = "input"

    def __post_init__(self):
        check_choice("layout", self.layout, LAYOUTS)
        check_positive_int("max_wavelength", self.max_wavelength)
        self._check_placement()

    def check(self, d_model, num_heads=None):
        check_even("The sinusoidal table", d_model, "d_model")

    def table(self, **layer_kwargs):
        return PositionalEncoding(self.layout, self.max_wavelength, **layer_kwargs)
