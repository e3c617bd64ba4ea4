"""Lexically constrained decoding: target phrases that every output must contain.

Each sentence may carry up to C phrases of up to T tokens, `constraint_ids`
`(B, C, T)`, 0-padded (a row of zeros is no phrase). A phrase is met when
its tokens occur in the output as one contiguous run. The searches apply two
rules (`inference.rules`): a hypothesis may take EOS only once every phrase
is met, and when the tokens it still needs fill the room left before its
limit, it may only go on with a phrase, the one furthest along (any of them
on a tie). Beam search also keeps hypotheses that have met more of their
phrases in its beam (`allocate`), as Dynamic Beam Allocation does (Post and
Vilar, 2018). Greedy search and sampling, which keep one hypothesis, write
the phrase furthest along where the model would end, and go on with a phrase
once started (`rules.Rules.eager_phrases`).

Given the target vocabulary's `continues_word` (`Tokenizer.continues_word`),
no piece that continues a word may follow a phrase, so a phrase is written
as whole words: "▁hair" is not met by "▁hair" "ed". (This holds for every
occurrence of a phrase after the prefix.)

Each hypothesis carries how far it is with each phrase as loop state
(`PhraseState`: the phrases met, and which suffixes of its tokens start a
phrase), advanced by the token it takes (`advance`) and gathered with the
hypotheses beam search keeps (`reorder`), as fairseq's `ConstraintState`
is: a step costs the same whatever the output's length.

Tokens still needed are counted as if the unmet phrases were written one
after another, the one in progress first. That is exact unless the end of
one phrase is the start of another (then an output can meet both in fewer
tokens, and near the limit the searches do not look for it).
"""

from typing import NamedTuple

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.probabilities import MINUS_INF


class PhraseState(NamedTuple):
    """How far N hypotheses are with their phrases: the loop state a search carries.

    Each step advances it by the token a hypothesis takes (`advance`), and
    beam search gathers it with the hypotheses it keeps; nothing is
    recomputed from the tokens written before.

    Attributes:
        met: bool `(N, C)`, phrases that occur in the tokens so far (False
            for no phrase).
        suffix: bool `(N, C, T + 1)`: `suffix[..., j]`, the last j tokens are
            the phrase's first j (always True for j = 0).
    """

    met: object
    suffix: object


class Progress(NamedTuple):
    """A `PhraseState` with what the rules read from it (`progress`).

    Attributes:
        met: bool `(N, C)`, as in `PhraseState`.
        suffix: bool `(N, C, T + 1)`, as in `PhraseState`.
        progress: int32 `(N, C)`, the longest j with `suffix[..., j]` below
            the phrase's length: the tokens of the phrase under way.
        needed: int32 `(N,)`, the tokens still needed (`tokens_still_needed`).
        all_met: bool `(N,)`.
    """

    met: object
    suffix: object
    progress: object
    needed: object
    all_met: object


def phrase_lengths(constraint_ids):
    """Tokens of each phrase of `constraint_ids` `(B, C, T)`: int32 `(B, C)`."""
    return tf.reduce_sum(tf.cast(constraint_ids != PAD_ID, tf.int32), axis=-1)


def check_fit(constraint_ids, prefix_ids, max_length):
    """Eagerly, an `ArgumentError` naming the first sentence whose phrases (after its
    prefix) cannot fit in `max_length` tokens with EOS; in a graph, nothing."""
    total = tf.reduce_sum(phrase_lengths(constraint_ids), axis=1)  # (B,)
    if prefix_ids is not None:
        total += tf.reduce_sum(tf.cast(prefix_ids != PAD_ID, tf.int32), axis=1)
    total = tf.get_static_value(total)
    if total is None:
        return
    for sentence, tokens in enumerate(total):
        if tokens + 1 > max_length:
            raise ArgumentError(
                f"The constraints of sentence {sentence} need {tokens} tokens (its prefix "
                f"included) and EOS, more than max_length={max_length}. Shorten them or raise "
                "max_length."
            )


