"""Greedy search: the most likely next token at every step (`GreedySearch`, and
`greedy_search`, the function that runs it once)."""

import dataclasses

import tensorflow as tf

from keras_transformer.inference.defaults import MAX_LENGTH
from keras_transformer.inference.loop import token_by_token
from keras_transformer.inference.options import DecodeOptions, lengths_of
from keras_transformer.inference.result import TargetSide, from_log_probs


def greedy_search(
    model,
    source_ids,
    bos_id,
    eos_id,
    max_length=MAX_LENGTH,
    prefix_ids=None,
    attention_layer=None,
    length_options=None,
    constraint_ids=None,
    continues_word=None,
):
    """Picks the most likely next token at every step.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface (`models.StepModel`, or `encode`, `initial_cache`
            and `decode_step`).
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        prefix_ids: optional int `(B, P)`, 0-padded: each output starts
            with its row.
        attention_layer: optional index of a decoder layer (-1: the last):
            also return the output's cross-attention in that layer,
            averaged over heads (needs a model whose `decode_step` takes it,
            as `Transformer`'s does).
        length_options: optional `inference.LengthOptions`: length limits
            relative to the source, a minimum length, no repeated n-grams.
        constraint_ids: optional int `(B, C, T)`, 0-padded: phrases each
            output must contain (`inference.constraints`).
        continues_word: optional bool `(V,)`, the target pieces that go on
            with the word before them (`Tokenizer.continues_word`): with
            `constraint_ids`, none may follow a phrase, so that phrases are
            written as whole words.

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        output and the sum of its tokens' log-probabilities; with
        `attention_layer`, also the attention `(B, max_length, S)` of each
        output token to the source (zero after EOS).

    Examples:
        ```python
        search = tf.function(lambda s: greedy_search(model, s, bos_id=2, eos_id=3))
        token_ids, log_probs = search(source_ids)
        ```
    """

    options = DecodeOptions(beam_size=1, max_length=max_length, **lengths_of(length_options))
    search = GreedySearch(options, TargetSide(bos_id, eos_id, continues_word), attention_layer)
    result = search(model, source_ids, prefix_ids, constraint_ids)
    if attention_layer is None:
        return result.token_ids[:, 0], result.log_probs[:, 0]
    return result.token_ids[:, 0], result.log_probs[:, 0], result.attention[:, 0]


@dataclasses.dataclass(frozen=True)
class GreedySearch:
    """Greedy search as a `Search`: the most likely next token at every step.

    Args:
        options: the `inference.DecodeOptions` (`max_length`, the length
            options, and `alpha` for the scores).
        target: the `inference.TargetSide`.
        attention_layer: optional index of a decoder layer whose
            cross-attention the result holds.

    Examples:
        ```python
        search = GreedySearch(DecodeOptions(beam_size=1), TargetSide(2, 3))
        result = search(model, source_ids)  # DecodingResult, N = 1
        ```
    """

    options: DecodeOptions
    target: TargetSide
    attention_layer: int | None = None

    def __call__(self, model, source_ids, prefix_ids=None, constraint_ids=None):
        """The `DecodingResult` of `source_ids` `(B, S)`, optionally from `prefix_ids`
        `(B, P)` and meeting `constraint_ids` `(B, C, T)`; N = 1."""
        token_ids, log_probs, attention = token_by_token(
            model,
            source_ids,
            most_likely,
            self.target,
            self.options,
            prefix_ids,
            constraint_ids,
            self.attention_layer,
        )
        return from_log_probs(
            token_ids[:, None],
            log_probs[:, None],
            self.target.eos_id,
            self.options,
            None if self.attention_layer is None else attention[:, None],
        )


def most_likely(log_probs, step):
    """Each row's most likely token `(B,)` of `log_probs` `(B, V)`."""
    del step  # the same at every step
    return tf.argmax(log_probs, axis=-1, output_type=tf.int32)
