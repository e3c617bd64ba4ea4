"""Greedy and beam search over a trained `Transformer`, with cached keys and values.

Both searches encode the source once, then run the decoder one position at a
time (`Decoder.call_with_cache`) inside one `tf.while_loop`, so a call traced
by `tf.function` is a single graph with no Python in the loop. Token ids
follow the package: 0 is padding; decoding starts from `bos_id` and a
hypothesis ends with `eos_id`.

Outputs are `(B, max_length)` int32 ids, 0 after each row's EOS (or at the
end of rows that reached `max_length` without one); BOS is not included.
"""

import tensorflow as tf

from keras_transformer.validation import check_positive_int

NEG_INF = -1e9


def length_penalty(length, alpha):
    """GNMT length penalty (Wu et al., 2016): ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def encode(model, source_ids):
    """Runs the encoder once: `(context (B, S, D), context_mask (B, S))`."""
    source_ids = tf.convert_to_tensor(source_ids)
    if source_ids.dtype not in (tf.int32, tf.int64) or source_ids.shape.rank != 2:
        raise ValueError(
            "`source_ids` must be integer token ids of shape (batch, seq). "
            f"Received: source_ids with dtype={source_ids.dtype.name}, shape={source_ids.shape}"
        )
    context = model.encoder(source_ids, training=False)  # (B, S, D)
    return context, source_ids != 0


def _log_probs(model, token_ids, step, cache, context_mask, bos_id):
    """One decoder step: `(log p(next token) (B, V) in float32, cache)`.

    Padding (0) and BOS are never generated: their logits are blocked.
    """
    x, cache = model.decoder.call_with_cache(token_ids[:, None], step, cache, context_mask)
    logits = tf.cast(model.output_logits(x)[:, 0], tf.float32)  # (B, V)
    vocab = tf.shape(logits)[-1]
    blocked = tf.one_hot(0, vocab) + tf.one_hot(bos_id, vocab)  # (V,)
    return tf.nn.log_softmax(logits + blocked * NEG_INF), cache


def greedy_search(model, source_ids, bos_id, eos_id, max_length=64):
    """Picks the most likely next token at every step.

    Args:
        model: a `keras_transformer.Transformer`.
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
    context, context_mask = encode(model, source_ids)
    batch = tf.shape(context)[0]
    cache = model.decoder.initial_cache(context, max_length)

    def body(step, token, output, finished, score, cache):
        log_probs, cache = _log_probs(model, token, step, cache, context_mask, bos_id)
        token = tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B,)
        best = tf.reduce_max(log_probs, axis=-1)
        token = tf.where(finished, 0, token)
        score += tf.where(finished, 0.0, best)
        output = tf.tensor_scatter_nd_update(
            output, tf.stack([tf.range(batch), tf.fill([batch], step)], axis=1), token
        )  # (B, L)
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


