"""The step loop every search runs: one step of log-probabilities, the loop over
steps with a cache that grows, and the histories of tokens it writes.

A step attends over its whole cache, so for a long `max_length` a search
starts with a shorter cache and doubles it when full (`cache_lengths`): one
`tf.while_loop` per cache size. Traced by `tf.function`, a search is a single
graph with no Python in the loop.

Token ids follow the package: 0 is padding; decoding starts from `bos_id` and
a hypothesis ends with `eos_id`. Padding and BOS are never generated. Outputs
are `(B, max_length)` int32 ids, 0 after each row's EOS (or at the end of rows
that reached `max_length` without one); BOS is not included.

Every search takes an optional target prefix per sentence, `prefix_ids`
`(B, P)`, 0-padded: while a sentence is inside its prefix, the search must
take the prefix's token, so the output starts with the prefix and the rest
is searched as usual. Scores count the prefix's tokens too. Every search also
takes `length_options` (`inference.rules.LengthOptions`: limits relative to
the source length, a minimum length, no repeated n-grams), and gives an empty
source (only padding and EOS) the output EOS at once, or its prefix and
EOS. Every search also takes target phrases each output must contain,
`constraint_ids` (`inference.constraints`).
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.inference.adapters import as_step
from keras_transformer.inference.checks import (
    check_constraint_ids,
    check_prefix_ids,
    check_source_ids,
)
from keras_transformer.inference.constraints import advance, start
from keras_transformer.inference.probabilities import log_softmax_without_pad_and_bos
from keras_transformer.inference.rules import apply_rules, make_rules
from keras_transformer.models.step import Step, StepModel
from keras_transformer.validation import check_tensorflow_backend

# The shortest cache a search grows from (`cache_lengths`).
SMALLEST_CACHE_LENGTH = 16


def next_log_probs(model, token_ids, step, cache, state, bos_id, attention_layer=None):
    """One decoding step: a `Step` of log p(next token) `(B, V)` float32.

    Padding and BOS get probability zero: they are never generated (the
    searches then apply their `inference.rules`). The step's `attention` is
    the model's cross-attention `(B, S)` of `attention_layer`, or `(B, 0)`
    without one.
    """
    options = {} if attention_layer is None else {"attention_layer": attention_layer}
    logits, cache, attention = as_step(
        model.decode_step(token_ids, step, cache, state, **options)
    )  # (B, V)
    if attention is None:
        attention = tf.zeros([tf.shape(logits)[0], 0])
    return Step(log_softmax_without_pad_and_bos(logits, bos_id), cache, attention)


class TokenState(NamedTuple):
    """The loop state of one hypothesis per sentence (greedy search, sampling).

    Attributes:
        step: scalar int32, the position being decoded.
        token: int32 `(B,)`, the last token of each output.
        history: `{"tokens": (B, L), "attention": (B, L, S)}` so far.
        finished: bool `(B,)`, whether the output has ended.
        score: float32 `(B,)`, the sum of its tokens' log-probabilities.
        cache: the model's cache.
        phrases: the outputs' `constraints.PhraseState`, or `()` without
            phrases to meet.
    """

    step: object
    token: object
    history: dict
    finished: object
    score: object
    cache: object
    phrases: object = ()


def token_by_token(
    model,
    source_ids,
    choose,
    target,
    options,
    prefix_ids=None,
    constraint_ids=None,
    attention_layer=None,
):
    """One hypothesis per sentence, extended by `choose(log_probs (B, V), step) -> (B,)`.

    The loop of greedy search and sampling: a row stops at its EOS, and its
    score is the sum of its tokens' log-probabilities. `constraint_ids`
    `(B, C, T)` are the phrases of `inference.constraints`, inserted eagerly
    (`inference.rules.Rules.eager_phrases`).

    Args:
        model: an object with the step interface.
        source_ids: int `(B, S)`, 0-padded.
        choose: the search's choice of each row's next token.
        target: the `inference.TargetSide` (BOS, EOS, `continues_word`).
        options: the `inference.DecodeOptions` (`max_length` and the length
            options).
        prefix_ids: optional int `(B, P)`, 0-padded.
        constraint_ids: optional int `(B, C, T)`, 0-padded.
        attention_layer: optional index of a decoder layer.

    Returns:
        `(token_ids (B, max_length), score (B,), attention (B, max_length, S))`,
        S = 0 without `attention_layer`.
    """
    check_tensorflow_backend("Greedy search or sampling")
    bos_id, eos_id, max_length = target.bos_id, target.eos_id, options.max_length
    source_ids = check_source_ids(source_ids)
    prefix_ids = check_prefix_ids(prefix_ids, source_ids.shape[0])
    constraint_ids = check_constraint_ids(constraint_ids, source_ids.shape[0])
    rules = make_rules(
        source_ids,
        prefix_ids,
        options,
        target,
        constraint_ids=constraint_ids,
        eager_phrases=True,  # one hypothesis per sentence
    )
    state = model.encode(source_ids)
    batch = tf.shape(source_ids)[0]
    lengths = cache_lengths(model, max_length)

    def body(s):
        log_probs, cache, attention = next_log_probs(
            model, s.token, s.step, s.cache, state, bos_id, attention_layer
        )  # (B, V), cache, (B, S)
        log_probs = apply_rules(log_probs, s.step, rules, s.history["tokens"], s.phrases)
        token = choose(log_probs, s.step)  # (B,)
        chosen = tf.gather(log_probs, token, batch_dims=1)  # (B,)
        token = tf.where(s.finished, PAD_ID, token)
        attention = tf.where(s.finished[:, None], 0.0, attention)
        new = {"tokens": token, "attention": attention}
        phrases = s.phrases
        if rules.phrase_ids is not None:
            phrases = advance(phrases, rules.phrase_ids, rules.phrase_lengths, token)
        return TokenState(
            step=s.step + 1,
            token=token,
            history=write_step(s.history, s.step, new, axis=1),
            finished=s.finished | (token == eos_id),
            score=s.score + tf.where(s.finished, 0.0, chosen),
            cache=cache,
            phrases=phrases,
        )

    def not_done(s):
        return (s.step < max_length) & ~tf.reduce_all(s.finished)

    final = decode_loop(
        model,
        lengths,
        not_done,
        body,
        TokenState(
            step=tf.constant(0),
            token=tf.fill([batch], tf.cast(bos_id, tf.int32)),
            history=empty_history([batch], max_length, source_ids, attention_layer),
            finished=tf.zeros([batch], tf.bool),
            score=tf.zeros([batch], tf.float32),
            cache=model.initial_cache(state, lengths[0]),
            phrases=() if rules.phrase_ids is None else start(rules.phrase_ids),
        ),
    )
    return final.history["tokens"], final.score, final.history["attention"]


def cache_lengths(model, max_length):
    """The cache sizes a search decodes with, one `tf.while_loop` each.

    `max_length`, halved while the half holds at least
    `SMALLEST_CACHE_LENGTH` (16) positions: a `StepModel` whose
    `grows_cache` is True starts with the smallest and doubles it each time
    it is full, so a step attends over at most twice the positions written
    so far (or 16) instead of all `max_length`. Real outputs are short, so
    most batches end in the first one or two caches, faster than in one
    cache of 64 or more (figures in docs/design/decoding-cache.md); each
    size compiles one more XLA loop, a few seconds once per process. Other
    models decode with one cache of `max_length`.

    Args:
        model: an object with the step interface.
        max_length: most tokens the search generates.

    Returns:
        A list of increasing Python ints ending with `max_length`.

    Examples:
        >>> cache_lengths(transformer, 80)
        [20, 40, 80]
    """
    lengths = [max_length]
    if not (isinstance(model, StepModel) and model.grows_cache):
        return lengths
    while lengths[0] // 2 >= SMALLEST_CACHE_LENGTH:
        lengths.insert(0, lengths[0] // 2)
    return lengths


def decode_loop(model, lengths, not_done, body, state):
    """`tf.while_loop(not_done, body, state)` with a cache that grows.

    `state` is a named tuple with a `step` and the model's `cache`, of
    `lengths[0]` positions. The loop over steps runs in one `tf.while_loop`
    per cache length: when the cache is full, `model.grow_cache` gives it
    the next length of `lengths` (`cache_lengths`) and the next loop goes on
    from the same step. A loop whose `not_done` is already false runs no
    step. With several lengths, `body` is traced once, for a cache of any
    length (`one_step_for_every_length`), not once per loop.

    Returns:
        The state after the last step.
    """
    if len(lengths) > 1:
        body = one_step_for_every_length(model, body, state, lengths[-1])
    for index, length in enumerate(lengths):
        if index > 0:
            state = state._replace(cache=model.grow_cache(state.cache, length))

        def in_cache(s, length=length):
            return (s.step < length) & not_done(s)

        (state,) = tf.while_loop(in_cache, lambda s: (body(s),), (state,))
    return state


def one_step_for_every_length(model, body, state, longest):
    """`body` as one `tf.function`, traced once for a cache of any length.

    The loop state's shapes are those of `state`, but for the dimensions a
    cache of `longest` positions changes, which the function leaves open; the
    step it returns has the shapes of the state it is given, as a
    `tf.while_loop` requires.
    """
    grow = tf.function(lambda cache: model.grow_cache(cache, longest), autograph=False)
    grown_cache = grow.get_concrete_function(type_specs(state.cache)).structured_outputs
    specs = tf.nest.map_structure(
        lambda spec, grown: spec.most_specific_common_supertype([grown]),
        type_specs(state),
        type_specs(state._replace(cache=grown_cache)),
    )
    step = tf.function(body, input_signature=[specs], autograph=False)

    def step_keeping_shapes(s):
        return tf.nest.map_structure(lambda new, old: tf.ensure_shape(new, old.shape), step(s), s)

    return step_keeping_shapes


def type_specs(structure):
    """The `tf.TypeSpec` of every tensor of a nested structure."""
    return tf.nest.map_structure(tf.type_spec_from_value, structure)


def empty_history(shape, max_length, source_ids, attention_layer):
    """Tokens `(*shape, L)` and attention `(*shape, L, S)` (S = 0 if not asked for), zero."""
    source_length = 0 if attention_layer is None else tf.shape(source_ids)[1]
    return {
        "tokens": tf.zeros([*shape, max_length], tf.int32),
        "attention": tf.zeros([*shape, max_length, source_length]),
    }


def write_step(history, step, new, axis):
    """Each `history[key]` with `new[key]` written at `step` of its length axis `axis`."""

    def write(sequences, values):
        length = tf.shape(sequences)[axis]
        at_step = tf.one_hot(step, length, on_value=True, off_value=False, dtype=tf.bool)
        at_step = tf.reshape(at_step, [-1] + [1] * (sequences.shape.rank - axis - 1))
        return tf.where(at_step, tf.expand_dims(values, axis), sequences)

    return {key: write(history[key], new[key]) for key in history}


def take(history, index):
    """Rows `index` `(B, N)` of every `history[key]` `(B, M, ...)`: `(B, N, ...)`."""
    return {key: tf.gather(value, index, batch_dims=1) for key, value in history.items()}


def join(first, second):
    """`first` and `second` histories side by side on the hypothesis axis."""
    return {key: tf.concat([first[key], second[key]], axis=1) for key in first}
