"""Scaled dot-product attention (Vaswani et al., 2017, §3.2.1)."""

import math

import keras
from keras import ops

from keras_transformer.layers import masks, single_query
from keras_transformer.layers.relative import per_query_product

_LOW_PRECISION = ("float16", "bfloat16")


def scaled_dot_product_attention(
    q, k, v, mask=None, dropout=None, relative_keys=None, relative_values=None, logit_bias=None
):
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

    Blocked positions are removed the reference way, by adding a large negative
    number to their logits: `logits += (1 - mask) * large_negative`, with a
    constant that stays finite in the logits' dtype (`masks.large_negative`).
    Under mixed precision the logits are cast to float32 before the mask and
    the softmax, so a fully blocked row gives uniform weights, never NaN.

    Args:
        q: queries `(..., T, K)`.
        k: keys `(..., S, K)`.
        v: values `(..., S, Kv)`.
        mask: optional boolean tensor broadcastable to `(..., T, S)`.
            True = the query may attend to that key; False = blocked.
        dropout: optional callable applied to the attention weights before
            they weigh the values (e.g. a bound `keras.layers.Dropout`).
        relative_keys: optional `(T, S, K)`, Shaw et al.'s relative position
            vectors (`layers.relative`) added to key j for query t in the
            logits, or `(1, S, K)` for queries at one position; with them q
            must be `(B, H, T, K)`.
        relative_values: optional `(T, S, Kv)` or `(1, S, Kv)`, the vectors
            added to value j for query t in the outputs.
        logit_bias: optional, broadcastable to `(..., T, S)`, added to the
            scaled logits before the mask (T5's relative attention bias).

    Returns:
        `(outputs, weights)`: outputs `(..., T, Kv)` and the attention weights
        `(..., T, S)` (before dropout), each row summing to 1.

    Raises:
        ValueError: if a known dimension of `mask` cannot broadcast to
            `(..., T, S)`.

    Examples:
        ```python
        q = k = v = np.random.rand(2, 4, 5, 8).astype("float32")  # (B, H, T, K)
        outputs, weights = scaled_dot_product_attention(
            q, k, v, mask=look_ahead_mask(5))  # outputs (2, 4, 5, 8)
        ```
    """
    depth = q.shape[-1]
    one_query = single_query.applies(q)  # a decoding step's one query a sentence
    if one_query:
        logits = single_query.product(q, k, transpose_b=True)  # (..., 1, S)
    else:
        logits = ops.matmul(q, ops.swapaxes(k, -1, -2))  # (..., T, S)
    if relative_keys is not None:
        logits += per_query_product(q, ops.swapaxes(relative_keys, -1, -2))  # (B, H, T, S)
    # The logits are scaled after the product, not q before it: TensorFlow 2.21's
    # graph with oneDNN returns an empty tensor for a scaled q multiplied by keys
    # that stay the same through a `tf.while_loop`, with the mask's term added.
    logits *= ops.cast(1.0 / math.sqrt(depth), logits.dtype)
    if logit_bias is not None:
        logits += ops.cast(logit_bias, logits.dtype)
    if keras.backend.standardize_dtype(logits.dtype) in _LOW_PRECISION:
        logits = ops.cast(logits, "float32")
    if mask is not None:
        masks.check_broadcastable(mask.shape, mask.shape, logits.shape, "mask")
        blocked = 1.0 - ops.cast(mask, logits.dtype)
        logits += blocked * masks.large_negative(logits.dtype)
    if logits.shape[-1] == 1:
        # A softmax over one key is 1, blocked or not (the mask is finite);
        # `ops.softmax` would warn that a size-1 axis is likely a mistake.
        weights = ops.ones_like(logits, dtype=v.dtype)  # (..., T, 1)
    else:
        weights = single_query.softmax(logits) if one_query else ops.softmax(logits, axis=-1)
        weights = ops.cast(weights, v.dtype)  # (..., T, S)
    attended = weights if dropout is None else dropout(weights)
    if one_query:
        outputs = single_query.product(attended, v)  # (..., 1, Kv)
    else:
        outputs = ops.matmul(attended, v)  # (..., T, Kv)
    if relative_values is not None:
        outputs += per_query_product(attended, relative_values)  # (B, H, T, Kv)
    return outputs, weights
