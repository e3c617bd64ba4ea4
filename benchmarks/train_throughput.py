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

Usage:
    python benchmarks/train_throughput.py [--rounds 5] [--steps 10]

The last line printed is one JSON object with the figures.
"""

import argparse
import json
import os
import statistics
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


def compile_model(model, loss, metric):
    model.compile(
        optimizer=kt.transformer_optimizer(CONFIG["d_model"]),
        loss=loss,
        metrics=[metric],
        jit_compile=ARGS.jit_compile,
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
    return parser.parse_args()


def main():
    keras.utils.set_random_seed(0)
    batches = make_batches(8)
    real_tokens_per_batch = statistics.mean(int((y != 0).sum()) for _, y in batches)
    padding = 1 - real_tokens_per_batch / (BATCH * LENGTH)
    dataset = (
        tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature=(
                (
                    tf.TensorSpec((BATCH, LENGTH), tf.int32),
                    tf.TensorSpec((BATCH, LENGTH), tf.int32),
                ),
                tf.TensorSpec((BATCH, LENGTH), tf.int32),
            ),
        )
        .cache()
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )

    models = {
        "package": compile_model(
            kt.Transformer(**CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB),
            kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            kt.MaskedAccuracy(),
        ),
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

    tok_s = {name: real_tokens_per_batch / statistics.median(s) for name, s in seconds.items()}
    ratio = tok_s["package"] / tok_s["reference"]
    ratio_attention_dropout = tok_s["package_attention_dropout"] / tok_s["reference"]
    print(f"padding fraction {padding:.3f}; jit_compile={ARGS.jit_compile}")
    for name, value in tok_s.items():
        print(f"{name:26s} {value:,.0f} target tokens/s")
    print(f"ratio (package defaults / reference)          {ratio:.2f}x")
    print(f"ratio (package + attention dropout / reference) {ratio_attention_dropout:.2f}x")
    print(
        json.dumps(
            {
                "benchmark": "train_throughput",
                "package_tok_s": round(tok_s["package"], 1),
                "package_attention_dropout_tok_s": round(tok_s["package_attention_dropout"], 1),
                "reference_tok_s": round(tok_s["reference"], 1),
                "ratio": round(ratio, 3),
                "ratio_attention_dropout": round(ratio_attention_dropout, 3),
                "package_params": models["package"].count_params(),
                "reference_params": models["reference"].count_params(),
                "padding_fraction": round(padding, 3),
                "rounds": ARGS.rounds,
                "steps_per_round": ARGS.steps,
                "jit_compile": str(ARGS.jit_compile),
            }
        )
    )


if __name__ == "__main__":
    ARGS = parse_args()
    main()