def start(phrase_ids):
    """The `PhraseState` of N hypotheses with phrases `phrase_ids` `(N, C, T)` and no
    token written yet."""
    shape = tf.shape(phrase_ids)
    width = shape[2]
    first = tf.range(width + 1) == 0  # (T + 1,) only the empty suffix matches
    return PhraseState(
        met=tf.zeros(shape[:2], tf.bool),
        suffix=tf.broadcast_to(first, [shape[0], shape[1], width + 1]),
    )


def advance(state, phrase_ids, lengths, token):
    """The `PhraseState` after each of N hypotheses takes its `token` `(N,)`.

    A suffix of j tokens that starts a phrase grows to j + 1 where the
    phrase's token j is `token`; a phrase is met once a suffix is all of it.

    Args:
        state: the `PhraseState` before the step.
        phrase_ids: int32 `(N, C, T)`.
        lengths: int32 `(N, C)`, the phrases' lengths (`phrase_lengths`).
        token: int32 `(N,)`.
    """
    longer = state.suffix[..., :-1] & (phrase_ids == token[:, None, None])  # (N, C, T)
    suffix = tf.concat([tf.ones_like(longer[..., :1]), longer], axis=-1)  # (N, C, T + 1)
    whole = tf.gather(suffix, lengths, batch_dims=2) & (lengths > 0)  # (N, C)
    return PhraseState(state.met | whole, suffix)


def progress_of(state, lengths):
    """The `Progress` of a `PhraseState` whose phrases have `lengths` `(N, C)`."""
    width = tf.shape(state.suffix)[-1]
    proper = state.suffix & (tf.range(width) < lengths[:, :, None])  # shorter than the phrase
    under_way = tf.reduce_max(tf.where(proper, tf.range(width), 0), axis=-1)  # (N, C)
    unmet = (lengths > 0) & ~state.met
    needed = tokens_still_needed(state.met, under_way, lengths)
    return Progress(state.met, state.suffix, under_way, needed, ~tf.reduce_any(unmet, axis=1))


def reorder(state, rows, phrase_ids, lengths, token):
    """The `PhraseState` of hypotheses that extend `rows` `(N,)` of `state` by `token`
    `(N,)` (beam search's survivors and their parents)."""
    parents = PhraseState(*(tf.gather(t, rows) for t in state))
    return advance(parents, phrase_ids, lengths, token)


def next_tokens(phrase_ids, lengths, state):
    """Each unmet phrase's next token `(N, C)`, and whether it is among the phrases
    furthest along (the ones to go on with when there is no room for others)."""
    unmet = (lengths > 0) & ~state.met
    token = tf.gather(
        phrase_ids, tf.minimum(state.progress, tf.shape(phrase_ids)[-1] - 1), batch_dims=2
    )
    best = tf.reduce_max(tf.where(unmet, state.progress, 0), axis=1)
    furthest = unmet & (state.progress == best[:, None])
    return tf.where(unmet, token, -1), furthest


def extended(state, phrase_ids, lengths, token):
    """`(met, progress)` `(..., C)` of outputs extended by `token` `(...)`.

    `state` (its `met` `(..., C)` and `suffix` `(..., C, T + 1)`),
    `phrase_ids` `(..., C, T)` and `lengths` `(..., C)` broadcast against
    `token`: a match of j tokens goes on to j + 1 where the phrase's token j
    is `token`.
    """
    width = tf.shape(phrase_ids)[-1]
    longer = state.suffix[..., :width] & (phrase_ids == token[..., None, None])  # (..., C, T)
    matched = tf.range(1, width + 1)  # (T,) tokens matched after the step
    met = state.met | tf.reduce_any(longer & (matched == lengths[..., None]), axis=-1)
    progress = tf.reduce_max(tf.where(longer & (matched < lengths[..., None]), matched, 0), -1)
    return met, progress


def ends_with_phrase(state, lengths):
    """Rows whose tokens end with one of their phrases: bool `(N,)` from a
    `Progress` and the phrases' `lengths` `(N, C)`."""
    whole = tf.gather(state.suffix, lengths, batch_dims=2)  # (N, C)
    return tf.reduce_any(whole & (lengths > 0), axis=1)


