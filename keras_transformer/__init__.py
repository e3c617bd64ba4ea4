"""keras_transformer: the encoder-decoder Transformer as Keras 3 layers."""

from keras_transformer.startup import import_tensorflow_quietly

import_tensorflow_quietly()  # before Keras imports TensorFlow; see startup.py

from keras_transformer import layers  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.training import (  # noqa: E402
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
