"""oneDNN's products in TensorFlow's graph with the weights read from variables, as a model's
layers read them, against weights that are constants of the graph, which oneDNN packs once.

TensorFlow's graph fuses a product with its bias (`x W + b`, as the package's attention and
feed-forward layers write it) into one oneDNN inner product where its rewrites find the
pattern (in these loops, some of the products). When `W` is a constant of the graph, oneDNN
reorders it into its own blocked layout at the first call and keeps that copy; when `W` is
read from a variable, each call starts from the plain layout. This runs 32 steps
in a `tf.while_loop`, each multiplying a few rows by the decoder's matrices with their
biases and dependencies (`graph_one_row.decoder_step`) and then by the output projection, in
float32 and bfloat16, with the weights

- `variables`: read from `tf.Variable`s (the reference);
- `constants`: `tf.constant`s made in the loop's body;
- `frozen`: the `variables` loop after TensorFlow's `convert_variables_to_constants_v2`, as
  a frozen export would run it.

    python benchmarks/constant_weights.py [--rows 1,4,32] [--dtypes float32,bfloat16]

Prints the median milliseconds of a step per row count, dtype and weights, the speed-up over
`variables`, and the largest difference between each one's logits after one step and the
reference's; the last line is JSON.
"""

import argparse
import json

import numpy as np
import tensorflow as tf
from graph_one_row import add_size_arguments, decoder_matrices, decoder_step
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
from xla_products import median_ms

STEPS = 32
WEIGHTS = ("variables", "constants", "frozen")


def in_dtype(array, dtype):
    """`array` as a NumPy array of `dtype` ("float32" or "bfloat16")."""
    return array.astype(tf.as_dtype(dtype).as_numpy_dtype)


def loops(matrices, biases, dtype, layers):
    """`{weights: function(x, steps) -> logits after `steps` steps}` for each of `WEIGHTS`."""
    kernels = [tf.Variable(in_dtype(m, dtype)) for m in matrices]
    offsets = [tf.Variable(in_dtype(b, dtype)) for b in biases]

    def make(read):
        def loop(x, steps):  # (B, D), () -> (B, V)
            def body(i, x, logits):
                kernel, bias = read()

                def product(x, index):
                    return tf.matmul(x, kernel(index)) + bias(index)

                x, logits = decoder_step(x, product, layers)
                return i + 1, x, logits

            vocab = matrices[-1].shape[1]
            initial = (tf.constant(0), x, tf.zeros([tf.shape(x)[0], vocab], x.dtype))
            return tf.while_loop(lambda i, *_: i < steps, body, initial)[2]

        signature = [
            tf.TensorSpec([None, matrices[0].shape[0]], dtype),
            tf.TensorSpec([], tf.int32),
        ]
        return tf.function(loop, input_signature=signature, autograph=False)

    def from_variables():
        return (lambda i: kernels[i]), (lambda i: offsets[i])

    def constants_in_the_body():
        return (
            lambda i: tf.constant(in_dtype(matrices[i], dtype)),
            lambda i: tf.constant(in_dtype(biases[i], dtype)),
        )

    variables = make(from_variables)
    frozen = convert_variables_to_constants_v2(variables.get_concrete_function())
    return {
        "variables": variables,
        "constants": make(constants_in_the_body),
        "frozen": lambda x, steps: frozen(x, steps)[0],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_size_arguments(parser)
    parser.add_argument("--rows", default="1,4,32")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    matrices = decoder_matrices(rng, args.layers, args.d_model, args.dff, args.vocab)
    biases = [(0.01 * rng.standard_normal(m.shape[1])).astype("float32") for m in matrices]
    report = {}
    one, steps = tf.constant(1), tf.constant(STEPS)
    for dtype in args.dtypes.split(","):
        functions = loops(matrices, biases, dtype, args.layers)
        for rows in map(int, args.rows.split(",")):
            x = tf.constant(in_dtype(rng.standard_normal((rows, args.d_model)), dtype))
            one_step = {w: f(x, one).numpy().astype("float32") for w, f in functions.items()}
            times = {
                w: median_ms(lambda x, f=f: f(x, steps), x, args.rounds) / STEPS
                for w, f in functions.items()
            }
            for weights in WEIGHTS:
                speed_up = times["variables"] / times[weights]
                difference = float(np.abs(one_step[weights] - one_step["variables"]).max())
                print(
                    f"{dtype}, {rows} row(s), {weights}: {times[weights]:.2f} ms a step "
                    f"({speed_up:.2f}x), largest difference after one step {difference:.3g}"
                )
                report[f"{dtype} {rows} {weights}"] = {"ms": times[weights], "diff": difference}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