def tokens_still_needed(met, progress, lengths):
    """Tokens that unmet phrases need, written one after another, the one furthest
    along first: int32 `(...)` from `met`, `progress`, `lengths` `(..., C)`."""
    unmet = (lengths > 0) & ~met
    full = tf.reduce_sum(tf.where(unmet, lengths, 0), axis=-1)
    return full - tf.reduce_max(tf.where(unmet, progress, 0), axis=-1)


def constraint_log_probs(restricted, step, state, phrase_ids, lengths, limits, must_end, eos_id):
    """`restricted` `(N, V)` with EOS at -inf until every phrase is met, and at -inf
    every token after which the phrases still needed no longer fit before the limit
    (and the EOS due there, for rows that `must_end`)."""
    vocab = tf.shape(restricted)[-1]
    token = tf.range(vocab)[None, :]
    room = limits - 1 - step - tf.cast(must_end, tf.int32)  # tokens left after this one
    candidates = tf.reshape(phrase_ids, [tf.shape(phrase_ids)[0], -1])  # (N, C*T)
    met, progress = extended(
        tf.nest.map_structure(lambda t: t[:, None], state),
        phrase_ids[:, None],
        lengths[:, None],
        candidates,
    )  # (N, C*T, C)
    fits = tokens_still_needed(met, progress, lengths[:, None]) <= room[:, None]  # (N, C*T)
    candidates = tf.where(candidates != PAD_ID, candidates, -1)
    unmet = (lengths > 0) & ~state.met
    others_fit = tf.reduce_sum(tf.where(unmet, lengths, 0), axis=1) <= room  # (N,)
    # (a token of no phrase undoes every phrase's progress)
    allowed = tf.where(
        token_mask(candidates, vocab),
        token_mask(tf.where(fits, candidates, -1), vocab),
        others_fit[:, None],
    )  # (N, V)
    allowed &= (token != eos_id) | state.all_met[:, None]
    return tf.where(allowed, restricted, MINUS_INF)


def token_mask(token_ids, vocab):
    """bool `(N, V)`, True at each row's `token_ids` `(N, K)` (negative ids ignored)."""
    rows, k = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    row = tf.broadcast_to(tf.range(rows)[:, None], [rows, k])
    valid = token_ids >= 0
    indices = tf.stack([row, tf.maximum(token_ids, 0)], axis=-1)  # (N, K, 2)
    counts = tf.scatter_nd(indices, tf.cast(valid, tf.int32), [rows, vocab])
    return counts > 0


def met_tokens_after(state, phrase_ids, lengths, parent, token):
    """Constraint tokens met by candidates `(B, P)`: `parent` hypotheses' outputs
    (rows of the `(B*k, ...)` `PhraseState` `state`) extended by `token`: int32 `(B, P)`.

    A phrase met counts its length; of the unmet ones, the one furthest along
    counts its progress.
    """
    parents = PhraseState(tf.gather(state.met, parent), tf.gather(state.suffix, parent))
    length = tf.gather(lengths, parent)  # (B, P, C)
    met, progress = extended(parents, tf.gather(phrase_ids, parent), length, token)
    done = tf.reduce_sum(tf.where(met, length, 0), axis=-1)
    return done + tf.reduce_max(tf.where(met | (length == 0), 0, progress), axis=-1)


