"""Decoding a trained model: cached greedy and beam search, sampling, and the Translator."""

from keras_transformer.inference.adapters import HypothesisRows
from keras_transformer.inference.beam_search import beam_search
from keras_transformer.inference.ensemble import Ensemble
from keras_transformer.inference.greedy import greedy_search
from keras_transformer.inference.lines import translate_lines, translate_lines_with_scores
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.inference.probabilities import length_penalty
from keras_transformer.inference.rules import LengthOptions
from keras_transformer.inference.sampling import sample
from keras_transformer.inference.shortlist import Shortlist, Shortlisted
from keras_transformer.inference.translator import Translator

__all__ = [
    "DecodeOptions",
    "Ensemble",
    "HypothesisRows",
    "LengthOptions",
    "Shortlist",
    "Shortlisted",
    "Translator",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "sample",
    "translate_lines",
    "translate_lines_with_scores",
]
