"""Beam search: the `beam_size` best hypotheses of each sentence kept at every step.

The stopping rule and how it compares with other toolkits' are explained in
the documentation (docs/design/beam-search.md); `beam_search` states the contract.
"""

import dataclasses
from typing import NamedTuple

import tensorflow as tf

from keras_transformer.inference.adapters import as_step_model
from keras_transformer.inference.checks import (
    check_constraint_ids,
    check_prefix_ids,
    check_source_ids,
)
from keras_transformer.inference.constraints import (
    beams_with_phrases,
    progress_of,
    reorder,
    start,
)
from keras_transformer.inference.defaults import ALPHA, BEAM_SIZE, LENGTH_PENALTY, MAX_LENGTH
from keras_transformer.inference.loop import (
    cache_lengths,
    decode_loop,
    empty_history,
    join,
    next_log_probs,
    take,
    write_step,
)
from keras_transformer.inference.options import DecodeOptions, lengths_of
from keras_transformer.inference.probabilities import MINUS_INF, length_penalty
from keras_transformer.inference.result import TargetSide, from_scores
from keras_transformer.inference.rules import apply_rules, make_rules
from keras_transformer.inference.top_k import top_k_by_blocks
from keras_transformer.validation import check_tensorflow_backend


class BeamState(NamedTuple):
    """The loop state of beam search over B sentences of k hypotheses.

    Attributes:
        step: scalar int32, the position being decoded.
        alive: the live hypotheses' history, `{"tokens": (B, k, L),
            "attention": (B, k, L, S)}`.
        alive_logp: float32 `(B, k)`, their log P so far.
        finished: the history of the k best finished hypotheses.
        finished_score: float32 `(B, k)`, their normalized scores, best first
            (-inf for empty places).
        ended: int32 `(B,)`, hypotheses of each sentence that have ended so
            far (counted for `patience`).
        done: bool `(B,)`, sentences whose search is over.
        cache: the model's cache.
        phrases: the live hypotheses' `constraints.PhraseState` (B*k rows),
            or `()` without phrases to meet.
    """

    step: object
    alive: dict
    alive_logp: object
    finished: dict
    finished_score: object
    ended: object
    done: object
    cache: object
    phrases: object = ()


def best_extensions(log_probs, alive_logp, n):
    """The `n` most probable one-token extensions of each sentence's hypotheses.

    The n best of all k * V extensions of a sentence are among the n best
    tokens of each of its hypotheses, so the search ranks k * n candidates
    instead of k * V (in the same order, ties to the lower beam, then to
    the lower token, as one ranking of all k * V would give).

    Args:
        log_probs: float32 `(B*k, V)`, log p(next token) of each hypothesis.
        alive_logp: float32 `(B, k)`, log P of each hypothesis so far.
        n: extensions to keep per sentence.

    Returns:
        `(logp, beam, token)`, each `(B, n)`, best first: the extension's
        log P, the index of the hypothesis it extends and its token.
    """
    batch, k = tf.shape(alive_logp)[0], alive_logp.shape[1]
    per_beam = min(n, log_probs.shape[-1] or n)  # a vocabulary can be smaller than n
    beam_logp, beam_token = top_k_by_blocks(log_probs, per_beam)  # (B*k, n)
    candidates = alive_logp[:, :, None] + tf.reshape(beam_logp, [batch, k, per_beam])
    logp, index = tf.math.top_k(tf.reshape(candidates, [batch, k * per_beam]), n)  # (B, n)
    token = tf.gather(tf.reshape(beam_token, [batch, k * per_beam]), index, batch_dims=1)
    return logp, index // per_beam, token


