"""The searches under the name they had before they were split by concern.

Nothing is defined here: greedy search lives in `greedy`, sampling in
`sampling`, beam search in `beam_search`, the step loop in `loop`, the
blocked top-k in `top_k` and the adapter for models of one's own in
`adapters`.
"""

from keras_transformer.inference.adapters import HypothesisRows, as_step_model
from keras_transformer.inference.beam_search import beam_search, best_extensions
from keras_transformer.inference.defaults import ALPHA, BEAM_SIZE, MAX_LENGTH
from keras_transformer.inference.greedy import greedy_search
from keras_transformer.inference.loop import SMALLEST_CACHE_LENGTH, cache_lengths
from keras_transformer.inference.options import check_sampling
from keras_transformer.inference.probabilities import (
    MINUS_INF,
    length_penalty,
    log_softmax_without_pad_and_bos,
)
from keras_transformer.inference.sampling import sample
from keras_transformer.inference.top_k import top_k_by_blocks

__all__ = [
    "ALPHA",
    "BEAM_SIZE",
    "MAX_LENGTH",
    "MINUS_INF",
    "SMALLEST_CACHE_LENGTH",
    "HypothesisRows",
    "as_step_model",
    "beam_search",
    "best_extensions",
    "cache_lengths",
    "check_sampling",
    "greedy_search",
    "length_penalty",
    "log_softmax_without_pad_and_bos",
    "sample",
    "top_k_by_blocks",
]
