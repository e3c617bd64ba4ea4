"""Decoding a trained model: cached greedy and beam search, sampling, and the Translator."""

from keras_transformer.inference.ensemble import Ensemble
from keras_transformer.inference.search import beam_search, greedy_search, length_penalty, sample
from keras_transformer.inference.translator import (
    Translator,
    translate_lines,
    translate_lines_with_scores,
)

__all__ = [
    "Ensemble",
    "Translator",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "sample",
    "translate_lines",
    "translate_lines_with_scores",
]
