"""Relative position representations (Shaw et al., 2018): attention that sees distances.

A learned vector per clipped distance between query i and key j,
`a_ij = w[clip(j - i, -k, k)]`, is added to the key in the logit and to the
value in the output (the paper's eqs. 3-5):

    e_ij = q_i (k_j + aK_ij)^T / sqrt(d)        z_i = sum_j softmax(e_i)_j (v_j + aV_ij)

This module holds the index arithmetic and the per-query products;
`MultiHeadAttention(positions="relative")` holds the tables `wK`, `wV` of
`2k + 1` rows each, shared by the heads of a layer.
"""

from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.validation import check_positive_int


def check_relative_position(positions, max_relative_position):
    """A `ValueError` unless `max_relative_position` is given with `"relative"` positions and
    only then, as a positive int."""
    if (positions == "relative") != (max_relative_position is not None):
        raise ArgumentError(
            "`max_relative_position` is the clipping distance of relative positions: give "
            'it with `positions="relative"` and only then. '
            f"Received: positions={positions!r}, max_relative_position={max_relative_position!r}"
        )
    if max_relative_position is not None:
        check_positive_int("max_relative_position", max_relative_position)


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


def per_query_product(x, matrices):
    """Each query's row of `x` times that query's own matrix.

    Args:
        x: `(B, H, T, A)`.
        matrices: `(T, A, C)`, one matrix per query position t.

    Returns:
        `(B, H, T, C)`: `out[b, h, t] = x[b, h, t] @ matrices[t]`.
    """
    batch, heads, length, width = (ops.shape(x)[i] for i in range(4))
    rows = ops.transpose(x, (2, 0, 1, 3))  # (T, B, H, A)
    rows = ops.reshape(rows, (length, batch * heads, width))  # (T, B * H, A)
    product = ops.matmul(rows, ops.cast(matrices, x.dtype))  # (T, B * H, C)
    product = ops.reshape(product, (length, batch, heads, ops.shape(matrices)[-1]))
    return ops.transpose(product, (1, 2, 0, 3))  # (B, H, T, C)
