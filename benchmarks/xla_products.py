"""XLA's matrix product of a few rows by a large matrix, against TensorFlow's own kernels.

A decoding step multiplies its rows (one per hypothesis: 1 for one sentence's greedy
search, 4 for its beam of 4) by every weight matrix, the largest being the output
projection, a tied `(V, D)` embedding used transposed. This times 32 such products in a
`tf.while_loop`, as a search runs them, for 1, 2 and 4 rows, with XLA and without, with the
matrix used four ways: transposed inside the loop (`matmul(x, transpose(E))`, as the model
writes it), through `transpose_b=True`, transposed once before the loop, and first, its
product with the rows transposed (`transpose(matmul(E, x, transpose_b=True))`, the same
sums as a `(V, B)` product).

    python benchmarks/xla_products.py [--vocab 32000] [--d-model 512] [--rounds 5]

Prints the median milliseconds of each loop; the last line is JSON.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

STEPS = 32
LAYOUTS = ("transpose in the loop", "transpose_b", "transposed before", "embeddings first")


def product_loop(embeddings, layout):
    """A function running `STEPS` products of its rows `(B, D)` by `embeddings` `(V, D)`."""

    def loop(x):
        transposed = tf.transpose(embeddings) if layout == "transposed before" else None  # (D, V)

        def body(step, x):
            if layout == "transpose in the loop":
                logits = tf.matmul(x, tf.transpose(embeddings))
            elif layout == "transpose_b":
                logits = tf.matmul(x, embeddings, transpose_b=True)
            elif layout == "embeddings first":
                by_rows = tf.matmul(embeddings, x, transpose_b=True)  # (V, B)
                logits = tf.transpose(by_rows)
            else:
                logits = tf.matmul(x, transposed)  # (B, V)
            return step + 1, x + 1e-9 * tf.reduce_max(logits, axis=-1, keepdims=True)

        return tf.while_loop(lambda step, x: step < STEPS, body, (0, x))[1]

    return loop


def median_ms(function, x, rounds):
    function(x).numpy()  # tracing and compilation
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function(x).numpy()
        times.append(1000 * (time.perf_counter() - start))
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    embeddings = tf.Variable(rng.standard_normal((args.vocab, args.d_model), dtype=np.float32))
    results = {}
    print(f"{STEPS} products by a ({args.vocab}, {args.d_model}) matrix, median ms")
    print(f"{'rows':>4}  {'layout':22}{'XLA':>9}{'no XLA':>9}")
    for rows in (1, 2, 4):
        x = tf.constant(rng.standard_normal((rows, args.d_model), dtype=np.float32))
        for layout in LAYOUTS:
            times = {
                xla: median_ms(
                    tf.function(product_loop(embeddings, layout), jit_compile=xla), x, args.rounds
                )
                for xla in (True, False)
            }
            results[f"{rows} rows, {layout}"] = {"xla_ms": times[True], "no_xla_ms": times[False]}
            print(f"{rows:4}  {layout:22}{times[True]:9.1f}{times[False]:9.1f}", flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
