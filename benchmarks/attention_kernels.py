"""A decoding step's attention in TensorFlow's graph (no XLA), through three sets of kernels.

A search without XLA (the default SavedModel, `jit_compile=False`) attends at every step
from one query per hypothesis to the keys and values of the cache: per decoder layer once
to the target's cache and once to the source's. This times 32 steps of 12 such attentions
(6 layers, both attending to a cache of `--positions` positions per hypothesis) in a
`tf.while_loop`, for the four rows of a translation benchmark (greedy search and beam 4, one
sentence and 32), each way:

- `Keras ops`: `keras.ops.matmul` and `keras.ops.softmax`, as the package attends with
  several queries a row (beam search), which TensorFlow's graph runs on oneDNN;
- `BatchMatMulV3`: `layers.single_query`, as the package attends with one query a row
  (greedy search, sampling) on TensorFlow: both products as `tf.raw_ops.BatchMatMulV3`, the
  softmax written out (exp of the logits less their maximum, over its sum);
- `einsum`: both products as `tf.einsum`, the same softmax.

Each way is checked first against NumPy in float64 on one attention of each row's shapes.

    python benchmarks/attention_kernels.py [--heads 8] [--depth 64] [--positions 32]

Prints milliseconds a step for each row and way, the speed over `Keras ops`, and the largest
difference from NumPy; the last line is JSON.
"""

import argparse
import json
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402
from xla_products import median_ms  # noqa: E402

from keras_transformer.layers import single_query  # noqa: E402

STEPS = 32
ATTENTIONS = 12  # per step: 6 decoder layers, each attending to the target and the source
ROWS = {  # name: (sentences B, hypotheses per sentence k)
    "greedy, one sentence": (1, 1),
    "beam 4, one sentence": (1, 4),
    "greedy, 32 sentences": (32, 1),
    "beam 4, 32 sentences": (32, 4),
}
WAYS = ("Keras ops", "BatchMatMulV3", "einsum")


def attend(q, k, v, mask, way):
    """Attention of `q` `(B, H, k, K)` to `k`, `v` `(B, H, S, K)` under boolean `mask`
    `(B, 1, k, S)`: outputs `(B, H, k, K)`."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    blocked = (1.0 - tf.cast(mask, q.dtype)) * -1e9
    if way == "Keras ops":
        logits = ops.matmul(q, ops.swapaxes(k, -1, -2)) * scale + blocked
        return ops.matmul(ops.softmax(logits, axis=-1), v)
    if way == "einsum":
        logits = tf.einsum("bhqd,bhsd->bhqs", q, k) * scale + blocked
        return tf.einsum("bhqs,bhsd->bhqd", single_query.softmax(logits), v)
    logits = single_query.product(q, k, transpose_b=True) * scale + blocked
    return single_query.product(single_query.softmax(logits), v)


def numpy_attention(q, k, v, mask):
    """The same attention in float64 NumPy, the reference."""
    logits = np.einsum("bhqd,bhsd->bhqs", q, k) / math.sqrt(q.shape[-1])
    logits = np.where(mask, logits, logits - 1e9)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bhqs,bhsd->bhqd", weights, v)


def row_inputs(rng, sentences, hypotheses, args):
    """Queries, the 12 attentions' keys (their values too), and a mask, for one row."""
    entries = args.positions * hypotheses  # a cache holds every hypothesis' entries
    q = rng.standard_normal((sentences, args.heads, hypotheses, args.depth)).astype("float32")
    keys = [
        rng.standard_normal((sentences, args.heads, entries, args.depth)).astype("float32")
        for _ in range(ATTENTIONS)
    ]
    mask = rng.random((sentences, 1, hypotheses, entries)) < 0.7
    mask[..., 0] = True  # every query sees at least one entry
    return q, keys, mask


def step_ms(way, q, keys, mask, rounds):
    """Median milliseconds of a step of `STEPS` in a `tf.while_loop`, each step the
    attentions to `keys` one after another, each one's output the next one's query."""

    @tf.function(autograph=False)
    def loop(q, keys, mask):
        def body(i, q):
            for k in keys:
                q = 0.5 * q + 0.5 * attend(q, k, k, mask, way)
            return i + 1, q

        return tf.while_loop(lambda i, q: i < STEPS, body, (tf.constant(0), q))[1]

    def run(q):
        out = loop(q, keys, mask)
        if out.shape != q.shape:
            raise AssertionError(f"{way}: the loop gave {out.shape}, not {q.shape}")
        return out

    return median_ms(run, q, rounds) / STEPS


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--depth", type=int, default=64, help="size of a head's keys")
    parser.add_argument("--positions", type=int, default=32, help="cache positions")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    report = {}
    for name, (sentences, hypotheses) in ROWS.items():
        q, keys, mask = row_inputs(rng, sentences, hypotheses, args)
        reference = numpy_attention(q.astype("float64"), keys[0], keys[0], mask)
        key_tensors = [tf.constant(k) for k in keys]
        mask_tensor = tf.constant(mask)
        row = {}
        for way in WAYS:
            one = attend(tf.constant(q), key_tensors[0], key_tensors[0], mask_tensor, way)
            row[way] = {
                "ms": step_ms(way, tf.constant(q), key_tensors, mask_tensor, args.rounds),
                "difference from NumPy": float(np.abs(one.numpy() - reference).max()),
            }
        report[name] = row
        keras_ops = row["Keras ops"]["ms"]
        print(
            f"{name}: "
            + ", ".join(
                f"{way} {row[way]['ms']:.3f} ms a step ({keras_ops / row[way]['ms']:.2f}x, "
                f"{row[way]['difference from NumPy']:.1e} from NumPy)"
                for way in WAYS
            ),
            flush=True,
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
