"""Tokenizers from tensorflow-text and the `tf.data` pipeline that batches pairs."""

from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.pipeline import (
    Batches,
    make_batches,
    padding_fraction,
    tokenize_pairs,
)
from keras_transformer.text.registry import TOKENIZER_TYPES, load_tokenizer, train_tokenizer
from keras_transformer.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.text.source import SourcePolicy
from keras_transformer.text.tokenizer import Tokenizer
from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer

__all__ = [
    "Batches",
    "MarianTokenizer",
    "SentencePieceTokenizer",
    "SourcePolicy",
    "TOKENIZER_TYPES",
    "Tokenizer",
    "WordPieceTokenizer",
    "load_tokenizer",
    "make_batches",
    "padding_fraction",
    "tokenize_pairs",
    "train_tokenizer",
]
