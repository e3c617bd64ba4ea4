"""Models composed from the layers, and the step interface the searches decode through."""

from keras_transformer.models.step import FixedCache, Step, StepModel, StepWrapper
from keras_transformer.models.train_step import PackedTraining
from keras_transformer.models.transformer import Transformer

__all__ = ["FixedCache", "PackedTraining", "Step", "StepModel", "StepWrapper", "Transformer"]
