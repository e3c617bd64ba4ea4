"""The Transformer's building blocks, each usable in any Keras model."""

from keras_transformer.layers.activations import gelu_sigmoid
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.decoder import Decoder, DecoderLayer
from keras_transformer.layers.dot_product import scaled_dot_product_attention
from keras_transformer.layers.embedding import PositionalEmbedding
from keras_transformer.layers.encoder import Encoder, EncoderLayer
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.layers.masks import (
    large_negative,
    look_ahead_mask,
    merge_masks,
    padding_mask,
)
from keras_transformer.layers.positional_encoding import (
    LearnedPositionalEncoding,
    PositionalEncoding,
    positional_encoding,
)
from keras_transformer.layers.positions import (
    ALiBi,
    Learned,
    PositionScheme,
    Rotary,
    ShawRelative,
    Sinusoidal,
    T5Bias,
)
from keras_transformer.layers.rotary import rotary_positions

__all__ = [
    "ALiBi",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "Learned",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "PositionalEmbedding",
    "PositionScheme",
    "PositionalEncoding",
    "Rotary",
    "ShawRelative",
    "Sinusoidal",
    "T5Bias",
    "gelu_sigmoid",
    "large_negative",
    "look_ahead_mask",
    "merge_masks",
    "padding_mask",
    "positional_encoding",
    "rotary_positions",
    "scaled_dot_product_attention",
]
