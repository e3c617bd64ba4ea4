"""`BucketedSearch`: a translator's search over token ids, traced once, and padded to a
few shapes that XLA compiles once each.

The search's `tf.function` is traced once, for inputs of any shape. With XLA it
compiles once per input shape: sources of every length and batches of every
size would each cost a new compilation, and padding them to powers of two keeps
the shapes to a handful, at the price of decoding a few padding columns and
empty rows, which end at once. `Translator` and the
exports built from it (`export.export_translator`, `export.export_litert`) search
through one of these.
"""

import collections

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.inference.result import DecodingResult, TargetSide
from keras_transformer.inference.shortlist import Shortlist, Shortlisted
from keras_transformer.inference.strategy import make_search
from keras_transformer.models import FixedCache, StepModel, StepWrapper
from keras_transformer.models.step import max_positions_of
from keras_transformer.text import Tokenizer


class BucketedSearch(tf.Module):
    """The search of `options` over source ids, with inputs padded to buckets.

    Sources are padded to a power of two (at least 8) in length, never past a
    learned position table; phrases to a power of two in number (at least 2)
    and in tokens (at least 4); prefixes to a power of two in tokens; and with
    XLA the batch to a power of two, with empty sentences. The result holds
    the rows given.

    Args:
        model: a `StepModel` (a `Transformer` or an `Ensemble`).
        source_tokenizer: the source side's tokenizer (its EOS ends the
            padding rows).
        target_tokenizer: the target side's tokenizer (its BOS and EOS, and
            its word starts for constraints).
        options: the search's `DecodeOptions`, checked against the model by
            the caller (`Translator`).
        jit_compile: whether to compile the search with XLA.
        grow_cache: False decodes in one cache of `max_length`
            (`models.FixedCache`), else the cache starts short and grows.
        shortlist: optional `Shortlist` for the target tokenizer.
        source_prefix_length: tokens every source starts with (its
            `text.SourcePolicy`'s prefix), which an empty source has too.

    Examples:
        ```python
        search = BucketedSearch(model, source, target, DecodeOptions(beam_size=1))
        search(tf.constant([[5, 9, 2]])).token_ids.shape  # (1, 1, 64)
        ```
    """

    def __init__(
        self,
        model: StepModel,
        source_tokenizer: Tokenizer,
        target_tokenizer: Tokenizer,
        options: DecodeOptions,
        *,
        jit_compile: bool = True,
        grow_cache: bool = True,
        shortlist: Shortlist | None = None,
        source_prefix_length: int = 0,
    ):
        super().__init__(name="bucketed_search")
        self.source_prefix_length = source_prefix_length
        self.model = model
        self.options = options
        self.jit_compile = jit_compile
        self.source_tokenizer = source_tokenizer
        self.target_tokenizer = target_tokenizer
        self.max_positions = max_positions_of(model)
        decoded = OneRowProjection(model) if jit_compile else TransposedProjection(model)
        if shortlist is not None:
            decoded = Shortlisted(model, shortlist.checked_for(target_tokenizer))
        if not grow_cache:
            decoded = FixedCache(decoded)
        self.decoded = decoded
        self._compiled = tf.function(self._search, jit_compile=jit_compile, autograph=False)

    def __call__(self, source_ids, prefix_ids=None, constraint_ids=None, *, static_shapes=False):
        """The search's `DecodingResult` over source ids `(B, S)`, N = `n_best`.

        Args:
            source_ids: int32 `(B, S)`, each row cut and ending in EOS; ids
                outside [0, source vocabulary) raise `InvalidArgumentError`.
            prefix_ids: optional int32 `(B, P)`, 0-padded target prefixes.
            constraint_ids: optional int32 `(B, C, T)`, 0-padded phrases.
            static_shapes: False traces the search once for inputs of any
                shape; True traces it for these inputs' shapes, so that a
                graph of fixed shapes (an export) holds a search whose every
                shape is known (`Translator.search`).
        """
        source_ids = tf.ensure_shape(source_ids, [None, None], name="source_ids_must_be_a_matrix")
        with tf.control_dependencies(self._checks(source_ids)):
            batch = tf.shape(source_ids)[0]
            length = tf.maximum(8, next_power_of_two(tf.shape(source_ids)[1]))  # S'
            if self.max_positions is not None:  # the padding stays inside the position table
                length = tf.minimum(length, self.max_positions)
            padded = pad_columns(source_ids, length)  # (B, S')
            if prefix_ids is not None:
                prefix_ids = pad_columns(prefix_ids, next_power_of_two(tf.shape(prefix_ids)[1]))
            if constraint_ids is not None:
                constraint_ids = pad_phrases(constraint_ids)  # (B, C', T')
            if self.jit_compile:
                padded, prefix_ids, constraint_ids = self._pad_rows(
                    padded, prefix_ids, constraint_ids
                )
            search = self._traced_for_shapes if static_shapes else self._traced_once
            result = search(padded, prefix_ids, constraint_ids)
            return DecodingResult(*(None if t is None else t[:batch] for t in result))

    def _traced_once(self, *inputs):
        """The compiled search of `inputs`, traced once for inputs of any shape (each
        dimension left open) instead of once per bucket; with XLA, each new shape
        still compiles. Inputs that are None stay out of the search."""
        specs = [
            None if x is None else tf.TensorSpec([None] * x.shape.rank, x.dtype) for x in inputs
        ]
        return self._compiled.get_concrete_function(*specs)(*inputs)

    def _traced_for_shapes(self, *inputs):
        """The search of `inputs` traced for their own shapes, in a function of its own:
        in `_compiled`, or in a function that traced other shapes before, a call would
        run a trace of shapes left open that covers these instead."""
        return tf.function(self._search, jit_compile=self.jit_compile, autograph=False)(*inputs)

    def _checks(self, source_ids):
        """The assertions source ids `(B, S)` must pass before they are searched."""
        vocab = self.model.input_vocab_size
        checks = [
            tf.debugging.assert_non_negative(
                source_ids, message="source_ids must be token ids, >= 0"
            ),
            tf.debugging.assert_less(
                source_ids, vocab, message=f"source_ids must be token ids < {vocab}"
            ),
        ]
        if self.max_positions is not None:
            checks.append(
                tf.debugging.assert_less_equal(
                    tf.shape(source_ids)[1],
                    self.max_positions,
                    message=f"source_ids must hold at most max_positions={self.max_positions} "
                    "tokens",
                )
            )
        return checks

    def _pad_rows(self, source_ids, prefix_ids, constraint_ids):
        """The inputs with rows added up to a power of two, each an empty sentence
        (`[EOS]`, no prefix, no phrases): they end at once."""
        rows = next_power_of_two(tf.shape(source_ids)[0]) - tf.shape(source_ids)[0]
        position = tf.range(tf.shape(source_ids)[1])[None, :]  # (1, S')
        empty = tf.where(position == 0, self.source_tokenizer.eos_id, PAD_ID)
        source_ids = tf.concat([source_ids, tf.tile(empty, [rows, 1])], axis=0)  # (B', S')
        if prefix_ids is not None:
            prefix_ids = tf.pad(prefix_ids, [[0, rows], [0, 0]])  # (B', P')
        if constraint_ids is not None:
            constraint_ids = tf.pad(constraint_ids, [[0, rows], [0, 0], [0, 0]])  # (B', C', T')
        return source_ids, prefix_ids, constraint_ids

    def _search(self, source_ids, prefix_ids=None, constraint_ids=None):
        source, target = self.source_tokenizer, self.target_tokenizer
        if constraint_ids is None:
            target = TargetSide(
                target.bos_id, target.eos_id, None, source.eos_id, self.source_prefix_length
            )
        else:  # phrases are written as whole words: the search needs the word starts
            target = TargetSide.of(target, source, self.source_prefix_length)
        return make_search(self.options, target)(
            self.decoded, source_ids, prefix_ids, constraint_ids
        )


