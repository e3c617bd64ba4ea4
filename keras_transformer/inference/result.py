"""What every search returns, and what it must know of the target vocabulary."""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.inference.probabilities import length_penalty


class TargetSide(NamedTuple):
    """The target vocabulary as a search sees it.

    Attributes:
        bos_id: id the decoder starts from.
        eos_id: id that ends an output.
        continues_word: optional bool `(V,)`, the pieces that go on with the
            word before them (`Tokenizer.continues_word`): with phrases to
            meet, none may follow a phrase, so that phrases are written as
            whole words.
        source_eos_id: the id that ends each source, by which a search
            knows an empty source (the source `[EOS]`, translated as the
            empty output); None for `eos_id` (one vocabulary for both sides).
        source_prefix_length: tokens every source starts with (a
            target-language token, `text.languages`): a source of these and
            EOS is empty too.

    Each id is the one of the vocabulary the model was trained with, so a
    vocabulary that numbers its special pieces differently from
    `keras_transformer.constants` decodes as well (padding is always id 0).

    Examples:
        ```python
        TargetSide.of(target_tokenizer, source_tokenizer)  # their BOS, EOS, continues_word
        ```
    """

    bos_id: int
    eos_id: int
    continues_word: object = None
    source_eos_id: object = None
    source_prefix_length: int = 0

    @classmethod
    def of(cls, tokenizer, source_tokenizer=None, source_prefix_length=0):
        """The `TargetSide` of a target `keras_transformer.text.Tokenizer` (and of the
        source tokenizer, for the source's EOS; None: the same vocabulary)."""
        source_eos_id = None if source_tokenizer is None else source_tokenizer.eos_id
        return cls(
            tokenizer.bos_id,
            tokenizer.eos_id,
            tokenizer.continues_word,
            source_eos_id,
            source_prefix_length,
        )

    @property
    def source_end(self):
        """The id that ends each source: `source_eos_id`, else `eos_id`."""
        return self.eos_id if self.source_eos_id is None else self.source_eos_id


class DecodingResult(NamedTuple):
    """The N outputs a search gives each of B sentences, best first for beam search.

    Attributes:
        token_ids: int32 `(B, N, L)`, L = `max_length`: the outputs, 0 after
            EOS (and at the end of outputs cut at `max_length` without one).
        lengths: int32 `(B, N)`, each output's tokens up to and including
            its EOS (L if it has none).
        log_probs: float32 `(B, N)`, log P(output | source) under the model
            (-inf for a place no hypothesis filled).
        scores: float32 `(B, N)`, `log_probs / length_penalty(lengths, alpha,
            kind)`, with the options' `alpha` and `length_penalty`: what beam
            search ranks by.
        attention: float32 `(B, N, L, S)`, each output token's
            cross-attention to the source in the layer asked for, or None.
    """

    token_ids: object
    lengths: object
    log_probs: object
    scores: object
    attention: object = None


def output_lengths(token_ids, eos_id):
    """Tokens of each output `(..., L)` up to and including its EOS (all if none): `(...)`."""
    is_eos = token_ids == eos_id  # (..., L)
    first = tf.argmax(tf.cast(is_eos, tf.int32), axis=-1, output_type=tf.int32)
    return tf.where(tf.reduce_any(is_eos, axis=-1), first + 1, tf.shape(token_ids)[-1])


def from_log_probs(token_ids, log_probs, eos_id, options, attention=None):
    """The `DecodingResult` of outputs `(B, N, L)` with their log P `(B, N)`, scored
    by the length penalty of `options` (`DecodeOptions`)."""
    lengths = output_lengths(token_ids, eos_id)
    scores = log_probs / length_penalty(lengths, options.alpha, options.length_penalty)
    return DecodingResult(token_ids, lengths, log_probs, scores, attention)


def from_scores(token_ids, scores, eos_id, options, attention=None):
    """The `DecodingResult` of outputs `(B, N, L)` ranked by their `scores` `(B, N)`
    under the length penalty of `options` (`DecodeOptions`)."""
    lengths = output_lengths(token_ids, eos_id)
    log_probs = scores * length_penalty(lengths, options.alpha, options.length_penalty)
    return DecodingResult(token_ids, lengths, log_probs, scores, attention)
