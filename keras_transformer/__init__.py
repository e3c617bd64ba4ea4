"""keras_transformer: the encoder-decoder Transformer as Keras 3 layers."""

from keras_transformer import layers
from keras_transformer.models import Transformer
from keras_transformer.training import (
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    TransformerSchedule,
)

__version__ = "0.1.0"

__all__ = [
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "Transformer",
    "TransformerSchedule",
    "layers",
]
