"""Checks of the tensors every search takes, with errors that name the argument."""

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError


def check_source_ids(source_ids):
    """`source_ids` as a tensor, or an `ArgumentError` unless it is integer `(B, S)`."""
    source_ids = tf.convert_to_tensor(source_ids)
    if source_ids.dtype not in (tf.int32, tf.int64) or source_ids.shape.rank != 2:
        raise ArgumentError(
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
        raise ArgumentError(
            "`prefix_ids` must be integer token ids of shape (batch, prefix_length). "
            f"Received: prefix_ids with dtype={prefix_ids.dtype.name}, shape={prefix_ids.shape}"
        )
    prefix_ids = tf.ensure_shape(tf.cast(prefix_ids, tf.int32), [batch, None])
    return tf.pad(prefix_ids, [[0, 0], [0, 1]], constant_values=PAD_ID)
