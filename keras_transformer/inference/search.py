"""Greedy and beam search with cached keys and values.

Both searches are written against the model's step interface and nothing
else of it (see `Transformer.encode`, `initial_cache` and `decode_step`):

    state = model.encode(source_ids)                 # once
    cache = model.initial_cache(state, max_length)
    logits, cache = model.decode_step(tokens, step, cache, state)   # per step

`state` and `cache` are nests of tensors whose first axis is the batch, so
beam search can repeat the state for its beams and reorder the cache by
parent hypothesis without knowing what they hold. Each search is one
`tf.while_loop`: traced by `tf.function`, a call is a single graph with no
Python in the loop.

Token ids follow the package: 0 is padding; decoding starts from `bos_id` and
a hypothesis ends with `eos_id`. Padding and BOS are never generated. Outputs
are `(B, max_length)` int32 ids, 0 after each row's EOS (or at the end of rows
that reached `max_length` without one); BOS is not included.
"""

import tensorflow as tf

from keras_transformer.layers.masks import PAD_ID
from keras_transformer.validation import check_positive_int

MINUS_INF = float("-inf")

# The decoding defaults of the whole package: the searches, `Translator` and
# the run configuration's `decode` section all take them from here.
MAX_LENGTH = 64
BEAM_SIZE = 4
ALPHA = 0.6


