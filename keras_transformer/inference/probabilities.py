"""What the searches and the teacher-forced scoring share: next-token log-probabilities
and the length penalty that ranks finished outputs."""

import tensorflow as tf

from keras_transformer.constants import PAD_ID

MINUS_INF = float("-inf")


def length_penalty(length, alpha):
    """GNMT length penalty (Wu et al., 2016): ((5 + |Y|) / 6) ** alpha.

    Examples:
        >>> float(length_penalty(7, 0.6))  # (12 / 6) ** 0.6
        1.5157...
    """
    return ((5.0 + tf.cast(length, tf.float32)) / 6.0) ** alpha


def log_softmax_without_pad_and_bos(logits, bos_id):
    """log-softmax over the last axis `V` with padding and BOS at probability zero.

    Neither is ever generated, so the searches and the scoring of given
    outputs both give them no probability mass.
    """
    token = tf.range(tf.shape(logits)[-1])  # (V,)
    blocked = (token == PAD_ID) | (token == bos_id)
    return tf.nn.log_softmax(tf.where(blocked, MINUS_INF, logits))
