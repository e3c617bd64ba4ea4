"""Greedy and beam search with cached keys and values.

Both searches are written against the model's step interface and nothing
else of it (see `Transformer.encode`, `initial_cache` and `decode_step`):

    state = model.encode(source_ids)                 # once
    cache = model.initial_cache(state, max_length)
    logits, cache = model.decode_step(tokens, step, cache, state)   # per step

Beam search decodes the k hypotheses of each sentence together, through a
fourth method:

    cache = model.initial_cache(state, max_length, beam_size=k)
    logits, cache = model.decode_step(tokens_of_B_times_k, step, cache, state)
    cache = model.reorder_cache(cache, beams)   # hypothesis j goes on from beams[:, j]

`Transformer` keeps one copy of each sentence's state and reorders only a
small lineage table (see `Transformer.reorder_cache`). A model with only the
first three methods is decoded through `HypothesisRows`, which repeats its
state per hypothesis and reorders its cache by gathering rows: `state` and
`cache` need only be nests of tensors whose first axis is the batch.

A step attends over its whole cache, so the searches let the cache grow with
the output when the model offers a fifth method:

    cache = model.grow_cache(cache, longer_max_length)   # what it holds kept

For a long `max_length` the search then starts with a shorter cache and
doubles it when full (`cache_lengths`): one `tf.while_loop` per cache size.
Without `grow_cache` it decodes in one loop with a cache of `max_length`.
Traced by `tf.function`, a call is a single graph with no Python in the loop.

Token ids follow the package: 0 is padding; decoding starts from `bos_id` and
a hypothesis ends with `eos_id`. Padding and BOS are never generated. Outputs
are `(B, max_length)` int32 ids, 0 after each row's EOS (or at the end of rows
that reached `max_length` without one); BOS is not included.

Every search takes an optional target prefix per sentence, `prefix_ids`
`(B, P)`, 0-padded: while a sentence is inside its prefix, the search must
take the prefix's token, so the output starts with the prefix and the rest
is searched as usual. Scores count the prefix's tokens too.
"""

import math

import tensorflow as tf

from keras_transformer.layers.masks import PAD_ID
from keras_transformer.validation import check_positive_int

MINUS_INF = float("-inf")

# The decoding defaults of the whole package: the searches, `Translator` and
# the run configuration's `decode` section all take them from here.
MAX_LENGTH = 64
BEAM_SIZE = 4
ALPHA = 0.6
# The shortest cache a search grows from (`cache_lengths`).
SMALLEST_CACHE_LENGTH = 64


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


def check_prefix_ids(prefix_ids, batch):
    """`prefix_ids` as int32 `(B, P + 1)` (a padding column ensures P + 1 >= 1), or None."""
    if prefix_ids is None:
        return None
    prefix_ids = tf.convert_to_tensor(prefix_ids)
    if not prefix_ids.dtype.is_integer or prefix_ids.shape.rank != 2:
        raise ValueError(
            "`prefix_ids` must be integer token ids of shape (batch, prefix_length). "
            f"Received: prefix_ids with dtype={prefix_ids.dtype.name}, shape={prefix_ids.shape}"
        )
    prefix_ids = tf.ensure_shape(tf.cast(prefix_ids, tf.int32), [batch, None])
    return tf.pad(prefix_ids, [[0, 0], [0, 1]], constant_values=PAD_ID)


def next_log_probs(
    model, token_ids, step, cache, state, bos_id, prefix_ids=None, attention_layer=None
):
    """One decoding step: `(log p(next token) (B, V) float32, cache, attention)`.

    Padding and BOS get probability zero: they are never generated. Rows
    still inside their `prefix_ids` keep only the prefix's token (its
    probability under the model is unchanged). `attention` is the model's
    cross-attention `(B, S)` of `attention_layer`, or `(B, 0)` without one.
    """
    if attention_layer is None:
        logits, cache = model.decode_step(token_ids, step, cache, state)  # (B, V)
        attention = tf.zeros([tf.shape(logits)[0], 0])
    else:
        logits, cache, attention = model.decode_step(token_ids, step, cache, state, attention_layer)
    log_probs = log_softmax_without_pad_and_bos(logits, bos_id)
    if prefix_ids is not None:
        last = tf.shape(prefix_ids)[1] - 1  # a padding column
        forced = tf.gather(prefix_ids, tf.minimum(step, last), axis=1)  # (B,)
        token = tf.range(tf.shape(log_probs)[-1])  # (V,)
        other = (forced[:, None] != PAD_ID) & (token[None, :] != forced[:, None])  # (B, V)
        log_probs = tf.where(other, MINUS_INF, log_probs)
    return log_probs, cache, attention


