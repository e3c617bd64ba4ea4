"""Attention masks: one convention, built and converted in one place.

Polarity everywhere in the public API: a boolean mask where **True means the
position is real and may be attended to**, False means it is blocked. This is
Keras' own convention (`Embedding(mask_zero=True)`,
`keras.layers.MultiHeadAttention`).

Shapes (B batch, H heads, T query length, S key length):

- `padding_mask(token_ids)` gives `(B, 1, 1, S)`, which broadcasts over heads
  and query positions.
- `look_ahead_mask(T)` gives the lower-triangular `(T, T)`: query t may attend
  to keys 0..t.
- `as_attention_mask(mask)` brings a rank 2 `(T, S)`, rank 3 `(B, T, S)` or
  rank 4 mask to rank 4, broadcastable to `(B, H, T, S)`.
- `merge_masks(a, b, ...)` combines masks with AND.

Inside attention the blocked positions get `large_negative(dtype)` added to
their logits (see `scaled_dot_product_attention`).
"""

from keras import backend, ops

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError


def large_negative(dtype):
    """A large negative logit offset that stays finite in `dtype`.

    The reference implementations add `-1e9` to blocked logits. In float16
    -1e9 overflows to -inf and a fully blocked row then softmaxes to NaN, so
    float16 gets -3e4 instead (about half of its largest finite value, leaving
    room for the logit it is added to).

    The package's own attention casts float16 and bfloat16 logits to float32
    before masking (`scaled_dot_product_attention`), so it uses the float32
    value; the float16 one is for attention that stays in float16, such as a
    user's own layer.

    Args:
        dtype: the dtype of the logits.

    Returns:
        A Python float.

    Examples:
        >>> large_negative("float16")
        -30000.0
    """
    if backend.standardize_dtype(dtype) == "float16":
        return -3e4
    return -1e9


def padding_mask(token_ids, pad_id=PAD_ID):
    """Key padding mask of a batch of token ids.

    Args:
        token_ids: integer tensor `(B, S)`.
        pad_id: the padding id. Defaults to 0.

    Returns:
        Boolean tensor `(B, 1, 1, S)`, True where the token is real (may be
        attended to), False at padding.

    Examples:
        >>> padding_mask(np.array([[5, 7, 0]]))[0, 0, 0]
        [True, True, False]
    """
    keep = ops.not_equal(token_ids, pad_id)  # (B, S)
    return keep[:, None, None, :]  # (B, 1, 1, S)


def look_ahead_mask(size):
    """Causal mask: query position t may attend to key positions 0..t.

    Args:
        size: sequence length T (a Python int or a scalar tensor).

    Returns:
        Boolean tensor `(T, T)`, True on and below the diagonal (may attend),
        False above it (future positions, blocked).

    Examples:
        >>> look_ahead_mask(3)
        [[True, False, False], [True, True, False], [True, True, True]]
    """
    positions = ops.arange(size)
    return positions[:, None] >= positions[None, :]  # (T, T)


def key_mask_to_attention_mask(mask):
    """Turns a Keras sequence mask `(B, S)` into an attention mask.

    Args:
        mask: boolean tensor `(B, S)`, True at real positions.

    Returns:
        Boolean tensor `(B, 1, 1, S)`.
    """
    return ops.cast(mask, "bool")[:, None, None, :]  # (B, 1, 1, S)


def as_attention_mask(mask, target_shape=None, name="attention_mask"):
    """Brings a mask to rank 4, broadcastable to `(B, H, T, S)`.

    A rank-2 mask is read as `(T, S)`, a rank-3 mask as `(B, T, S)` (the shape
    `keras.layers.MultiHeadAttention` takes); a rank-4 mask is kept.

    Args:
        mask: boolean (or 0/1) tensor of rank 2, 3 or 4. True = may attend.
        target_shape: optional `(B, H, T, S)` to check broadcasting against;
            entries may be None where unknown.
        name: the argument name used in error messages.

    Returns:
        Boolean tensor of rank 4.

    Raises:
        ValueError: if the rank is not 2, 3 or 4, or a known dimension can
            neither broadcast nor match `target_shape`.
    """
    received_shape = tuple(mask.shape)
    rank = len(received_shape)
    if rank not in (2, 3, 4):
        raise ArgumentError(
            f"`{name}` must have rank 2 (T, S), 3 (B, T, S) or 4 (B, H, T, S). "
            f"Received: {name} with shape={received_shape}"
        )
    mask = ops.cast(mask, "bool")
    if rank == 2:
        mask = mask[None, None, :, :]  # (1, 1, T, S)
    elif rank == 3:
        mask = mask[:, None, :, :]  # (B, 1, T, S)
    if target_shape is not None:
        check_broadcastable(received_shape, mask.shape, target_shape, name)
    return mask


def check_broadcastable(received_shape, shape, target_shape, name):
    """Raises if a known dimension of `shape` can't broadcast to the target.

    Args:
        received_shape: the shape as the caller passed it (for the message).
        shape: the shape to check, aligned on the right with `target_shape`.
        target_shape: the shape it must broadcast to; None where unknown.
        name: the argument name used in the message.
    """
    aligned = zip(reversed(tuple(shape)), reversed(tuple(target_shape)), strict=False)
    broadcastable = len(shape) <= len(target_shape) and all(
        size in (None, 1) or target is None or size == target for size, target in aligned
    )
    if not broadcastable:
        raise ArgumentError(
            f"`{name}` cannot broadcast to shape {tuple(target_shape)}. "
            f"Received: {name} with shape={tuple(received_shape)}"
        )


def merge_masks(*masks):
    """ANDs the masks that are not None; returns None if all are None."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged
