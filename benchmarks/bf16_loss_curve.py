"""Does mixed bfloat16 learn like float32? The loss of the first steps on the same batches.

Trains the model of `train_throughput.py` (4+4 layers, d_model 128, 8 heads,
dff 512) on Multi30k German -> English with a shared 8,000-piece SentencePiece
vocabulary and 4,096-token batches, twice from the same initial weights and on
the same batches in the same order: in float32 and under `mixed_bfloat16`.
Prints the mean training loss of both over each window of 25 steps (each
step's own loss, from `train_on_batch`), the largest relative difference of a
window between the two, and each run's tokens per second (the first step,
which traces, left out); with `--plot FILE`, draws both curves step by step.

Usage:
    python benchmarks/bf16_loss_curve.py [--data $MULTI30K_DIR] [--steps 300] [--plot curves.png]

The last line printed is one JSON object with the figures.
"""

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from train_throughput import CONFIG  # noqa: E402

import keras_transformer as kt  # noqa: E402
from keras_transformer.datasets import load_split  # noqa: E402
from keras_transformer.text import SentencePieceTokenizer, load_tokenizer, make_batches  # noqa: E402

WINDOW = 25
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train(dtype, tokenizer_directory, corpus, steps):
    """The training loss of each of `steps` steps, and the tokens/s, of one run under `dtype`."""
    keras.utils.set_random_seed(0)  # the same weights, batches and dropout for both runs
    # Loaded after seeding: seeding clears TensorFlow's kernels, with the tokenizer's resource.
    tokenizer = load_tokenizer(tokenizer_directory)
    batches = make_batches(corpus, tokenizer, tokenizer, max_length=100, tokens_per_batch=4096)
    model = kt.Transformer(**CONFIG, input_vocab_size=8000, target_vocab_size=8000, dtype=dtype)
    model.compile(
        optimizer=kt.transformer_optimizer(CONFIG["d_model"], warmup_steps=400),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
    )
    losses, tokens, seconds = [], 0, 0.0
    for step, (inputs, target) in enumerate(batches.dataset.repeat().take(steps)):
        start = time.perf_counter()
        losses.append(float(model.train_on_batch(inputs, target)))  # this batch's own loss
        if step > 0:  # the first step traces the training function
            seconds += time.perf_counter() - start
            tokens += int(np.count_nonzero(target))
    return np.array(losses), tokens / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.environ.get(
        "MULTI30K_DIR", os.path.join(REPO, "..", "shared", "data", "multi30k")
    )
    parser.add_argument("--data", default=default_data, help="Multi30k directory")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--plot", help="a PNG file to draw both curves into")
    args = parser.parse_args()

    corpus = load_split(args.data, "train", "de", "en")
    tokenizer = SentencePieceTokenizer.train(corpus.sources + corpus.targets, vocab_size=8000)
    curves, rates = {}, {}
    with tempfile.TemporaryDirectory() as directory:
        tokenizer.save(directory)
        for dtype in ("float32", "mixed_bfloat16"):
            curves[dtype], rates[dtype] = train(dtype, directory, corpus, args.steps)
    windows = args.steps // WINDOW
    means = {
        dtype: curve[: windows * WINDOW].reshape(windows, WINDOW).mean(axis=1)
        for dtype, curve in curves.items()
    }
    relative = np.abs(means["mixed_bfloat16"] - means["float32"]) / means["float32"]
    print("steps      float32  mixed_bfloat16  (mean loss of the window)")
    for index in range(windows):
        first = index * WINDOW + 1
        print(
            f"{first:4d}-{first + WINDOW - 1:<4d} {means['float32'][index]:8.4f} "
            f"{means['mixed_bfloat16'][index]:14.4f}   {relative[index]:6.2%}"
        )
    print(f"largest relative difference of a window: {relative.max():.2%}")
    print(
        f"tokens/s: float32 {rates['float32']:,.0f}, mixed_bfloat16 "
        f"{rates['mixed_bfloat16']:,.0f} ({rates['mixed_bfloat16'] / rates['float32']:.2f}x)"
    )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(7, 4))
        for dtype, curve in curves.items():
            axes.plot(np.arange(1, args.steps + 1), curve, label=dtype, linewidth=0.8)
        axes.set_xlabel("training step")
        axes.set_ylabel("loss (label-smoothed cross-entropy)")
        axes.set_title("Multi30k de-en, the same batches in float32 and mixed bfloat16")
        axes.legend()
        figure.tight_layout()
        figure.savefig(args.plot, dpi=100)
        print(f"plotted: {args.plot}")
    print(
        json.dumps(
            {
                "steps": args.steps,
                "window": WINDOW,
                "float32_window_loss": [round(v, 4) for v in means["float32"]],
                "bf16_window_loss": [round(v, 4) for v in means["mixed_bfloat16"]],
                "max_relative_difference": round(float(relative.max()), 4),
                "float32_tok_s": round(rates["float32"], 1),
                "bf16_tok_s": round(rates["mixed_bfloat16"], 1),
                "bf16_speedup": round(rates["mixed_bfloat16"] / rates["float32"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