def length_penalty(length, alpha):
    """GNMT length penalty (Wu et al., 2016): ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def check_source_ids(source_ids):
    """`source_ids` as a tensor, or a `ValueError` unless it is integer `(B, S)`."""
    source_ids = tf.convert_to_tensor(source_ids)
    if source_ids.dtype not in (tf.int32, tf.int64) or source_ids.shape.rank != 2:
        raise ValueError(
            "`source_ids` must be integer token ids of shape (batch, seq). "
            f"Received: source_ids with dtype={source_ids.dtype.name}, shape={source_ids.shape}"
        )
    return source_ids


def next_log_probs(model, token_ids, step, cache, state, bos_id):
    """One decoding step: `(log p(next token) (B, V) float32, cache)`.

    Padding and BOS get probability zero: they are never generated.
    """
    logits, cache = model.decode_step(token_ids, step, cache, state)  # (B, V)
    return log_softmax_without_pad_and_bos(logits, bos_id), cache


def log_softmax_without_pad_and_bos(logits, bos_id):
    """log-softmax over the last axis `V` with padding and BOS at probability zero."""
    token = tf.range(tf.shape(logits)[-1])  # (V,)
    blocked = (token == PAD_ID) | (token == bos_id)
    return tf.nn.log_softmax(tf.where(blocked, MINUS_INF, logits))


def greedy_search(model, source_ids, bos_id, eos_id, max_length=MAX_LENGTH):
    """Picks the most likely next token at every step.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface (`encode`, `initial_cache`, `decode_step`).
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        output and the sum of its tokens' log-probabilities.

    Example:
    ```python
    search = tf.function(lambda s: greedy_search(model, s, bos_id=2, eos_id=3))
    token_ids, log_probs = search(source_ids)
    ```
    """
    check_positive_int("max_length", max_length)
    source_ids = check_source_ids(source_ids)
    state = model.encode(source_ids)
    batch = tf.shape(source_ids)[0]
    cache = model.initial_cache(state, max_length)

    def body(step, token, output, finished, score, cache):
        log_probs, cache = next_log_probs(model, token, step, cache, state, bos_id)
        token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B,)
        best = tf.reduce_max(log_probs, axis=-1)
        token = tf.where(finished, PAD_ID, token)
        score += tf.where(finished, 0.0, best)
        output = write_column(output[:, None], step, token[:, None])[:, 0]  # (B, L)
        finished |= token == eos_id
        return step + 1, token, output, finished, score, cache

    def not_done(step, token, output, finished, score, cache):
        return (step < max_length) & ~tf.reduce_all(finished)

    _, _, output, _, score, _ = tf.while_loop(
        not_done,
        body,
        (
            tf.constant(0),
            tf.fill([batch], tf.cast(bos_id, tf.int32)),
            tf.zeros([batch, max_length], tf.int32),
            tf.zeros([batch], tf.bool),
            tf.zeros([batch], tf.float32),
            cache,
        ),
    )
    return output, score


def beam_search(
    model, source_ids, bos_id, eos_id, max_length=MAX_LENGTH, beam_size=BEAM_SIZE, alpha=ALPHA
):
    """Keeps the `beam_size` best hypotheses per sentence at every step.

    A finished hypothesis Y scores log P(Y | X) / length_penalty(|Y|, alpha)
    (GNMT), |Y| counting EOS. Each step extends the k live hypotheses of a
    sentence and takes the 2k most probable extensions, as fairseq does:
    those among the first k that end in EOS join a pool of the k best
    finished hypotheses, and the k best that do not end stay alive (2k
    extensions hold at least k of them: each live hypothesis has only one
    EOS extension). An EOS extension ranked below k others is left out, as a
    beam of k would not hold it.

    The stopping rule is tensor2tensor's and the TF Model Garden's: a
    sentence is done only when no live hypothesis can still beat the worst of
    its k finished ones, i.e. when even the best live log-probability (which
    can only fall) under the most favourable length penalty still ahead,
    max over |Y| in [step + 2, max_length] of log P / length_penalty(|Y|),
    is no better than it. With fewer than k finished hypotheses a sentence is
    never done before `max_length`, where its live hypotheses compete as they
    are. fairseq instead stops a sentence as soon as it holds k finished
    hypotheses; on a confident model the EOS extensions of the one good
    hypothesis fill those k places within k steps, and the good hypothesis,
    still live, is lost. The bound costs extra steps only on sentences whose
    best hypothesis is still live, where they are needed. With
    `beam_size=1` and `alpha=0` this is greedy search exactly; with
    `alpha > 0` one beam may go on past greedy's EOS, when the next best
    hypothesis can still win once its length is counted.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface (`encode`, `initial_cache`, `decode_step`).
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        beam_size: hypotheses kept per sentence, k.
        alpha: strength of the length penalty; 0 ranks by log-probability,
            negative values favour short outputs.

    Returns:
        `(token_ids (B, max_length) int32, scores (B,) float32)`: the best
        hypothesis of each sentence and its normalized score.

    Example:
    ```python
    search = tf.function(lambda s: beam_search(model, s, 2, 3, beam_size=4))
    token_ids, scores = search(source_ids)
    ```
    """
    check_positive_int("max_length", max_length)
    check_positive_int("beam_size", beam_size)
    k = beam_size
    source_ids = check_source_ids(source_ids)
    batch = tf.shape(source_ids)[0]
    # Every hypothesis of a sentence shares its state: repeat it k times.
    state = tf.nest.map_structure(lambda t: tf.repeat(t, k, axis=0), model.encode(source_ids))
    cache = model.initial_cache(state, max_length)  # (B*k, ...)
    batch_offsets = tf.range(batch)[:, None] * k  # (B, 1)

    def last_token(alive_seq, step):
        previous = tf.gather(alive_seq, tf.maximum(step - 1, 0), axis=2)  # (B, k)
        return tf.where(step == 0, tf.cast(bos_id, tf.int32), previous)

    def body(step, alive_seq, alive_logp, finished_seq, finished_score, done, cache):
        token = last_token(alive_seq, step)  # (B, k)
        log_probs, cache = next_log_probs(
            model, tf.reshape(token, [-1]), step, cache, state, bos_id
        )  # (B*k, V)
        vocab = tf.shape(log_probs)[-1]
        candidates = alive_logp[:, :, None] + tf.reshape(log_probs, [batch, k, vocab])
        top_logp, top_index = tf.math.top_k(tf.reshape(candidates, [batch, k * vocab]), 2 * k)
        top_beam = top_index // vocab  # (B, 2k)
        top_token = top_index % vocab  # (B, 2k)
        top_seq = tf.gather(alive_seq, top_beam, batch_dims=1)  # (B, 2k, L)
        top_seq = write_column(top_seq, step, top_token)
        is_eos = top_token == eos_id

        # 1. EOS among the first k extensions: joins the pool of the k best finished.
        among_first_k = tf.range(2 * k)[None, :] < k  # (1, 2k)
        new_score = top_logp / length_penalty(step + 1, alpha)
        new_score = tf.where(is_eos & among_first_k & ~done[:, None], new_score, MINUS_INF)
        pool_seq = tf.concat([finished_seq, top_seq], axis=1)  # (B, 3k, L)
        pool_score = tf.concat([finished_score, new_score], axis=1)  # (B, 3k)
        finished_score, best = tf.math.top_k(pool_score, k)  # (B, k)
        finished_seq = tf.gather(pool_seq, best, batch_dims=1)  # (B, k, L)

        # 2. The k best extensions that did not end live on; their caches
        # are their parents'.
        alive_logp, best = tf.math.top_k(tf.where(is_eos, MINUS_INF, top_logp), k)  # (B, k)
        alive_seq = tf.gather(top_seq, best, batch_dims=1)  # (B, k, L)
        parent = tf.reshape(tf.gather(top_beam, best, batch_dims=1) + batch_offsets, [-1])
        cache = tf.nest.map_structure(lambda c: tf.gather(c, parent), cache)  # (B*k, ...)

        # 3. Done: the best live hypothesis cannot beat the worst finished one.
        best_possible = alive_logp[:, 0] / tf.maximum(
            length_penalty(tf.minimum(step + 2, max_length), alpha),
            length_penalty(max_length, alpha),
        )  # (B,); log P <= 0, so the larger penalty is the more favourable one
        done |= best_possible <= finished_score[:, -1]
        return step + 1, alive_seq, alive_logp, finished_seq, finished_score, done, cache

    def not_done(step, alive_seq, alive_logp, finished_seq, finished_score, done, cache):
        return (step < max_length) & ~tf.reduce_all(done)

    first_beam_only = tf.concat(
        [tf.zeros([batch, 1]), tf.fill([batch, k - 1], MINUS_INF)], axis=1
    )  # (B, k)
    _, alive_seq, alive_logp, finished_seq, finished_score, done, _ = tf.while_loop(
        not_done,
        body,
        (
            tf.constant(0),
            tf.zeros([batch, k, max_length], tf.int32),
            first_beam_only,
            tf.zeros([batch, k, max_length], tf.int32),
            tf.fill([batch, k], MINUS_INF),
            tf.zeros([batch], tf.bool),
            cache,
        ),
    )
    # Sentences cut at max_length: their live hypotheses compete as they are.
    alive_score = alive_logp / length_penalty(max_length, alpha)
    alive_score = tf.where(done[:, None], MINUS_INF, alive_score)
    pool_seq = tf.concat([finished_seq, alive_seq], axis=1)  # (B, 2k, L)
    pool_score = tf.concat([finished_score, alive_score], axis=1)  # (B, 2k)
    best = tf.argmax(pool_score, axis=1, output_type=tf.int32)  # (B,)
    output = tf.gather(pool_seq, best, batch_dims=1)  # (B, L)
    return output, tf.gather(pool_score, best, batch_dims=1)


def write_column(sequences, step, tokens):
    """`sequences[:, :, step] = tokens` for `(B, N, L)` sequences and `(B, N)` tokens."""
    length = tf.shape(sequences)[2]
    at_step = tf.one_hot(step, length, on_value=True, off_value=False, dtype=tf.bool)  # (L,)
    return tf.where(at_step, tokens[:, :, None], sequences)