def beam_search(model, source_ids, bos_id, eos_id, max_length=64, beam_size=4, alpha=0.6):
    """Keeps the `beam_size` best hypotheses per sentence at every step.

    Scores are GNMT's: log P(Y | X) / length_penalty(|Y|, alpha), with |Y|
    counting EOS. At each step the 2k best extensions of the k live
    hypotheses are ranked by log-probability; those among the first k that
    end in EOS are finished, and the best k others live on. A sentence is done
    when it has k finished hypotheses or no live one can still beat the worst
    of them (alpha >= 0); the loop stops when all are done or at
    `max_length`, where live hypotheses count as finished. With
    `beam_size=1` this is greedy search exactly.

    Args:
        model: a `keras_transformer.Transformer`.
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        beam_size: hypotheses kept per sentence, k.
        alpha: strength of the length penalty; 0 ranks by log-probability.

    Returns:
        `(token_ids (B, max_length) int32, scores (B,) float32)`: the best
        finished hypothesis of each sentence and its normalized score.

    Example:
    ```python
    search = tf.function(lambda s: beam_search(model, s, 2, 3, beam_size=4))
    token_ids, scores = search(source_ids)
    ```
    """
    check_positive_int("max_length", max_length)
    check_positive_int("beam_size", beam_size)
    k = beam_size
    context, context_mask = encode(model, source_ids)
    batch = tf.shape(context)[0]
    # Every hypothesis of a sentence shares its context: repeat it k times.
    context = tf.repeat(context, k, axis=0)  # (B*k, S, D)
    context_mask = tf.repeat(context_mask, k, axis=0)  # (B*k, S)
    cache = model.decoder.initial_cache(context, max_length)
    batch_offsets = tf.range(batch)[:, None] * k  # (B, 1)

    def last_token(alive_seq, step):
        previous = tf.gather(alive_seq, tf.maximum(step - 1, 0), axis=2)  # (B, k)
        return tf.where(step == 0, tf.cast(bos_id, tf.int32), previous)

    def body(step, alive_seq, alive_logp, finished_seq, finished_score, done, cache):
        token = last_token(alive_seq, step)  # (B, k)
        log_probs, cache = _log_probs(
            model, tf.reshape(token, [-1]), step, cache, context_mask, bos_id
        )  # (B*k, V)
        vocab = tf.shape(log_probs)[-1]
        candidates = alive_logp[:, :, None] + tf.reshape(log_probs, [batch, k, vocab])
        top_logp, top_index = tf.math.top_k(tf.reshape(candidates, [batch, k * vocab]), 2 * k)
        top_beam = top_index // vocab  # (B, 2k)
        top_token = top_index % vocab  # (B, 2k)
        top_seq = tf.gather(alive_seq, top_beam, batch_dims=1)  # (B, 2k, L)
        top_seq = write_column(top_seq, step, top_token)
        is_eos = top_token == eos_id

        # 1. EOS among the first k candidates: finished, ranked by normalized score.
        among_first_k = tf.range(2 * k)[None, :] < k
        new_score = top_logp / length_penalty(step + 1, alpha)
        new_score = tf.where(is_eos & among_first_k & ~done[:, None], new_score, NEG_INF)
        pool_seq = tf.concat([finished_seq, top_seq], axis=1)  # (B, 3k, L)
        pool_score = tf.concat([finished_score, new_score], axis=1)  # (B, 3k)
        finished_score, best = tf.math.top_k(pool_score, k)
        finished_seq = tf.gather(pool_seq, best, batch_dims=1)  # (B, k, L)

        # 2. The best k candidates that did not end live on.
        live_logp = tf.where(is_eos, NEG_INF, top_logp)
        alive_logp, best = tf.math.top_k(live_logp, k)  # (B, k)
        alive_seq = tf.gather(top_seq, best, batch_dims=1)  # (B, k, L)
        parent = tf.reshape(tf.gather(top_beam, best, batch_dims=1) + batch_offsets, [-1])
        cache = {
            "self": tf.nest.map_structure(lambda c: tf.gather(c, parent), cache["self"]),
            "cross": cache["cross"],
        }

        # 3. Done: k finished, or no live hypothesis can overtake the worst of them.
        best_possible = alive_logp[:, 0] / length_penalty(max_length, alpha)
        done |= finished_score[:, -1] > NEG_INF / 2
        if alpha >= 0:
            done |= best_possible < finished_score[:, -1]
        return step + 1, alive_seq, alive_logp, finished_seq, finished_score, done, cache

    def not_done(step, alive_seq, alive_logp, finished_seq, finished_score, done, cache):
        return (step < max_length) & ~tf.reduce_all(done)

    first_beam_only = tf.concat([tf.zeros([batch, 1]), tf.fill([batch, k - 1], NEG_INF)], axis=1)
    _, alive_seq, alive_logp, finished_seq, finished_score, done, _ = tf.while_loop(
        not_done,
        body,
        (
            tf.constant(0),
            tf.zeros([batch, k, max_length], tf.int32),
            first_beam_only,
            tf.zeros([batch, k, max_length], tf.int32),
            tf.fill([batch, k], NEG_INF),
            tf.zeros([batch], tf.bool),
            cache,
        ),
    )
    # Sentences cut at max_length: their live hypotheses compete as they are.
    alive_score = alive_logp / length_penalty(max_length, alpha)
    alive_score = tf.where(done[:, None], NEG_INF, alive_score)
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
