"""The searches behind one protocol: built from `DecodeOptions` and the target side,
each called on a batch of sources and giving one `DecodingResult`."""

from typing import Protocol

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.beam_search import BeamSearch
from keras_transformer.inference.greedy import GreedySearch
from keras_transformer.inference.result import DecodingResult
from keras_transformer.inference.sampling import Sampling


class Search(Protocol):
    """What `GreedySearch`, `BeamSearch` and `Sampling` have in common.

    A search holds its options; a call decodes one batch, in a
    `tf.function` or eagerly.
    """

    def __call__(self, model, source_ids, prefix_ids=None, constraint_ids=None) -> DecodingResult:
        """Decodes `source_ids` `(B, S)` with `model` (anything with the step
        interface), each output starting with its row of `prefix_ids` `(B, P)` and
        containing the phrases of `constraint_ids` `(B, C, T)` (both optional,
        0-padded)."""


def make_search(options, target, attention_layer=None):
    """The `Search` that `options` ask for: `Sampling` with `sample`, else
    `GreedySearch` for a beam of 1 and `BeamSearch` for a wider one.

    Args:
        options: `inference.DecodeOptions`.
        target: `inference.TargetSide`.
        attention_layer: optional index of a decoder layer whose
            cross-attention the result holds (greedy and beam search).

    Examples:
        ```python
        search = make_search(DecodeOptions(beam_size=4), TargetSide.of(target_tokenizer))
        result = search(model, source_ids)
        result.token_ids.shape  # (B, 1, 64)
        ```
    """
    if options.sample:
        if attention_layer is not None:
            raise ArgumentError("Sampling does not return attention: leave `attention_layer` None.")
        return Sampling(options, target)
    if options.beam_size == 1:
        return GreedySearch(options, target, attention_layer)
    return BeamSearch(options, target, attention_layer)
