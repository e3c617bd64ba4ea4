"""Models composed from the layers."""

from keras_transformer.models.transformer import Transformer

__all__ = ["Transformer"]
