"""What a search may generate at a step besides the model's choice: target prefixes,
length limits, repeated n-grams, and empty sources.

Every search builds one `Rules` for its rows (`make_rules`) and applies it to
each step's log-probabilities (`apply_rules`). A rule only takes tokens
away (their log-probability becomes -inf); the tokens it leaves keep the
model's log-probability, so scores are the model's own. With the defaults
no rule adds an op to the search's graph except the one for empty sources.
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.checks import check_continues_word
from keras_transformer.inference.constraints import (
    check_fit,
    constraint_log_probs,
    ends_with_phrase,
    next_tokens,
    phrase_lengths,
    progress_of,
)
from keras_transformer.inference.probabilities import MINUS_INF


class Rules(NamedTuple):
    """The rules of one search over N rows (hypotheses).

    Attributes:
        prefix_ids: int32 `(N, P + 1)` ending in a padding column, or None:
            a row inside its prefix takes the prefix's token.
        limits: int32 `(N,)`, the most tokens of each row's output, EOS
            included.
        must_end: bool `(N,)`, rows that take EOS at their limit: those
            whose limit is below `max_length`, and empty sources. At
            `max_length` other outputs may stop without EOS, as they always
            have.
        eos_id: id that ends an output.
        min_length: Python int, the fewest tokens before EOS.
        no_repeat_ngram_size: Python int; n > 0 forbids any n-gram to occur
            twice in an output.
        phrase_ids: int32 `(N, C, T)`, phrases each output must contain
            (`inference.constraints`), or None.
        continues_word: bool `(V,)`, the target pieces that go on with the
            word before them (`Tokenizer.continues_word`), or None: with
            phrases, none of them may follow a phrase's last token.
        eager_phrases: Python bool, True for searches of one hypothesis per
            sentence (greedy, sampling): a row with unmet phrases takes the
            next token of the phrase furthest along where EOS is its most
            likely token, and goes on with a phrase once started.
        phrase_lengths: int32 `(N, C)`, the tokens of each phrase of
            `phrase_ids` (counted once, read at every step), or None.
    """

    prefix_ids: object
    limits: object
    must_end: object
    eos_id: int
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    phrase_ids: object = None
    continues_word: object = None
    eager_phrases: bool = False
    phrase_lengths: object = None


def is_empty_source(source_ids, eos_id, prefix_length=0):
    """Rows of `source_ids` `(B, S)` with no token but padding and `eos_id` after their
    first `prefix_length`: bool `(B,)`.

    The package's tokenizers write an empty or whitespace-only sentence as
    the source [EOS], after the prefix every source starts with (a
    target-language token) if the model takes one.

    Examples:
        >>> source_ids = tf.constant([[9, 3, 0], [9, 5, 3]])
        >>> is_empty_source(source_ids, eos_id=3, prefix_length=1).numpy().tolist()
        [True, False]
    """
    rest = source_ids[:, prefix_length:]  # (B, S - prefix_length)
    return tf.reduce_all((rest == PAD_ID) | (rest == eos_id), axis=1)


def output_limits(max_length, length_options, source_lengths, forced_lengths, empty=None):
    """The most tokens, EOS included, of each output: int32 `(B,)`, the one length rule of
    every engine (the searches, and the CTranslate2 runtime, eagerly on its sentences).

    `floor(max_length_a * source tokens + max_length_b)` (`max_length_b` None:
    `max_length`), at least the forced tokens plus EOS, within `[1, max_length]`;
    an empty source's limit is its forced tokens plus EOS.

    Args:
        max_length: the most tokens of any output.
        length_options: the search's `LengthOptions`.
        source_lengths: int `(B,)`, source tokens with EOS.
        forced_lengths: int `(B,)`, tokens of each output's prefix and phrases.
        empty: optional bool `(B,)`, the empty sources.

    Examples:
        >>> rule = LengthOptions(max_length_a=1.5, max_length_b=2)
        >>> output_limits(64, rule, [3, 40], [0, 0]).numpy().tolist()
        [6, 62]
    """
    b = max_length if length_options.max_length_b is None else length_options.max_length_b
    source = tf.cast(source_lengths, tf.float32)
    limits = tf.cast(tf.floor(length_options.max_length_a * source + b), tf.int32)  # (B,)
    if empty is not None:
        limits = tf.where(empty, 0, limits)
    forced = tf.cast(forced_lengths, tf.int32)
    return tf.clip_by_value(tf.maximum(limits, forced + 1), 1, max_length)  # (B,)


def make_rules(
    source_ids,
    prefix_ids,
    options,
    target,
    rows_per_sentence=1,
    constraint_ids=None,
    eager_phrases=False,
):
    """The `Rules` of a search over `source_ids` `(B, S)`, `rows_per_sentence` rows each.

    Each row's limit is the length limit of `options`, at least its prefix's
    and its phrases' lengths plus one; an empty source (`is_empty_source`)
    has the limit of its prefix and phrases alone, so that without them its
    output is EOS at once.

    Args:
        source_ids: int `(B, S)`, 0-padded.
        prefix_ids: int32 `(B, P + 1)` from `check_prefix_ids`, or None.
        options: the search's `DecodeOptions` (`max_length` and the length
            options).
        target: the search's `TargetSide`: the ids that end an output and
            a source, and with `constraint_ids` the pieces that continue a
            word (checked here).
        rows_per_sentence: hypotheses per sentence (beam search's k).
        constraint_ids: int32 `(B, C, T)` from `check_constraint_ids`, or None.
        eager_phrases: `Rules.eager_phrases`, for searches of one hypothesis
            per sentence.
    """
    max_length, length_options = options.max_length, options.length_options
    source_length = tf.reduce_sum(tf.cast(source_ids != PAD_ID, tf.int32), axis=1)  # (B,)
    forced_length = tf.zeros_like(source_length)  # tokens of the prefix and the phrases
    if prefix_ids is not None:
        forced_length = tf.reduce_sum(tf.cast(prefix_ids != PAD_ID, tf.int32), axis=1)
    if constraint_ids is not None:
        check_fit(constraint_ids, prefix_ids, max_length)
        forced_length += tf.reduce_sum(phrase_lengths(constraint_ids), axis=1)
    empty = is_empty_source(source_ids, target.source_end, target.source_prefix_length)
    limits = output_limits(max_length, length_options, source_length, forced_length, empty)
    must_end = (limits < max_length) | empty
    if rows_per_sentence > 1:
        limits, must_end, prefix_ids, constraint_ids = (
            None if t is None else tf.repeat(t, rows_per_sentence, axis=0)
            for t in (limits, must_end, prefix_ids, constraint_ids)
        )
    return Rules(
        prefix_ids,
        limits,
        must_end,
        target.eos_id,
        length_options.min_length,
        length_options.no_repeat_ngram_size,
        constraint_ids,
        None if constraint_ids is None else check_continues_word(target.continues_word),
        eager_phrases,
        None if constraint_ids is None else phrase_lengths(constraint_ids),
    )


def apply_rules(log_probs, step, rules, tokens=None, phrases=None):
    """`log_probs` `(N, V)` of position `step` with the tokens `rules` forbid at -inf.

    In order of precedence: a row inside its prefix takes the prefix's
    token; a row at its limit that must end there takes EOS; a row with
    phrases to meet follows `inference.constraints` (with the
    `Rules.eager_phrases` of greedy search and sampling, and never a piece
    that `Rules.continues_word` right after a phrase); otherwise EOS waits
    for `min_length` tokens, and no token may complete an n-gram the row's
    `tokens` `(N, L)` (written up to `step`) already hold; a row these rules
    leave without any token takes EOS (or, with phrases to meet, the next
    token of the one furthest along). With `Rules.phrase_ids`, `phrases` is
    the rows' `constraints.PhraseState`.
    """
    token = tf.range(tf.shape(log_probs)[-1])[None, :]  # (1, V)
    restricted = log_probs
    if rules.no_repeat_ngram_size > 0:
        repeated = repeated_ngram_tokens(tokens, step, rules.no_repeat_ngram_size, log_probs)
        restricted = tf.where(repeated, MINUS_INF, restricted)
    if rules.min_length > 0:
        early_eos = (token == rules.eos_id) & (step < rules.min_length)  # (1, V)
        restricted = tf.where(early_eos, MINUS_INF, restricted)
    way_out = rules.eos_id  # for a row that the rules leave without a token
    if rules.phrase_ids is not None:
        lengths = rules.phrase_lengths
        progress = progress_of(phrases, lengths)
        before_phrases = restricted
        if rules.continues_word is not None:
            check_vocab_size(rules.continues_word, log_probs)
            glued = ends_with_phrase(progress, lengths)[:, None] & rules.continues_word[None, :]
            restricted = tf.where(glued, MINUS_INF, restricted)
        restricted = constraint_log_probs(
            restricted,
            step,
            progress,
            rules.phrase_ids,
            lengths,
            rules.limits,
            rules.must_end,
            rules.eos_id,
        )
        upcoming, furthest = next_tokens(rules.phrase_ids, lengths, progress)
        first_furthest = tf.gather(upcoming, tf.argmax(furthest, axis=1), batch_dims=1)
        way_out = tf.where(progress.all_met, rules.eos_id, first_furthest)[:, None]
        if rules.eager_phrases:
            started = tf.reduce_any(furthest & (progress.progress > 0), axis=1)  # (N,)
            most_likely = tf.argmax(before_phrases, axis=-1, output_type=tf.int32)  # (N,)
            eager = ~progress.all_met & (started | (most_likely == rules.eos_id))
            restricted = tf.where(eager[:, None], only(log_probs, way_out), restricted)
    if rules.min_length > 0 or rules.no_repeat_ngram_size > 0 or rules.phrase_ids is not None:
        stuck = tf.reduce_all(restricted == MINUS_INF, axis=-1)  # (N,) no token is left
        restricted = tf.where(stuck[:, None], only(log_probs, way_out), restricted)
    at_limit = (step + 1 >= rules.limits) & rules.must_end  # (N,)
    restricted = tf.where(at_limit[:, None], only(log_probs, rules.eos_id), restricted)
    if rules.prefix_ids is not None:
        last = tf.shape(rules.prefix_ids)[1] - 1  # a padding column
        forced = tf.gather(rules.prefix_ids, tf.minimum(step, last), axis=1)  # (N,)
        restricted = tf.where(
            (forced != PAD_ID)[:, None], only(log_probs, forced[:, None]), restricted
        )
    return restricted


def check_vocab_size(continues_word, log_probs):
    """An `ArgumentError` if `continues_word` `(V,)` is known not to match the model's V."""
    given, vocab = continues_word.shape[0], log_probs.shape[-1]
    if None not in (given, vocab) and given != vocab:
        raise ArgumentError(
            f"`continues_word` has {given} entries, but the model's target vocabulary has "
            f"{vocab} pieces. Pass the target tokenizer's `continues_word`."
        )


def only(log_probs, token_id):
    """`log_probs` `(N, V)` with every token but `token_id` (scalar or `(N, 1)`) at -inf."""
    token = tf.range(tf.shape(log_probs)[-1])[None, :]  # (1, V)
    return tf.where(token == token_id, log_probs, MINUS_INF)


def rotated_left(tokens, shift):
    """`tokens` `(N, L)` rotated `shift` places to the left: `tf.roll(tokens, -shift, axis=1)`
    as two slices and a concatenation, which LiteRT has as built-in ops (it has no Roll)."""
    return tf.concat([tokens[:, shift:], tokens[:, :shift]], axis=1)  # (N, L)


def repeated_ngram_tokens(tokens, step, n, log_probs):
    """The tokens that would repeat an n-gram of `tokens` `(N, L)` at `step`: bool `(N, V)`.

    Position `step` repeats an n-gram when its n - 1 previous tokens equal
    the first n - 1 tokens of an n-gram that starts at some j with
    j + n - 1 < step; it may then not take that n-gram's last token.
    """
    rows, length = tf.shape(tokens)[0], tf.shape(tokens)[1]
    start = tf.range(length)  # (L,) where an earlier n-gram starts
    matches = start[None, :] + n - 1 < step  # (1, L) the n-gram lies before `step`
    for offset in range(n - 1):
        earlier = rotated_left(tokens, offset)  # (N, L): tokens[j + offset] at j
        recent = tf.gather(tokens, tf.maximum(step - (n - 1) + offset, 0), axis=1)  # (N,)
        matches &= earlier == recent[:, None]
    following = rotated_left(tokens, n - 1)  # (N, L): the n-gram's last token
    row = tf.broadcast_to(tf.range(rows)[:, None], [rows, length])
    indices = tf.stack([tf.reshape(row, [-1]), tf.reshape(following, [-1])], axis=1)
    hits = tf.reshape(tf.cast(tf.broadcast_to(matches, [rows, length]), tf.int32), [-1])
    counts = tf.scatter_nd(indices, hits, tf.shape(log_probs))  # (N, V)
    return counts > 0  # (N, V)
