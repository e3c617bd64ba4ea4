"""Training throughput: the package's Transformer against the TF tutorial's.

Trains both models, in the same process and on the same batches, with the same
optimizer (Adam with the warm-up schedule), each with its own loss and metric:
the package's `MaskedSparseCategoricalCrossentropy` (label smoothing 0.1) and
`MaskedAccuracy`, the tutorial's `masked_loss` (no smoothing) and
`masked_accuracy`. Prints target tokens per second (real tokens, padding
excluded) for each and their ratio.
Measurement rounds alternate between the two models so that machine noise
hits both. Each training step is timed on its own, from its start until its
loss is available (without that wait, `fit` on a busy 2-core machine returns
times quantized to ~2 s); the figure of each model is its median step.

Config (from the issue that asked for it): vocab 8000, 4+4 layers, d_model 128,
8 heads, dff 512, batch 64, source and target length 64 with ~15% padding.

Dropout: the reference drops attention weights (rate 0.1, inside
`keras.layers.MultiHeadAttention`), feed-forward outputs and embeddings, as the
tutorial does. The package runs twice: at its defaults (the paper's dropout 0.1
on embeddings and on every sublayer output, none on attention weights), which
gives `package_tok_s` and `ratio`; and with attention dropout 0.1 added, i.e.
at least the reference's random-number work, which gives
`package_attention_dropout_tok_s` and `ratio_attention_dropout`.

Peers and precision: keras-hub's `TransformerEncoder`/`TransformerDecoder`
model of the same size (`kerashub_model.py`, with the package's loss) runs as
a second peer when `keras-hub` is installed (the `[bench]` extra), and the
package runs a fourth time under the `mixed_bfloat16` policy
(`bf16_tok_s`, `bf16_speedup` over the package in float32).

MFU: the FLOPs of one training step are computed from the shapes (the matrix
products of the forward pass at every position, padding included, times 3 for
the backward pass), and the machine's float32 matmul peak is measured in the
same run (the best of 20 products of two 2048 x 2048 matrices); `mfu` is the
package's FLOP/s over that peak.

R-Drop: `--r-drop ALPHA` also trains the package's model compiled with
`r_drop=ALPHA` (each batch twice, stacked) and prints `r_drop_cost`, the
package's tokens/s over that model's: the cost of a step with R-Drop.

Other Keras backends: `--backend jax` also trains the package's model on the
same batches under `KERAS_BACKEND=jax`, in a process of its own started after
the TensorFlow rounds (Keras picks its backend at import), with the same
optimizer, loss, metric, rounds and steps; JAX's `fit` compiles its step with
XLA whatever `--jit-compile` says. It prints JAX's tokens/s and MFU beside
TensorFlow's and adds `jax_tok_s`, `jax_mfu` and `jax_over_tensorflow` to the
JSON line.

Usage:
    python benchmarks/train_throughput.py [--rounds 5] [--steps 10] [--backend jax] [--r-drop 5]

The last line printed is one JSON object with the figures.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from reference_model import (  # noqa: E402
    ReferenceTransformer,
    masked_accuracy,
    masked_loss,
)

import keras_transformer as kt  # noqa: E402

CONFIG = dict(num_layers=4, d_model=128, num_heads=8, dff=512)
VOCAB = 8000
BATCH = 64
LENGTH = 64
PADDING = 0.15


def step_flops(batch=BATCH, source=LENGTH, target=LENGTH, vocab=VOCAB, **config):
    """FLOPs of one training step's matrix products: 3 x the forward pass's."""
    n, d, dff = config["num_layers"], config["d_model"], config["dff"]

    def dense(rows, inputs, outputs):
        return 2 * rows * inputs * outputs

    def attention(queries, keys):  # Q K^T and weights x V, all heads together
        return 2 * 2 * batch * queries * keys * d

    s_rows, t_rows = batch * source, batch * target
    encoder = 4 * dense(s_rows, d, d) + attention(source, source)
    encoder += dense(s_rows, d, dff) + dense(s_rows, dff, d)
    decoder = 4 * dense(t_rows, d, d) + attention(target, target)  # self-attention
    decoder += 2 * dense(t_rows, d, d) + 2 * dense(s_rows, d, d)  # cross: Q, O; K, V
    decoder += attention(target, source)
    decoder += dense(t_rows, d, dff) + dense(t_rows, dff, d)
    forward = n * (encoder + decoder) + dense(t_rows, d, vocab)
    return 3 * forward


def matmul_peak(size=2048, repeats=20, dtype=tf.float32):
    """The best FLOP/s of `size` x `size` matrix products in `dtype` on this machine."""
    a = tf.cast(tf.random.normal((size, size)), dtype)
    b = tf.cast(tf.random.normal((size, size)), dtype)
    product = tf.function(lambda a, b: tf.reduce_sum(tf.matmul(a, b)))
    product(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def make_batches(num_batches, seed=0):
    """Random token batches with lengths drawn so that ~15% is padding."""
    rng = np.random.default_rng(seed)
    shortest = int(round(LENGTH * (1 - 2 * PADDING)))

    def ids():
        lengths = rng.integers(shortest, LENGTH + 1, size=BATCH)
        tokens = rng.integers(1, VOCAB, size=(BATCH, LENGTH))
        tokens[np.arange(LENGTH)[None, :] >= lengths[:, None]] = 0
        return tokens.astype("int32")

    return [((ids(), ids()), ids()) for _ in range(num_batches)]


def make_dataset(batches):
    """The batches as a cached, endlessly repeated `tf.data` pipeline, as `fit` reads it."""
    spec = tf.TensorSpec((BATCH, LENGTH), tf.int32)
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=((spec, spec), spec)
    )
    return dataset.cache().repeat().prefetch(tf.data.AUTOTUNE)


def compile_model(model, loss, metric, **options):
    model.compile(
        optimizer=kt.transformer_optimizer(CONFIG["d_model"]),
        loss=loss,
        metrics=[metric],
        jit_compile=ARGS.jit_compile,
        **options,
    )
    return model


class StepTimer(keras.callbacks.Callback):
    """Records the wall-clock seconds of every training step."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_train_batch_begin(self, batch, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        float(logs["loss"])  # waits until the step has finished
        self.seconds.append(time.perf_counter() - self.start)


