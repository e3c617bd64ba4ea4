"""Decoding a trained model: cached greedy and beam search, sampling, and the Translator."""

from keras_transformer.inference.adapters import HypothesisRows
from keras_transformer.inference.beam_search import BeamSearch, beam_search
from keras_transformer.inference.bucketed_search import BucketedSearch
from keras_transformer.inference.engine import Engine, Translations, translations_of
from keras_transformer.inference.ensemble import Ensemble
from keras_transformer.inference.greedy import GreedySearch, greedy_search
from keras_transformer.inference.lines import translate_lines, translate_lines_with_scores
from keras_transformer.inference.options import DecodeOptions, LengthOptions
from keras_transformer.inference.probabilities import length_penalty
from keras_transformer.inference.result import DecodingResult, TargetSide
from keras_transformer.inference.sampling import Sampling, sample
from keras_transformer.inference.shortlist import Shortlist, Shortlisted
from keras_transformer.inference.strategy import Search, make_search
from keras_transformer.inference.translator import Translator

__all__ = [
    "BeamSearch",
    "BucketedSearch",
    "DecodeOptions",
    "DecodingResult",
    "Engine",
    "Ensemble",
    "GreedySearch",
    "HypothesisRows",
    "LengthOptions",
    "Sampling",
    "Search",
    "Shortlist",
    "Shortlisted",
    "TargetSide",
    "Translations",
    "Translator",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "make_search",
    "sample",
    "translate_lines",
    "translate_lines_with_scores",
    "translations_of",
]