def beam_search(
    model,
    source_ids,
    bos_id,
    eos_id,
    max_length=MAX_LENGTH,
    beam_size=BEAM_SIZE,
    alpha=ALPHA,
    prefix_ids=None,
    n_best=None,
    attention_layer=None,
    length_options=None,
    constraint_ids=None,
    continues_word=None,
    patience=None,
    length_penalty=LENGTH_PENALTY,
):
    """Keeps the `beam_size` best hypotheses per sentence at every step.

    A finished hypothesis Y scores log P(Y | X) / length_penalty(|Y|, alpha)
    (GNMT's, or the average's), |Y| counting EOS. Each step extends the k live hypotheses of a
    sentence and takes the 2k most probable extensions: those among the
    first k that end in EOS join a pool of the k best finished hypotheses,
    and the k best that do not end stay alive.

    A sentence is done as soon as its output is certain: when no live
    hypothesis can still beat the N-th best of its finished ones (N =
    `n_best`, 1 by default) under the most favourable length penalty still
    ahead. The output is then the one the search would return if it went on
    to `max_length`. A sentence with fewer than N finished hypotheses at
    `max_length` takes its live hypotheses as they are. With `beam_size=1`
    and `alpha=0` this is greedy search exactly.

    With `patience` p, a sentence also stops once p * beam_size (or more) of
    its hypotheses have ended (Kasai et al., 2022; CTranslate2's `patience`,
    fairseq's rule for p = 1): sooner, but the best output may still have
    been live (docs/design/beam-search.md).

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface (see `greedy_search`).
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        beam_size: hypotheses kept per sentence, k.
        alpha: strength of the length penalty; 0 ranks by log-probability,
            negative values favour short outputs.
        prefix_ids: optional int `(B, P)`, 0-padded: each output starts
            with its row.
        n_best: None for the best hypothesis only; N (at most `beam_size`)
            for the N best of each sentence, best first.
        attention_layer: optional index of a decoder layer: also return each
            output's cross-attention in it (see `greedy_search`).
        length_options: optional `inference.LengthOptions`: length limits
            relative to the source, a minimum length, no repeated n-grams.
            A sentence's limit below `max_length` ends every hypothesis
            with EOS there.
        constraint_ids: optional int `(B, C, T)`, 0-padded: phrases each
            output must contain (`inference.constraints`). Hypotheses finish
            only once they contain every phrase, and the beam keeps places
            for those that have met more of them (Dynamic Beam Allocation).
        continues_word: optional bool `(V,)`, the target pieces that go on
            with the word before them (`Tokenizer.continues_word`): with
            `constraint_ids`, none may follow a phrase, so that phrases are
            written as whole words.
        patience: None (the default) to stop a sentence only when its
            output is certain; a number >= 1 to stop it also once
            `patience * beam_size` of its hypotheses have ended.
        length_penalty: "gnmt", ((5 + |Y|) / 6) ** alpha, or "average",
            |Y| ** alpha (Marian's and CTranslate2's ranking).

    Returns:
        `(token_ids (B, max_length) int32, scores (B,) float32)`: the best
        hypothesis of each sentence and its normalized score; with `n_best`,
        `(B, N, max_length)` and `(B, N)`. A sentence with fewer than N
        hypotheses (a tiny search space) fills the rest with score -inf.
        With `attention_layer`, also the attention `(B[, N], max_length, S)`.

    Examples:
        ```python
        search = tf.function(lambda s: beam_search(model, s, 2, 3, beam_size=4))
        token_ids, scores = search(source_ids)
        ```
    """
    options = DecodeOptions(
        beam_size=beam_size,
        alpha=alpha,
        max_length=max_length,
        n_best=n_best or 1,
        patience=patience,
        length_penalty=length_penalty,
        **lengths_of(length_options),
    )
    search = BeamSearch(options, TargetSide(bos_id, eos_id, continues_word), attention_layer)
    result = search(model, source_ids, prefix_ids, constraint_ids)
    outputs = (result.token_ids, result.scores)
    if attention_layer is not None:
        outputs += (result.attention,)
    if n_best is None:
        return tuple(t[:, 0] for t in outputs)
    return outputs


