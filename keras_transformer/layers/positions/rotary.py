"""Rotary positions (RoPE; Su et al., 2021): queries and keys turned by their positions."""

import dataclasses

import keras

from keras_transformer.errors import ArgumentError
from keras_transformer.layers.positions.scheme import PositionScheme
from keras_transformer.layers.rotary import MAX_WAVELENGTH, rotary_positions
from keras_transformer.validation import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
@dataclasses.dataclass(frozen=True)
class Rotary(PositionScheme):
    """Every self-attention rotates its queries and keys by their positions
    (`layers.rotary`), so their product depends on the distance alone. No table.

    Args:
        max_wavelength: the 10000 of the rotation frequencies.

    Examples:
        ```python
        model = Transformer(2, 64, 4, 128, 1000, 1000, positions=Rotary())
        ```
    """

    name = "rotary"
    max_wavelength: int = MAX_WAVELENGTH

    def __post_init__(self):
        check_positive_int("max_wavelength", self.max_wavelength)

    @property
    def in_attention(self):
        return True

    def check(self, d_model, num_heads=None):
        if num_heads is not None and (d_model // num_heads) % 2:
            raise ArgumentError(
                "Rotary positions turn pairs of features: the head depth "
                "d_model / num_heads must be even. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )

    def rotate(self, x, start=0):
        return rotary_positions(x, start, self.max_wavelength)  # (B, H, L, K)
