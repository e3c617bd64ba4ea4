"""Decoding a trained model: cached greedy and beam search, and the string-to-string Translator."""

from keras_transformer.inference.search import beam_search, greedy_search, length_penalty
from keras_transformer.inference.translator import Translator, translate_lines

__all__ = ["Translator", "beam_search", "greedy_search", "length_penalty", "translate_lines"]
