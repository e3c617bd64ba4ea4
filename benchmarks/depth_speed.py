"""Encoder and decoder depths: what a deep encoder with a shallow decoder saves.

Untrained models of the Multi30k recipe's width (d_model 256, 4 heads, dff
1024, one shared 8,000-piece vocabulary, tied embeddings) with the depths of
`--depths` (encoder+decoder; the first is the reference, by default the
recipe's 3+3). For each: its parameters; a training step (`train_on_batch`,
the package's loss, 64 pairs of 32 tokens each side); and greedy search and
beam 4 with XLA, 64 random sources of 16 tokens into 32 new tokens each, EOS
set to an id no search produces so every model does the same number of steps.
Each is timed `--rounds` times after a warm-up, the median counts, and the
models are timed in turn within a round. The JSON line holds each depth's
speed over the reference's (above 1: faster).

    python benchmarks/depth_speed.py [--depths 3+3,6+1,4+2] [--rounds 5]
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from decode_speed import time_alternately, xla_searches  # noqa: E402

import keras_transformer as kt  # noqa: E402

BOS, NEVER = 2, -1  # NEVER: an EOS id no search can produce
VOCAB, BATCH, SOURCE_LENGTH, NEW_TOKENS = 8000, 64, 16, 32


def build(encoder_layers, decoder_layers):
    """A compiled recipe-width Transformer with these depths, and its three timed
    functions of a batch of sources (the training step ignores it and trains on
    fixed random pairs)."""
    model = kt.Transformer(
        (encoder_layers, decoder_layers), 256, 4, 1024, VOCAB, VOCAB, shared_embeddings="all"
    )
    model.compile(optimizer="adam", loss=kt.MaskedSparseCategoricalCrossentropy())
    rng = np.random.default_rng(0)
    pairs = [rng.integers(3, VOCAB, (BATCH, 32)).astype("int32") for _ in range(3)]
    functions = {
        "train_step": lambda _: model.train_on_batch((pairs[0], pairs[1]), pairs[2]),
        **xla_searches(model, BOS, NEVER, NEW_TOKENS),
    }
    return model, functions


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="3+3,6+1,4+2", help="encoder+decoder, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    depths = [tuple(int(n) for n in depth.split("+")) for depth in args.depths.split(",")]
    keras.utils.set_random_seed(0)
    sources = np.random.default_rng(0).integers(3, VOCAB, (BATCH, SOURCE_LENGTH)).astype("int32")
    models = {f"{e}+{d}": build(e, d) for e, d in depths}
    functions = {
        (name, call): function
        for name, (_, calls) in models.items()
        for call, function in calls.items()
    }
    seconds, _ = time_alternately(functions, [sources], args.rounds)  # warms each up first
    median = {
        name: {call: seconds[name, call] for call in calls} for name, (_, calls) in models.items()
    }
    reference = next(iter(median))
    print(f"{'depths':7s} {'parameters':>10s} {'train step':>11s} {'greedy':>9s} {'beam 4':>9s}")
    for name, (model, _) in models.items():
        m = median[name]
        print(
            f"{name:7s} {model.count_params():10,d} {m['train_step']:9.3f} s"
            f" {BATCH / m['greedy']:5.0f} s/s {BATCH / m['beam4']:5.0f} s/s"
        )
    speed_over_reference = {
        name: {call: round(median[reference][call] / m[call], 3) for call in m}
        for name, m in median.items()
    }
    print(json.dumps({"reference": reference, "speed_over_reference": speed_over_reference}))


if __name__ == "__main__":
    sys.exit(main())
