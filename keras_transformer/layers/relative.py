"""Relative positions in attention: Shaw et al.'s vectors (2018) and T5's bias (2020).

A learned vector per clipped distance between query i and key j,
`a_ij = w[clip(j - i, -k, k)]`, is added to the key in the logit and to the
value in the output (the paper's eqs. 3-5):

    e_ij = q_i (k_j + aK_ij)^T / sqrt(d)        z_i = sum_j softmax(e_i)_j (v_j + aV_ij)

T5's relative attention bias (Raffel et al., 2020, §2.1) adds one learned
scalar per head and distance bucket to the logits, `e_ij += b[bucket(j - i)]`:
distances below 8 (16 one way) each have a bucket, longer ones share buckets
spaced logarithmically up to 128, and beyond it the last.

This module holds the index arithmetic and the per-query products; the
schemes `positions.ShawRelative` and `positions.T5Bias` hold the tables, in
each self-attention layer.
"""

import math

from keras import ops

from keras_transformer.layers.rows import over_rows


def relative_indices(query_positions, key_positions, max_distance):
    """The table row of every query-key pair: `clip(j - i, -k, k) + k`.

    Args:
        query_positions: integer `(T,)`, the position of each query.
        key_positions: integer `(S,)`, the position of each key.
        max_distance: the clipping distance k; farther keys share the row of
            distance k.

    Returns:
        int32 `(T, S)` in `[0, 2k]`.

    Examples:
        >>> relative_indices(np.arange(3), np.arange(3), 1)
        [[1, 2, 2], [0, 1, 2], [0, 0, 1]]
    """
    distance = (
        ops.cast(key_positions, "int32")[None, :] - ops.cast(query_positions, "int32")[:, None]
    )
    return ops.clip(distance, -max_distance, max_distance) + max_distance  # (T, S)


def relative_buckets(
    query_positions, key_positions, bidirectional, num_buckets=32, max_distance=128
):
    """T5's distance bucket of every query-key pair.

    Bidirectional (an encoder): half the buckets for keys after the query,
    half for keys before it. Unidirectional (a decoder's causal attention):
    every bucket for keys before the query; keys after it share bucket 0.

    Args:
        query_positions: integer `(T,)`.
        key_positions: integer `(S,)`.
        bidirectional: whether keys after the query have buckets of their own.
        num_buckets: the buckets, 32 in T5.
        max_distance: the distance from which all share the last bucket, 128 in T5.

    Returns:
        int32 `(T, S)` in `[0, num_buckets)`.

    Examples:
        >>> relative_buckets(np.array([20]), np.arange(0, 40, 6), bidirectional=True)
        [[10, 9, 8, 2, 20, 24, 26]]
    """
    keys = ops.cast(key_positions, "int32")[None, :]  # (1, S)
    distance = keys - ops.cast(query_positions, "int32")[:, None]  # (T, S): j - i
    buckets = num_buckets
    bucket = ops.zeros_like(distance)
    if bidirectional:
        buckets //= 2
        bucket += ops.cast(distance > 0, "int32") * buckets
        distance = ops.abs(distance)
    else:
        distance = ops.maximum(-distance, 0)
    exact = buckets // 2  # distances below it have a bucket each
    spread = ops.log(ops.cast(ops.maximum(distance, 1), "float32") / exact)
    spread = spread / math.log(max_distance / exact) * (buckets - exact)
    far = ops.minimum(exact + ops.cast(spread, "int32"), buckets - 1)
    return bucket + ops.where(distance < exact, distance, far)  # (T, S)


def per_query_product(x, matrices):
    """Each query's row of `x` times that query's own matrix.

    Args:
        x: `(B, H, T, A)`.
        matrices: `(T, A, C)`, one matrix per query position t, or `(1, A, C)`,
            one matrix for every query (all T queries at one position, as the
            hypotheses of a decoding step are): then one plain product.

    Returns:
        `(B, H, T, C)`: `out[b, h, t] = x[b, h, t] @ matrices[t]`.
    """
    if matrices.shape[0] == 1:
        matrix = ops.cast(matrices[0], x.dtype)  # (A, C)
        return over_rows(lambda rows: ops.matmul(rows, matrix), x)  # (B, H, T, C)
    batch, heads, length, width = (ops.shape(x)[i] for i in range(4))
    rows = ops.transpose(x, (2, 0, 1, 3))  # (T, B, H, A)
    rows = ops.reshape(rows, (length, batch * heads, width))  # (T, B * H, A)
    product = ops.matmul(rows, ops.cast(matrices, x.dtype))  # (T, B * H, C)
    product = ops.reshape(product, (length, batch, heads, ops.shape(matrices)[-1]))
    return ops.transpose(product, (1, 2, 0, 3))  # (B, H, T, C)