SEARCHES = "_keras_transformer_searches"
"""The attribute of a model that holds its `shared_search`es."""

KEPT_SEARCHES = 8
"""How many `shared_search`es a model keeps, the most recently asked for."""


def shared_search(
    model: StepModel,
    source_tokenizer: Tokenizer,
    target_tokenizer: Tokenizer,
    options: DecodeOptions,
    **settings,
) -> BucketedSearch:
    """The `BucketedSearch` of these arguments, made once per model and kept with it.

    Translators of one model that search alike (a copy whose other arguments are the
    same, an export's copy of a translator that already searches without XLA) then
    share one search: its trace, and with XLA its compilation of each shape, are made
    once. A model keeps its `KEPT_SEARCHES` most recently asked for (a sweep over
    options does not pile up searches in memory; a translator keeps its own search
    either way); a model that cannot hold them gets a new search each time.

    Args:
        model: a `StepModel`.
        source_tokenizer: the source side's tokenizer.
        target_tokenizer: the target side's tokenizer.
        options: the search's `DecodeOptions`.
        **settings: the other arguments of `BucketedSearch` (`jit_compile`,
            `grow_cache`, `shortlist`, `source_prefix_length`).

    Example:
        ```python
        options = DecodeOptions(beam_size=1)
        search = shared_search(model, tokenizer, tokenizer, options, jit_compile=False)
        search is shared_search(model, tokenizer, tokenizer, options, jit_compile=False)  # True
        ```
    """
    # The tokenizers and the shortlist by identity: the search holds them, so that an
    # identity in the key is never reused while the search lives.
    key = (
        id(source_tokenizer),
        id(target_tokenizer),
        options,
        *sorted(
            (name, id(value) if name == "shortlist" else value) for name, value in settings.items()
        ),
    )
    try:  # in the model's __dict__, past Keras' attribute tracking: no part of the model
        searches = vars(model).setdefault(SEARCHES, collections.OrderedDict())
    except TypeError:  # a model without a __dict__
        return BucketedSearch(model, source_tokenizer, target_tokenizer, options, **settings)
    if key in searches:
        searches.move_to_end(key)
    else:
        searches[key] = BucketedSearch(
            model, source_tokenizer, target_tokenizer, options, **settings
        )
        while len(searches) > KEPT_SEARCHES:
            searches.popitem(last=False)  # the least recently asked for
    return searches[key]


