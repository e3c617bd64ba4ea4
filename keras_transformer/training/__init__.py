"""Training objects: the warm-up schedule, the masked loss and accuracy."""

from keras_transformer.training.losses import MaskedSparseCategoricalCrossentropy
from keras_transformer.training.metrics import MaskedAccuracy
from keras_transformer.training.schedules import ScaledSchedule, TransformerSchedule

__all__ = [
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "ScaledSchedule",
    "TransformerSchedule",
]