@dataclasses.dataclass(frozen=True)
class BeamSearch:
    """Beam search as a `Search`: the `beam_size` best hypotheses kept at every step.

    The contract is `beam_search`'s; the result holds the `n_best` best
    outputs of each sentence, best first.

    Args:
        options: the `inference.DecodeOptions` (`beam_size`, `alpha`,
            `n_best`, `patience`, `max_length` and the length options).
        target: the `inference.TargetSide`.
        attention_layer: optional index of a decoder layer whose
            cross-attention the result holds.

    Examples:
        ```python
        search = BeamSearch(DecodeOptions(beam_size=4, n_best=2), TargetSide(2, 3))
        result = search(model, source_ids)  # DecodingResult, N = 2
        ```
    """

    options: DecodeOptions
    target: TargetSide
    attention_layer: int | None = None

    def __call__(self, model, source_ids, prefix_ids=None, constraint_ids=None):
        """The `DecodingResult` of `source_ids` `(B, S)`, optionally from `prefix_ids`
        `(B, P)` and meeting `constraint_ids` `(B, C, T)`; N = `n_best`."""
        check_tensorflow_backend("beam_search")
        k, max_length = self.options.beam_size, self.options.max_length
        model = as_step_model(model)
        source_ids = check_source_ids(source_ids)
        batch = tf.shape(source_ids)[0]
        prefix_ids = check_prefix_ids(prefix_ids, source_ids.shape[0])
        constraint_ids = check_constraint_ids(constraint_ids, source_ids.shape[0])
        rules = make_rules(
            source_ids, prefix_ids, self.options, self.target, k, constraint_ids
        )  # B*k rows
        state = model.encode(source_ids)  # one per sentence, shared by its hypotheses
        lengths = cache_lengths(model, max_length)

        def not_done(s):
            return (s.step < max_length) & ~tf.reduce_all(s.done)

        first_beam_only = tf.concat(
            [tf.zeros([batch, 1]), tf.fill([batch, k - 1], MINUS_INF)], axis=1
        )  # (B, k)
        layer = self.attention_layer
        final = decode_loop(
            model,
            lengths,
            not_done,
            lambda s: self.step(model, s, state, rules),
            BeamState(
                step=tf.constant(0),
                alive=empty_history([batch, k], max_length, source_ids, layer),
                alive_logp=first_beam_only,
                finished=empty_history([batch, k], max_length, source_ids, layer),
                finished_score=tf.fill([batch, k], MINUS_INF),
                ended=tf.zeros([batch], tf.int32),
                done=tf.zeros([batch], tf.bool),
                cache=model.initial_cache(state, lengths[0], beam_size=k),
                phrases=() if rules.phrase_ids is None else start(rules.phrase_ids),
            ),
        )
        return self.best_outputs(final)

    def step(self, model, s, state, rules):
        """One step of beam search: the `BeamState` after position `s.step`."""
        bos_id, eos_id = self.target.bos_id, self.target.eos_id
        n_best, patience = self.options.n_best, self.options.patience
        layer = self.attention_layer
        batch, k = tf.shape(s.alive_logp)[0], s.alive_logp.shape[1]
        previous = tf.gather(s.alive["tokens"], tf.maximum(s.step - 1, 0), axis=2)  # (B, k)
        token = tf.where(s.step == 0, tf.cast(bos_id, tf.int32), previous)  # (B, k)
        so_far = tf.reshape(s.alive["tokens"], [batch * k, -1])  # (B*k, L)
        log_probs, cache, attention = next_log_probs(
            model, tf.reshape(token, [-1]), s.step, s.cache, state, bos_id, layer
        )  # (B*k, V), cache, (B*k, S)
        log_probs = apply_rules(log_probs, s.step, rules, so_far, s.phrases)
        top_logp, top_beam, top_token = best_extensions(log_probs, s.alive_logp, 2 * k)
        # (B, 2k) each: log P of the extension, the beam it extends, its token
        may_end = tf.range(2 * k)[None, :] < k  # (1, 2k) EOS among the first k
        if rules.phrase_ids is not None:
            top_logp, top_beam, top_token, may_end = with_each_beams_best(
                log_probs, s.alive_logp, top_logp, top_beam, top_token, may_end, rules.phrase_ids
            )  # (B, 3k)
        source_length = attention.shape[-1] if attention.shape[-1] is not None else -1
        attention = tf.reshape(attention, [batch, k, source_length])  # (B, k, S)
        top = write_step(
            take(s.alive, top_beam),
            s.step,
            {"tokens": top_token, "attention": tf.gather(attention, top_beam, batch_dims=1)},
            axis=2,
        )  # (B, 2k, ...)
        is_eos = top_token == eos_id

        # 1. EOS among the first k extensions: joins the pool of the k best finished.
        new_score = top_logp / self.penalty(s.step + 1)
        ends = is_eos & may_end & ~s.done[:, None] & (top_logp > MINUS_INF)  # (B, 2k)
        new_score = tf.where(ends, new_score, MINUS_INF)
        ended = s.ended + tf.reduce_sum(tf.cast(ends, tf.int32), axis=1)  # (B,)
        pool_score = tf.concat([s.finished_score, new_score], axis=1)  # (B, 3k)
        finished_score, best = tf.math.top_k(pool_score, k)  # (B, k)
        finished = take(join(s.finished, top), best)  # (B, k, ...)

        # 2. The k best extensions that did not end live on; their caches are their parents'.
        phrases = s.phrases
        if rules.phrase_ids is None:
            alive_logp, best = tf.math.top_k(tf.where(is_eos, MINUS_INF, top_logp), k)  # (B, k)
            alive = take(top, best)  # (B, k, ...)
            parents = tf.gather(top_beam, best, batch_dims=1)
        else:
            top = (top_logp, top_beam, top_token)
            progress = progress_of(phrases, rules.phrase_lengths)
            alive_logp, parents, token = beams_with_phrases(
                log_probs, s.alive_logp, top, rules, progress
            )  # (B, k) each
            alive = write_step(
                take(s.alive, parents),
                s.step,
                {"tokens": token, "attention": tf.gather(attention, parents, batch_dims=1)},
                axis=2,
            )
            rows = tf.reshape(parents + tf.range(batch)[:, None] * k, [-1])  # (B*k,) parents' rows
            phrases = reorder(
                phrases, rows, rules.phrase_ids, rules.phrase_lengths, tf.reshape(token, [-1])
            )
        cache = model.reorder_cache(cache, parents)

        # 3. Done: the best live hypothesis cannot beat the N-th best finished one
        #    (or, with patience, enough hypotheses have ended).
        limit = tf.reshape(rules.limits, [batch, k])[:, 0]  # (B,) most tokens of an output
        best_possible = alive_logp[:, 0] / tf.maximum(
            self.penalty(tf.minimum(s.step + 2, limit)), self.penalty(limit)
        )  # (B,); the penalty is monotone in length and log P <= 0, so the larger
        #    of the two ends is the most favourable penalty still ahead
        done = s.done | (best_possible <= finished_score[:, (n_best or 1) - 1])
        if patience is not None:  # before the last step: there every live hypothesis ends,
            #                         cut at max_length, and is ranked with the ended ones
            enough = tf.cast(ended, tf.float32) >= patience * k
            done |= enough & (s.step + 1 < self.options.max_length)
        return BeamState(
            s.step + 1, alive, alive_logp, finished, finished_score, ended, done, cache, phrases
        )

    def best_outputs(self, s):
        """The `n_best` best of each sentence's finished hypotheses (and, for sentences
        cut at `max_length`, its live ones as they are): a `DecodingResult`."""
        alive_score = s.alive_logp / self.penalty(self.options.max_length)
        alive_score = tf.where(s.done[:, None], MINUS_INF, alive_score)
        pool_score = tf.concat([s.finished_score, alive_score], axis=1)  # (B, 2k)
        scores, best = tf.math.top_k(pool_score, self.options.n_best)  # (B, N), best first
        outputs = take(join(s.finished, s.alive), best)  # (B, N, ...)
        attention = None if self.attention_layer is None else outputs["attention"]
        return from_scores(outputs["tokens"], scores, self.target.eos_id, self.options, attention)

    def penalty(self, length):
        """What the log P of an output of `length` tokens is divided by to rank it."""
        return length_penalty(length, self.options.alpha, self.options.length_penalty)