def pad_columns(ids, length):
    """`ids` `(B, L)` padded with `PAD_ID` to `length` >= L columns."""
    return tf.pad(ids, [[0, 0], [0, length - tf.shape(ids)[1]]], constant_values=PAD_ID)


def pad_phrases(constraint_ids):
    """Phrases `(B, C, T)` padded to a power of two in number (at least 2) and in tokens
    (at least 4): fewer shapes to trace."""
    shape = tf.shape(constraint_ids)
    return tf.pad(
        constraint_ids,
        [
            [0, 0],
            [0, next_power_of_two(tf.maximum(shape[1], 2)) - shape[1]],
            [0, next_power_of_two(tf.maximum(shape[2], 4)) - shape[2]],
        ],
    )


def next_power_of_two(n):
    """The smallest power of two >= `n`, for a scalar int32 tensor `n` >= 0."""
    powers = tf.constant([2**i for i in range(31)])
    return tf.gather(powers, tf.searchsorted(powers, tf.reshape(n, [1]))[0])


class OneRowProjection(StepWrapper):
    """`model` decoded with its tied pre-softmax projection transposed once per batch
    (`Transformer.one_row_projection`), which XLA multiplies a single row by faster.

    Args:
        model: a `StepModel`.
    """

    def encode(self, source_ids):
        return self.model.one_row_projection(self.model.encode(source_ids))


class TransposedProjection(StepWrapper):
    """`model` decoded with its tied pre-softmax projection transposed once per batch
    (`Transformer.transposed_projection`), which TensorFlow's graph multiplies rows by
    faster than the embeddings transposed at each step.

    Args:
        model: a `StepModel`.
    """

    def encode(self, source_ids):
        return self.model.transposed_projection(self.model.encode(source_ids))
