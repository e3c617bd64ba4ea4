"""Sampling: each next token drawn from the model's distribution, cut by temperature,
top-k and top-p (nucleus sampling)."""

import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.defaults import MAX_LENGTH
from keras_transformer.inference.loop import token_by_token
from keras_transformer.inference.probabilities import MINUS_INF


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
    length_options=None,
    constraint_ids=None,
    continues_word=None,
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
        length_options: optional `inference.LengthOptions`.
        constraint_ids: optional int `(B, C, T)`: phrases each output must
            contain (`inference.constraints`).
        continues_word: optional bool `(V,)`, the target pieces that go on
            with the word before them (`Tokenizer.continues_word`): with
            `constraint_ids`, none may follow a phrase, so that phrases are
            written as whole words.

    Returns:
        `(token_ids (B, max_length) int32, log_probs (B,) float32)`: the
        samples and the sum of their tokens' log-probabilities under the
        model (before temperature and cuts).

    Examples:
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

    token_ids, log_probs, _ = token_by_token(
        model,
        source_ids,
        bos_id,
        eos_id,
        max_length,
        draw,
        prefix_ids,
        None,
        length_options,
        constraint_ids,
        continues_word,
    )
    return token_ids, log_probs


def check_sampling(temperature, top_k, top_p):
    """Raises a `ValueError` naming the first sampling option out of range."""
    if not temperature > 0:
        raise ArgumentError(f"`temperature` must be > 0. Received: temperature={temperature}")
    if not 0 < top_p <= 1:
        raise ArgumentError(f"`top_p` must be in (0, 1]. Received: top_p={top_p}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ArgumentError(f"`top_k` must be an integer >= 0. Received: top_k={top_k!r}")


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
