"""What the searches and the teacher-forced scoring share: next-token log-probabilities
and the length penalty that ranks finished outputs."""

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.inference.defaults import LENGTH_PENALTIES, LENGTH_PENALTY

MINUS_INF = float("-inf")


def length_penalty(length, alpha, kind=LENGTH_PENALTY):
    """What a log-probability of `length` tokens is divided by to rank it.

    Args:
        length: |Y|, the output's tokens, EOS included (a number or a tensor).
        alpha: the penalty's strength; 0 ranks by log-probability.
        kind: "gnmt", ((5 + |Y|) / 6) ** alpha (Wu et al., 2016), or
            "average", |Y| ** alpha, the normalization of Marian and
            CTranslate2 (`inference.defaults.LENGTH_PENALTIES`).

    Examples:
        >>> float(length_penalty(7, 0.6))  # (12 / 6) ** 0.6
        1.5157...
        >>> float(length_penalty(7, 1.0, "average"))
        7.0
    """
    if kind not in LENGTH_PENALTIES:
        raise ArgumentError(
            f"`length_penalty` must be one of {', '.join(LENGTH_PENALTIES)}. Received: {kind!r}"
        )
    length = tf.cast(length, tf.float32)
    return (length if kind == "average" else (5.0 + length) / 6.0) ** alpha


def log_softmax_without_pad_and_bos(logits, bos_id):
    """log-softmax over the last axis `V` with padding and BOS at probability zero.

    Neither is ever generated, so the searches and the scoring of given
    outputs both give them no probability mass.

    Computed as `(z - max z) - logsumexp(z - max z)`, the values of
    `tf.nn.log_softmax` in TensorFlow, at its speed: LiteRT's converter
    turns `tf.nn.log_softmax`, and the formula written out, into its
    `LOG_SOFTMAX` kernel, which takes 4-5 ns an element on logits as spread
    out as a trained model's (exponentials that underflow), against about
    0.9 ns for these ops (docs/guides/litert.md, "Speed").
    """
    token = tf.range(tf.shape(logits)[-1])  # (V,)
    blocked = (token == PAD_ID) | (token == bos_id)
    logits = tf.where(blocked, MINUS_INF, logits)  # (..., V)
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)  # (..., V), max 0
    return shifted - tf.reduce_logsumexp(shifted, axis=-1, keepdims=True)
