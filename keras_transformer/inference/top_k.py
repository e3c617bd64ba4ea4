"""A top-k that a CPU computes in a fraction of `tf.math.top_k`'s time on a large vocabulary."""

import math

import tensorflow as tf

from keras_transformer.inference.probabilities import MINUS_INF


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

    Examples:
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
