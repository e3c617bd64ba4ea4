"""TensorFlow's graph (no XLA) multiplying a few rows by a decoder's weights, each matrix
whole, as two halves of its columns, or as two halves of its rows.

A decoding step of one sentence multiplies one row (four for a beam of 4; 32 for greedy
search of 32 sentences) by every weight matrix of the decoder, one after another, and then
by the output projection. This runs 32 such steps in a `tf.while_loop` with the decoder's
products and their dependencies (per layer: the query, key and value products of one input,
the attention output, the cross-attention's query and output, the feed-forward's two; then
the `(D, V)` output projection), each product whole, as two products of half the columns
joined (`concat`, "halves": copies of the columns, the same sums), or as two products of
half the inputs by half the rows, added ("split inputs": slices of the whole matrix, the
sums in another order). TensorFlow's executor can run the two products of a split side by
side. Each setting of intra-op threads (`TF_NUM_INTRAOP_THREADS`, 1 and 2 by default) runs
in a fresh process.

    python benchmarks/graph_one_row.py [--layers 6] [--d-model 512] [--dff 2048] [--vocab 32000]

Prints the median milliseconds of a step for each row count, layout and thread setting,
and the largest difference of each split's outputs from the whole products'; the last line
is JSON.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

STEPS = 32
ROWS = (1, 4, 32)
LAYOUTS = ("whole", "halves", "split inputs")
SPLITS = LAYOUTS[1:]


def decoder_matrices(rng, layers, d_model, dff, vocab):
    """The decoder's float32 matrices `(D_in, D_out)`, layer by layer, then the `(D, V)` output
    projection: per layer the self-attention's four, the cross-attention's query and output
    (its key and value products are of the encoder's output, once a sentence) and the
    feed-forward's two."""
    d = d_model
    per_layer = [(d, d)] * 4 + [(d, d)] * 2 + [(d, dff), (dff, d)]
    shapes = [shape for _ in range(layers) for shape in per_layer] + [(d, vocab)]
    return [(rng.standard_normal(shape) / np.sqrt(shape[0])).astype("float32") for shape in shapes]


def decoder_step(x, product, layers):
    """One step's products with their dependencies: `(B, D)` -> `(B, D)`, logits `(B, V)`.

    `product(x, index)` multiplies `x` by matrix `index` of `decoder_matrices`.
    """
    import tensorflow as tf  # in the measuring processes only, not in the one that starts them

    for layer in range(layers):
        first = layer * 8
        q, k, v = (product(x, first + i) for i in range(3))
        x = tf.tanh(x + product(q + k + v, first + 3))
        x = tf.tanh(x + product(product(x, first + 4), first + 5))
        hidden = tf.nn.silu(product(x, first + 6))  # (B, dff)
        x = tf.tanh(x + product(hidden, first + 7))
    return x, product(x, 8 * layers)


def add_size_arguments(parser):
    """`--layers`, `--d-model`, `--dff` and `--vocab`, at OPUS-MT's size by default."""
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--dff", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32000)


def measure(args):
    """`{rows: {layout: ms a step}, "largest difference": {split: ...}}` in this process."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from xla_products import median_ms  # the same timing as the XLA products' script

    rng = np.random.default_rng(0)
    matrices = decoder_matrices(rng, args.layers, args.d_model, args.dff, args.vocab)
    whole = [tf.Variable(a) for a in matrices]
    halves = [
        (tf.Variable(a[:, : a.shape[1] // 2]), tf.Variable(a[:, a.shape[1] // 2 :]))
        for a in matrices
    ]

    def product(x, index, layout):
        if layout == "whole":
            return tf.matmul(x, whole[index])
        if layout == "split inputs":
            matrix = whole[index]  # (D_in, D_out)
            half = matrix.shape[0] // 2
            return tf.matmul(x[:, :half], matrix[:half]) + tf.matmul(x[:, half:], matrix[half:])
        left, right = halves[index]
        return tf.concat([tf.matmul(x, left), tf.matmul(x, right)], axis=1)

    results, outputs = {}, {}
    for rows in ROWS:
        start = tf.constant(rng.standard_normal((rows, args.d_model)).astype("float32"))
        for layout in LAYOUTS:

            @tf.function(autograph=False)
            def loop(x, layout=layout):
                def body(i, x, logits):
                    x, logits = decoder_step(x, lambda x, i: product(x, i, layout), args.layers)
                    return i + 1, x, logits

                initial = (tf.constant(0), x, tf.zeros([tf.shape(x)[0], args.vocab]))
                return tf.while_loop(lambda i, *_: i < STEPS, body, initial)[2]

            outputs[rows, layout] = loop(start).numpy()
            results.setdefault(rows, {})[layout] = median_ms(loop, start, args.rounds) / STEPS
    results["largest difference"] = {
        split: max(
            float(np.abs(outputs[rows, "whole"] - outputs[rows, split]).max()) for rows in ROWS
        )
        for split in SPLITS
    }
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", default="1,2", help="intra-op thread counts, one process each")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    report = {}
    for threads in args.threads.split(","):
        env = dict(os.environ, TF_NUM_INTRAOP_THREADS=threads, TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run(
            [sys.executable, __file__, "--child", *sys.argv[1:]],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        report[f"{threads} intra-op threads"] = result
        for rows in ROWS:
            times = result[str(rows)]
            splits = ", ".join(
                f"{split} {times[split]:.2f} ms ({times['whole'] / times[split]:.2f}x)"
                for split in SPLITS
            )
            print(
                f"{threads} intra-op thread(s), {rows} row(s): whole {times['whole']:.2f} ms a "
                f"step, {splits}"
            )
        for split, difference in result["largest difference"].items():
            print(f"  largest difference of the {split}' logits from the whole's: {difference}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