def with_each_beams_best(log_probs, alive_logp, logp, beam, token, may_end, phrase_ids):
    """The best extensions `(logp, beam, token)` `(B, 2k)` and, after them, each
    hypothesis' own best extension where it is not among them: `(B, 3k)` each.

    In a search with phrases to meet (`phrase_ids` `(B*k, C, T)`), a
    hypothesis that has met more phrases often scores below the others, so
    its best extension (EOS, once all are met) would not be among the 2k best
    of the sentence; it is a candidate all the same, and may end there
    (`may_end`, `(1, 2k)` -> `(B, 3k)`). Sentences without phrases get no
    such candidates, and are searched as without constraints.
    """
    batch, k = tf.shape(alive_logp)[0], alive_logp.shape[1]
    has_phrases = tf.reshape(tf.reduce_any(phrase_ids != 0, axis=[1, 2]), [batch, k])
    # (a max and an argmax: XLA's top_k of 1 sorts, ~3x their time at V = 8000)
    own_logp = alive_logp + tf.reshape(tf.reduce_max(log_probs, axis=-1), [batch, k])
    own_token = tf.reshape(tf.argmax(log_probs, axis=-1, output_type=tf.int32), [batch, k])
    own_beam = tf.tile(tf.range(k)[None, :], [batch, 1])
    listed = (beam[:, None, :] == own_beam[:, :, None]) & (
        token[:, None, :] == own_token[:, :, None]
    )
    own_logp = tf.where(tf.reduce_any(listed, axis=-1) | ~has_phrases, MINUS_INF, own_logp)
    may_end = tf.concat([tf.tile(may_end, [batch, 1]), tf.ones([batch, k], tf.bool)], axis=1)
    return (
        tf.concat([logp, own_logp], axis=1),
        tf.concat([beam, own_beam], axis=1),
        tf.concat([token, own_token], axis=1),
        may_end,
    )