def log_softmax_without_pad_and_bos(logits, bos_id):
    """log-softmax over the last axis `V` with padding and BOS at probability zero."""
    token = tf.range(tf.shape(logits)[-1])  # (V,)
    blocked = (token == PAD_ID) | (token == bos_id)
    return tf.nn.log_softmax(tf.where(blocked, MINUS_INF, logits))


def greedy_search(
    model,
    source_ids,
    bos_id,
    eos_id,
    max_length=MAX_LENGTH,
    prefix_ids=None,
    attention_layer=None,
):
    """Picks the most likely next token at every step.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface (`encode`, `initial_cache`, `decode_step`).
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

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        output and the sum of its tokens' log-probabilities; with
        `attention_layer`, also the attention `(B, max_length, S)` of each
        output token to the source (zero after EOS).

    Example:
    ```python
    search = tf.function(lambda s: greedy_search(model, s, bos_id=2, eos_id=3))
    token_ids, log_probs = search(source_ids)
    ```
    """

    def most_likely(log_probs, step):
        return tf.argmax(log_probs, axis=-1, output_type=tf.int32)  # (B,)

    return token_by_token(
        model, source_ids, bos_id, eos_id, max_length, most_likely, prefix_ids, attention_layer
    )


def sample(
    model,
    source_ids,
    bos_id,
    eos_id,
    max_length=MAX_LENGTH,
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=0,
    prefix_ids=None,
):
    """Draws each next token at random from the model's distribution.

    The distribution is sharpened or flattened by `temperature`, then cut to
    its `top_k` most probable tokens and to the smallest set of most probable
    tokens whose probability reaches `top_p` (nucleus sampling, Holtzman et
    al., 2020), and renormalized. Draws are stateless: the same `seed` and
    inputs give the same outputs.

    Args:
        model: a `keras_transformer.Transformer`, or any object with its
            step interface.
        source_ids: int `(B, S)`, 0-padded.
        bos_id: id the decoder starts from.
        eos_id: id that ends a hypothesis.
        max_length: most tokens to generate, EOS included.
        temperature: > 0; the logits are divided by it. Defaults to 1.
        top_k: keep only the k most probable tokens; 0 keeps all.
        top_p: keep the most probable tokens up to this total probability,
            in (0, 1]; 1 keeps all.
        seed: an integer.
        prefix_ids: optional int `(B, P)`, 0-padded: each output starts
            with its row.

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        samples and the sum of their tokens' log-probabilities under the
        model (before temperature and cuts).

    Example:
    ```python
    token_ids, _ = sample(model, source_ids, 2, 3, temperature=0.8, top_p=0.9, seed=1)
    ```
    """
    check_sampling(temperature, top_k, top_p)

    def draw(log_probs, step):
        logits = cut_to_top_p(cut_to_top_k(log_probs / temperature, top_k), top_p)
        step_seed = tf.stack([tf.cast(seed, tf.int32), step])
        drawn = tf.random.stateless_categorical(logits, 1, step_seed, dtype=tf.int32)
        return drawn[:, 0]  # (B,)

    return token_by_token(model, source_ids, bos_id, eos_id, max_length, draw, prefix_ids)