def time_steps(model, dataset, steps):
    """Seconds of each of `steps` training steps (the model is compiled)."""
    timer = StepTimer()
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[timer])
    return timer.seconds


def package_model():
    """The package's Transformer of `CONFIG`, compiled with its own loss and metric."""
    return compile_model(
        kt.Transformer(**CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB),
        kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        kt.MaskedAccuracy(),
    )


def other_backend_seconds(backend):
    """Step seconds of the package's model trained under `backend`, in a new process."""
    env = {**os.environ, "KERAS_BACKEND": backend}
    args = [sys.executable, __file__, "--rounds", str(ARGS.rounds), "--steps", str(ARGS.steps)]
    done = subprocess.run(
        [*args, "--package-only"], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {backend} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])["seconds"]


def package_only():
    """Trains only the package's model (under whatever KERAS_BACKEND says) and prints
    its step seconds as JSON."""
    keras.utils.set_random_seed(0)
    model, dataset = package_model(), make_dataset(make_batches(8))
    time_steps(model, dataset, 2)  # traces and compiles
    seconds = []
    for _ in range(ARGS.rounds):
        seconds += time_steps(model, dataset, ARGS.steps)
    print(json.dumps({"backend": keras.backend.backend(), "seconds": seconds}))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per round")
    parser.add_argument(
        "--jit-compile",
        default="auto",
        type=lambda s: {"true": True, "false": False}.get(s.lower(), s),
        help="passed to model.compile for both models: auto, true or false",
    )
    parser.add_argument(
        "--backend",
        choices=["tensorflow", "jax"],
        default="tensorflow",
        help="also train the package's model under this Keras backend (jax)",
    )
    parser.add_argument(
        "--r-drop",
        type=float,
        default=0.0,
        help="also train the package's model with R-Drop of this alpha (compile(r_drop=))",
    )
    parser.add_argument("--package-only", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main():
    keras.utils.set_random_seed(0)
    batches = make_batches(8)
    real_tokens_per_batch = statistics.mean(int((y != 0).sum()) for _, y in batches)
    padding = 1 - real_tokens_per_batch / (BATCH * LENGTH)
    dataset = make_dataset(batches)

    models = {
        "package": package_model(),
        "package_attention_dropout": compile_model(
            kt.Transformer(
                **CONFIG,
                input_vocab_size=VOCAB,
                target_vocab_size=VOCAB,
                attention_dropout_rate=0.1,
            ),
            kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            kt.MaskedAccuracy(),
        ),
        "bf16": compile_model(
            kt.Transformer(
                **CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB, dtype="mixed_bfloat16"
            ),
            kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            kt.MaskedAccuracy(),
        ),
        "reference": compile_model(
            ReferenceTransformer(
                **CONFIG,
                input_vocab_size=VOCAB,
                target_vocab_size=VOCAB,
                dropout_rate=0.1,
            ),
            masked_loss,
            masked_accuracy,
        ),
    }
    if ARGS.r_drop:
        models["package_r_drop"] = compile_model(
            kt.Transformer(**CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB),
            kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            kt.MaskedAccuracy(),
            r_drop=ARGS.r_drop,
        )
    try:
        from kerashub_model import kerashub_transformer

        models["kerashub"] = compile_model(
            kerashub_transformer(
                **CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB, length=LENGTH
            ),
            kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            kt.MaskedAccuracy(),
        )
    except ImportError:
        print("keras-hub is not installed (pip install -e '.[bench]'): its row is left out")
    peak = matmul_peak()
    flops = step_flops(**CONFIG)
    print(f"float32 matmul peak {peak / 1e9:.1f} GFLOP/s; {flops / 1e9:.1f} GFLOP per step")
    for name, model in models.items():
        start = time.perf_counter()
        time_steps(model, dataset, 2)  # traces and compiles
        print(
            f"{name}: {model.count_params():,} parameters, "
            f"warm-up {time.perf_counter() - start:.1f}s"
        )

    seconds = {name: [] for name in models}
    for round_index in range(ARGS.rounds):
        for name, model in models.items():
            seconds[name] += time_steps(model, dataset, ARGS.steps)
        print(
            f"round {round_index + 1}: "
            + ", ".join(
                f"{name} {real_tokens_per_batch / statistics.median(s[-ARGS.steps :]):,.0f} tok/s"
                for name, s in seconds.items()
            )
        )

    if ARGS.backend != "tensorflow":
        seconds[ARGS.backend] = other_backend_seconds(ARGS.backend)
    tok_s = {name: real_tokens_per_batch / statistics.median(s) for name, s in seconds.items()}
    mfu = {name: flops / statistics.median(s) / peak for name, s in seconds.items()}
    peers = [name for name in ("reference", "kerashub") if name in tok_s]
    fastest_peer = max(peers, key=tok_s.get)
    ratio = tok_s["package"] / tok_s["reference"]
    ratio_attention_dropout = tok_s["package_attention_dropout"] / tok_s["reference"]
    print(f"padding fraction {padding:.3f}; jit_compile={ARGS.jit_compile}")
    for name, value in tok_s.items():
        print(f"{name:26s} {value:,.0f} target tokens/s, MFU {mfu[name]:.1%}")
    print(f"package / fastest peer ({fastest_peer}) {tok_s['package'] / tok_s[fastest_peer]:.2f}x")
    print(f"bf16 / float32 {tok_s['bf16'] / tok_s['package']:.2f}x")
    other = {}
    if ARGS.r_drop:
        cost = tok_s["package"] / tok_s["package_r_drop"]
        print(f"R-Drop step cost (package / package with r_drop={ARGS.r_drop:g}) {cost:.2f}x")
        other["r_drop_cost"] = round(cost, 3)
    if ARGS.backend != "tensorflow":
        name = ARGS.backend
        over = tok_s[name] / tok_s["package"]
        print(f"{name} / tensorflow (the package's model) {over:.2f}x")
        other |= {
            f"{name}_tok_s": round(tok_s[name], 1),
            f"{name}_mfu": round(mfu[name], 3),
            f"{name}_over_tensorflow": round(over, 3),
        }
    print(f"ratio (package defaults / reference)          {ratio:.2f}x")
    print(f"ratio (package + attention dropout / reference) {ratio_attention_dropout:.2f}x")
    print(
        json.dumps(
            {
                "benchmark": "train_throughput",
                "package_tok_s": round(tok_s["package"], 1),
                "package_attention_dropout_tok_s": round(tok_s["package_attention_dropout"], 1),
                "reference_tok_s": round(tok_s["reference"], 1),
                "kerashub_tok_s": round(tok_s["kerashub"], 1) if "kerashub" in tok_s else None,
                "bf16_tok_s": round(tok_s["bf16"], 1),
                "bf16_speedup": round(tok_s["bf16"] / tok_s["package"], 3),
                "mfu": round(mfu["package"], 3),
                "mfu_by_model": {name: round(value, 3) for name, value in mfu.items()},
                "over_fastest_peer": round(tok_s["package"] / tok_s[fastest_peer], 3),
                "matmul_peak_gflop_s": round(peak / 1e9, 1),
                "step_gflop": round(flops / 1e9, 2),
                "ratio": round(ratio, 3),
                "ratio_attention_dropout": round(ratio_attention_dropout, 3),
                "package_params": models["package"].count_params(),
                "reference_params": models["reference"].count_params(),
                "padding_fraction": round(padding, 3),
                "rounds": ARGS.rounds,
                "steps_per_round": ARGS.steps,
                "jit_compile": str(ARGS.jit_compile),
                **other,
            }
        )
    )


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.package_only:
        package_only()
    else:
        main()
