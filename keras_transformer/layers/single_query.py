"""Attention of a single query per row on TensorFlow's own kernels.

A decoding step without XLA attends from one query per sentence (greedy
search, sampling) to a cache of keys and values. TensorFlow's graph hands
`keras.ops.matmul` and `keras.ops.softmax` of such small tensors to oneDNN,
whose calls cost more than their work there; `BatchMatMulV3`, which it leaves
on TensorFlow's own kernels, and a softmax written out of elementwise ops
give the same numbers several times faster (`benchmarks/attention_kernels.py`,
`docs/benchmarks.md#attention-without-xla`). Other backends, and several
queries per row, keep Keras' ops.
"""

import keras
from keras import ops


def applies(q):
    """Whether the queries `q` `(..., T, K)` are one a row (T = 1, static) on TensorFlow."""
    return keras.backend.backend() == "tensorflow" and q.shape[-2] == 1


def product(a, b, transpose_b=False):
    """`a @ b` (`b` transposed in its last two axes with `transpose_b`), batched, in
    `a`'s dtype, on TensorFlow's own kernel.

    Example:
        ```python
        logits = product(q, k, transpose_b=True)  # (B, H, 1, K) x (B, H, S, K) -> (B, H, 1, S)
        ```
    """
    import tensorflow as tf  # this module serves the TensorFlow backend only

    return tf.raw_ops.BatchMatMulV3(x=a, y=ops.cast(b, a.dtype), Tout=a.dtype, adj_y=transpose_b)


def softmax(logits):
    """Softmax over the last axis from elementwise ops and sums: exp of the logits less
    their maximum, over its sum."""
    exp = ops.exp(logits - ops.max(logits, axis=-1, keepdims=True))
    return exp / ops.sum(exp, axis=-1, keepdims=True)