def allocate(logp, met_tokens, total, k):
    """The k candidates of each sentence to keep alive, Dynamic Beam Allocation's way.

    Candidates are banked by the constraint tokens they have met (0 to the
    sentence's `total`); each bank first gets k // (total + 1) places, the
    remaining places going to the banks furthest along, and places a bank
    cannot fill go to the best other candidates.

    Args:
        logp: float32 `(B, P)`, the candidates' log P (-inf: none).
        met_tokens: int32 `(B, P)`, their banks.
        total: int32 `(B,)`, each sentence's constraint tokens.
        k: the beam size.

    Returns:
        int32 `(B, k)`, indices of the chosen candidates, best first.
    """
    banks = total + 1  # (B,)
    bank = tf.minimum(met_tokens, total[:, None])  # (B, P)
    quota = k // banks[:, None] + tf.cast(bank >= banks[:, None] - k % banks[:, None], tf.int32)
    count = tf.shape(logp)[1]
    order = tf.range(count)
    better = (logp[:, None, :] > logp[:, :, None]) | (
        (logp[:, None, :] == logp[:, :, None]) & (order[None, :] < order[:, None])
    )  # (B, P, P): candidate j ranks before candidate i
    same_bank = bank[:, None, :] == bank[:, :, None]
    rank = tf.reduce_sum(tf.cast(better & same_bank, tf.int32), axis=-1)  # (B, P)
    first = (rank < quota) & (logp > MINUS_INF)
    by_score = tf.argsort(logp, axis=-1, direction="DESCENDING", stable=True)
    firsts = tf.gather(tf.cast(first, tf.int32), by_score, batch_dims=1)
    chosen = tf.gather(
        by_score, tf.argsort(firsts, direction="DESCENDING", stable=True)[:, :k], batch_dims=1
    )  # (B, k): first-pass places, then the best others
    _, best_first = tf.math.top_k(tf.gather(logp, chosen, batch_dims=1), k)
    return tf.gather(chosen, best_first, batch_dims=1)


def beams_with_phrases(log_probs, alive_logp, top, rules, state):
    """The k hypotheses of each sentence that live on, in a search with phrases to meet.

    The candidates are the search's best extensions `top` and, for each live
    hypothesis, the next token of each of its unmet phrases (so that a
    hypothesis can start or go on with a phrase even when the model does not
    rank it high); `allocate` chooses among those that do not end.

    Args:
        log_probs: float32 `(B*k, V)`, the step's log-probabilities after the rules.
        alive_logp: float32 `(B, k)`, log P of the live hypotheses.
        top: `(logp, beam, token)`, each `(B, M)`: the best extensions.
        rules: the search's `Rules`, with each hypothesis' phrases
            (`phrase_ids` `(B*k, C, T)`, `phrase_lengths` `(B*k, C)`) and the
            id that ends a hypothesis.
        state: the hypotheses' `Progress` with their phrases.

    Returns:
        `(logp, beam, token)`, each `(B, k)`, best first.
    """
    batch, k = tf.shape(alive_logp)[0], alive_logp.shape[1]
    phrase_ids, lengths, eos_id = rules.phrase_ids, rules.phrase_lengths, rules.eos_id
    upcoming, _ = next_tokens(phrase_ids, lengths, state)  # (B*k, C), -1 for none
    phrase_logp = tf.gather(log_probs, tf.maximum(upcoming, 0), batch_dims=1)  # (B*k, C)
    phrase_logp = tf.where(upcoming >= 0, tf.reshape(alive_logp, [-1, 1]) + phrase_logp, MINUS_INF)
    phrase_beam = tf.broadcast_to(tf.range(k)[:, None], [k, tf.shape(upcoming)[1]])  # (k, C)
    logp = tf.concat([top[0], tf.reshape(phrase_logp, [batch, -1])], axis=1)  # (B, P)
    beam = tf.concat([top[1], tf.tile(tf.reshape(phrase_beam, [1, -1]), [batch, 1])], axis=1)
    token = tf.concat([top[2], tf.reshape(upcoming, [batch, -1])], axis=1)
    count = tf.shape(logp)[1]
    same = (beam[:, :, None] == beam[:, None, :]) & (token[:, :, None] == token[:, None, :])
    earlier = tf.range(count)[None, :] < tf.range(count)[:, None]  # (P, P): j before i
    repeated = tf.reduce_any(same & earlier, axis=-1)  # a candidate listed twice
    logp = tf.where(repeated | (token == eos_id), MINUS_INF, logp)
    rows = beam + tf.range(batch)[:, None] * k  # (B, P) the parents' rows
    met = met_tokens_after(state, phrase_ids, lengths, rows, token)
    total = tf.reshape(tf.reduce_sum(lengths, axis=1), [batch, k])[:, 0]
    chosen = allocate(logp, met, total, k)  # (B, k)
    return tuple(tf.gather(t, chosen, batch_dims=1) for t in (logp, beam, token))