def check_sampling(temperature, top_k, top_p):
    """Raises a `ValueError` naming the first sampling option out of range."""
    if not temperature > 0:
        raise ValueError(f"`temperature` must be > 0. Received: temperature={temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1]. Received: top_p={top_p}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"`top_k` must be an integer >= 0. Received: top_k={top_k!r}")


def cut_to_top_k(logits, k):
    """`logits` `(B, V)` with all but the k largest of each row at -inf (k = 0: all kept)."""
    if k == 0:
        return logits
    kth = tf.math.top_k(logits, tf.minimum(k, tf.shape(logits)[-1])).values[:, -1:]  # (B, 1)
    return tf.where(logits < kth, MINUS_INF, logits)


def cut_to_top_p(logits, p):
    """`logits` `(B, V)` cut to the smallest most-probable set whose probability reaches p."""
    if p >= 1.0:
        return logits
    ordered = tf.sort(logits, direction="DESCENDING")  # (B, V)
    before = tf.math.cumsum(tf.nn.softmax(ordered), axis=-1, exclusive=True)  # (B, V)
    # A token is kept while the probability of the more probable ones is below p.
    kept = tf.where(before < p, ordered, MINUS_INF)
    smallest = tf.reduce_min(tf.where(kept > MINUS_INF, kept, ordered[:, :1]), -1, keepdims=True)
    return tf.where(logits < smallest, MINUS_INF, logits)


def token_by_token(
    model, source_ids, bos_id, eos_id, max_length, choose, prefix_ids=None, attention_layer=None
):
    """One hypothesis per sentence, extended by `choose(log_probs (B, V), step) -> (B,)`.

    The loop of greedy search and sampling: a row stops at its EOS, and its
    score is the sum of its tokens' log-probabilities.
    """
    check_positive_int("max_length", max_length)
    source_ids = check_source_ids(source_ids)
    prefix_ids = check_prefix_ids(prefix_ids, source_ids.shape[0])
    state = model.encode(source_ids)
    batch = tf.shape(source_ids)[0]
    lengths = cache_lengths(model, max_length)
    cache = model.initial_cache(state, lengths[0])

    def body(step, token, history, finished, score, cache):
        log_probs, cache, attention = next_log_probs(
            model, token, step, cache, state, bos_id, prefix_ids, attention_layer
        )
        token = choose(log_probs, step)  # (B,)
        chosen = tf.gather(log_probs, token, batch_dims=1)  # (B,)
        token = tf.where(finished, PAD_ID, token)
        score += tf.where(finished, 0.0, chosen)
        attention = tf.where(finished[:, None], 0.0, attention)
        history = write_step(history, step, {"tokens": token, "attention": attention}, axis=1)
        finished |= token == eos_id
        return step + 1, token, history, finished, score, cache

    def not_done(step, token, history, finished, score, cache):
        return (step < max_length) & ~tf.reduce_all(finished)

    _, _, history, _, score, _ = decode_loop(
        model,
        lengths,
        not_done,
        body,
        (
            tf.constant(0),
            tf.fill([batch], tf.cast(bos_id, tf.int32)),
            empty_history([batch], max_length, source_ids, attention_layer),
            tf.zeros([batch], tf.bool),
            tf.zeros([batch], tf.float32),
            cache,
        ),
    )
    if attention_layer is None:
        return history["tokens"], score
    return history["tokens"], score, history["attention"]


def cache_lengths(model, max_length):
    """The cache sizes a search decodes with, one `tf.while_loop` each.

    `max_length`, halved while the half holds at least
    `SMALLEST_CACHE_LENGTH` (64) positions: a model with `grow_cache`
    starts with the smallest and doubles it each time it is full, so a step
    attends over at most twice the positions written so far (or 64) instead
    of all `max_length`. Each size compiles one more loop, which costs more
    than attending over a cache of 64 saves. Other models decode with one
    cache of `max_length`.

    Args:
        model: an object with the step interface.
        max_length: most tokens the search generates.

    Returns:
        A list of increasing Python ints ending with `max_length`.

    Example:
    >>> cache_lengths(transformer, 300)
    [75, 150, 300]
    """
    lengths = [max_length]
    if not hasattr(model, "grow_cache"):
        return lengths
    while lengths[0] // 2 >= SMALLEST_CACHE_LENGTH:
        lengths.insert(0, lengths[0] // 2)
    return lengths


def decode_loop(model, lengths, not_done, body, loop_vars):
    """`tf.while_loop(not_done, body, loop_vars)` with a cache that grows.

    The first loop variable is the step and the last the model's cache, of
    `lengths[0]` positions. The loop over steps runs in one `tf.while_loop`
    per cache length: when the cache is full, `model.grow_cache` gives it
    the next length of `lengths` (`cache_lengths`) and the next loop goes on
    from the same step. A loop whose `not_done` is already false runs no
    step.

    Returns:
        The loop variables after the last step, as `tf.while_loop` does.
    """
    for index, length in enumerate(lengths):
        if index > 0:
            loop_vars = (*loop_vars[:-1], model.grow_cache(loop_vars[-1], length))

        def in_cache(step, *rest, length=length):
            return (step < length) & not_done(step, *rest)

        loop_vars = tf.while_loop(in_cache, body, loop_vars)
    return loop_vars


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


class HypothesisRows:
    """Beam search's step interface for a model with only the first three methods.

    Repeats the model's state once per hypothesis, so that row i of every
    tensor serves hypothesis i, and reorders the model's cache by gathering
    the rows of the hypotheses that go on. It has `grow_cache` where
    `model` has it.

    Args:
        model: an object with `encode`, `initial_cache` and `decode_step`
            whose state and cache are nests of tensors with the batch first.

    Example:
    ```python
    # What beam_search does by itself for a model without `reorder_cache`:
    token_ids, scores = beam_search(HypothesisRows(model), source_ids, 2, 3)
    ```
    """

    def __init__(self, model):
        self.model = model
        if hasattr(model, "grow_cache"):
            self.grow_cache = self._grow_cache

    def encode(self, source_ids):
        return self.model.encode(source_ids)

    def _grow_cache(self, cache, max_length):
        return {"state": cache["state"], "cache": self.model.grow_cache(cache["cache"], max_length)}

    def initial_cache(self, state, max_length, beam_size=1):
        state = tf.nest.map_structure(lambda t: tf.repeat(t, beam_size, axis=0), state)
        return {"state": state, "cache": self.model.initial_cache(state, max_length)}

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        options = {} if attention_layer is None else {"attention_layer": attention_layer}
        logits, own, *extra = self.model.decode_step(
            token_ids, step, cache["cache"], cache["state"], **options
        )
        return (logits, {"state": cache["state"], "cache": own}, *extra)

    def reorder_cache(self, cache, beams):
        batch, k = tf.shape(beams)[0], tf.shape(beams)[1]
        rows = tf.reshape(beams + tf.range(batch)[:, None] * k, [-1])  # (B*k,)
        return {
            "state": cache["state"],
            "cache": tf.nest.map_structure(lambda c: tf.gather(c, rows), cache["cache"]),
        }


def beam_decoder(model):
    """`model` if it has `reorder_cache`, else `HypothesisRows(model)`."""
    return model if hasattr(model, "reorder_cache") else HypothesisRows(model)


def top_k_by_blocks(values, k):
    """`tf.math.top_k(values, k)` of `(N, V)` values, found in two small stages.

    The last axis is cut into blocks of b entries, about sqrt(V / k) (the
    last block padded with -inf). The k largest values lie in the k blocks
    with the largest maxima: a value outside them is outranked by the
    maximum of each of those k blocks (ties go to the lower index, and a
    block whose maximum ties comes first if its index is lower). So one
    top-k over the V / b block maxima and one over the k * b entries of the
    chosen blocks, taken in index order, give exactly the values, indices
    and order of `tf.math.top_k`, ties included, in a fraction of its time
    on a CPU. Where V is unknown or holds fewer than k blocks of b, it is
    `tf.math.top_k`.

    Args:
        values: float `(N, V)`, V known.
        k: a Python int, at most V.

    Returns:
        `(values (N, k), indices (N, k) int32)`, largest first.

    Example:
    ```python
    top, index = top_k_by_blocks(log_probs, 8)  # as tf.math.top_k(log_probs, 8)
    ```
    """
    vocab = values.shape[-1]
    if vocab is None:
        return tf.math.top_k(values, k)
    block = 2 ** max(0, round(math.log2(math.sqrt(vocab / k))))
    blocks = -(-vocab // block)
    if blocks < k or block == 1:
        return tf.math.top_k(values, k)
    padded = tf.pad(values, [[0, 0], [0, blocks * block - vocab]], constant_values=MINUS_INF)
    padded = tf.reshape(padded, [-1, blocks, block])  # (N, V / b, b)
    _, chosen = tf.math.top_k(tf.reduce_max(padded, axis=-1), k)  # (N, k)
    chosen = tf.sort(chosen, axis=-1)  # index order, so that ties keep going to the lower index
    entries = tf.reshape(tf.gather(padded, chosen, batch_dims=1), [-1, k * block])  # (N, k * b)
    top, where = tf.math.top_k(entries, k)  # (N, k)
    return top, tf.gather(chosen, where // block, batch_dims=1) * block + where % block


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

    A sentence is done as soon as its output is certain: when no live
    hypothesis can still beat the N-th best of its finished ones (N =
    `n_best`, 1 by default), i.e. when even the best live log-probability
    (which can only fall) under the most favourable length penalty still
    ahead, max over |Y| in [step + 2, max_length] of log P /
    length_penalty(|Y|), is no better than it. Nothing found later could
    enter the N best, so the output is the one the search would return if
    it went on to `max_length`. With fewer than N finished hypotheses a
    sentence is not done before `max_length`, where its live hypotheses
    compete as they are. The bound is tensor2tensor's and the TF Model
    Garden's, which compare it with the worst finished hypothesis instead.
    fairseq stops a sentence as soon as it holds k finished hypotheses; on
    a confident model the EOS extensions of the one good hypothesis fill
    those k places within k steps, and the good hypothesis, still live, is
    lost. With `beam_size=1` and `alpha=0` this is greedy search exactly;
    with `alpha > 0` one beam may go on past greedy's EOS, when the next
    best hypothesis can still win once its length is counted.

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
        prefix_ids: optional int `(B, P)`, 0-padded: each output starts
            with its row.
        n_best: None for the best hypothesis only; N (at most `beam_size`)
            for the N best of each sentence, best first.
        attention_layer: optional index of a decoder layer: also return each
            output's cross-attention in it (see `greedy_search`).

    Returns:
        `(token_ids (B, max_length) int32, scores (B,) float32)`: the best
        hypothesis of each sentence and its normalized score; with `n_best`,
        `(B, N, max_length)` and `(B, N)`. A sentence with fewer than N
        hypotheses (a tiny search space) fills the rest with score -inf.
        With `attention_layer`, also the attention `(B[, N], max_length, S)`.

    Example:
    ```python
    search = tf.function(lambda s: beam_search(model, s, 2, 3, beam_size=4))
    token_ids, scores = search(source_ids)
    ```
    """
    check_positive_int("max_length", max_length)
    check_positive_int("beam_size", beam_size)
    if n_best is not None:
        check_positive_int("n_best", n_best)
        if n_best > beam_size:
            raise ValueError(
                f"`n_best` can be at most `beam_size`. Received: n_best={n_best}, "
                f"beam_size={beam_size}"
            )
    k = beam_size
    last_kept = (n_best or 1) - 1  # the worst finished hypothesis of the output
    model = beam_decoder(model)
    source_ids = check_source_ids(source_ids)
    batch = tf.shape(source_ids)[0]
    prefix_ids = check_prefix_ids(prefix_ids, source_ids.shape[0])
    if prefix_ids is not None:
        prefix_ids = tf.repeat(prefix_ids, k, axis=0)  # (B*k, P + 1)
    state = model.encode(source_ids)  # one per sentence, shared by its hypotheses
    lengths = cache_lengths(model, max_length)
    cache = model.initial_cache(state, lengths[0], beam_size=k)

    def last_token(alive, step):
        previous = tf.gather(alive["tokens"], tf.maximum(step - 1, 0), axis=2)  # (B, k)
        return tf.where(step == 0, tf.cast(bos_id, tf.int32), previous)

    def body(step, alive, alive_logp, finished, finished_score, done, cache):
        # alive, finished: histories of k hypotheses, "tokens" (B, k, L) and
        # "attention" (B, k, L, S).
        token = last_token(alive, step)  # (B, k)
        log_probs, cache, attention = next_log_probs(
            model, tf.reshape(token, [-1]), step, cache, state, bos_id, prefix_ids, attention_layer
        )  # (B*k, V), cache, (B*k, S)
        top_logp, top_beam, top_token = best_extensions(log_probs, alive_logp, 2 * k)
        # (B, 2k) each: log P of the extension, the beam it extends, its token
        source_length = attention.shape[-1] if attention.shape[-1] is not None else -1
        attention = tf.reshape(attention, [batch, k, source_length])  # (B, k, S)
        top = write_step(
            take(alive, top_beam),
            step,
            {"tokens": top_token, "attention": tf.gather(attention, top_beam, batch_dims=1)},
            axis=2,
        )  # (B, 2k, ...)
        is_eos = top_token == eos_id

        # 1. EOS among the first k extensions: joins the pool of the k best finished.
        among_first_k = tf.range(2 * k)[None, :] < k  # (1, 2k)
        new_score = top_logp / length_penalty(step + 1, alpha)
        new_score = tf.where(is_eos & among_first_k & ~done[:, None], new_score, MINUS_INF)
        pool_score = tf.concat([finished_score, new_score], axis=1)  # (B, 3k)
        finished_score, best = tf.math.top_k(pool_score, k)  # (B, k)
        finished = take(join(finished, top), best)  # (B, k, ...)

        # 2. The k best extensions that did not end live on; their caches
        # are their parents'.
        alive_logp, best = tf.math.top_k(tf.where(is_eos, MINUS_INF, top_logp), k)  # (B, k)
        alive = take(top, best)  # (B, k, ...)
        cache = model.reorder_cache(cache, tf.gather(top_beam, best, batch_dims=1))

        # 3. Done: the best live hypothesis cannot beat the N-th best finished one.
        best_possible = alive_logp[:, 0] / tf.maximum(
            length_penalty(tf.minimum(step + 2, max_length), alpha),
            length_penalty(max_length, alpha),
        )  # (B,); log P <= 0, so the larger penalty is the more favourable one
        done |= best_possible <= finished_score[:, last_kept]
        return step + 1, alive, alive_logp, finished, finished_score, done, cache

    def not_done(step, alive, alive_logp, finished, finished_score, done, cache):
        return (step < max_length) & ~tf.reduce_all(done)

    first_beam_only = tf.concat(
        [tf.zeros([batch, 1]), tf.fill([batch, k - 1], MINUS_INF)], axis=1
    )  # (B, k)
    _, alive, alive_logp, finished, finished_score, done, _ = decode_loop(
        model,
        lengths,
        not_done,
        body,
        (
            tf.constant(0),
            empty_history([batch, k], max_length, source_ids, attention_layer),
            first_beam_only,
            empty_history([batch, k], max_length, source_ids, attention_layer),
            tf.fill([batch, k], MINUS_INF),
            tf.zeros([batch], tf.bool),
            cache,
        ),
    )
    # Sentences cut at max_length: their live hypotheses compete as they are.
    alive_score = alive_logp / length_penalty(max_length, alpha)
    alive_score = tf.where(done[:, None], MINUS_INF, alive_score)
    pool_score = tf.concat([finished_score, alive_score], axis=1)  # (B, 2k)
    scores, best = tf.math.top_k(pool_score, n_best or 1)  # (B, N), best first
    outputs = take(join(finished, alive), best)  # (B, N, ...)
    if n_best is None:
        outputs, scores = {key: value[:, 0] for key, value in outputs.items()}, scores[:, 0]
    if attention_layer is None:
        return outputs["tokens"], scores
    return outputs["tokens"], scores, outputs["attention"]
