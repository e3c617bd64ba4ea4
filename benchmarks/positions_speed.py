"""Decode speed of each position scheme, against the paper's sinusoidal table.

Untrained models of the README main job's shape (its configuration's `model`
section: 3+3 layers, d_model 128, 4 heads, dff 512; a 500-piece vocabulary a
side), one per scheme: the sinusoidal table (the reference), a learned table,
a table in every layer or in queries and keys only, rotary positions, Shaw et
al.'s relative positions (clipped at 16) and T5's relative bias. Each decodes
greedily and with beam 4 under XLA, a batch of `--batch` random sources of 16
tokens into 32 new tokens each (EOS set to an id no search produces, so every
model does the same number of steps), and one source at a time. Each is timed
`--rounds` times after a warm-up, the median counts, the models in turn within
a round. The JSON line holds each scheme's speed over the sinusoidal one's
(above 1: faster).

    python benchmarks/positions_speed.py [--rounds 5] [--batch 64]
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
from keras_transformer.config import load_config  # noqa: E402
from keras_transformer.layers import Learned, ShawRelative, Sinusoidal  # noqa: E402
from keras_transformer.model_section import model_arguments  # noqa: E402

BOS, NEVER = 2, -1  # NEVER: an EOS id no search can produce
VOCAB, SOURCE_LENGTH, NEW_TOKENS = 500, 16, 32
SCHEMES = {
    "sinusoidal": "sinusoidal",
    "learned": Learned(64),
    "every_layer": Sinusoidal(placement="every_layer"),
    "queries_and_keys": Sinusoidal(placement="queries_and_keys"),
    "rotary": "rotary",
    "relative": ShawRelative(16),
    "relative_bias": "relative_bias",
    "alibi": "alibi",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    shape = model_arguments(load_config()["model"])
    rng = np.random.default_rng(0)
    batch = rng.integers(3, VOCAB, (args.batch, SOURCE_LENGTH)).astype("int32")
    singles = [batch[i : i + 1] for i in range(8)]
    functions = {}
    for scheme, positions in SCHEMES.items():
        model = kt.Transformer(
            **{**shape, "positions": positions}, input_vocab_size=VOCAB, target_vocab_size=VOCAB
        )
        model((batch[:1], batch[:1, :2]))
        for name, function in xla_searches(model, BOS, NEVER, NEW_TOKENS).items():
            functions[scheme, name] = function
    seconds = {}
    for size, batches in ((args.batch, [batch]), (1, singles)):
        timed, _ = time_alternately(functions, batches, args.rounds)  # warms each up first
        for (scheme, name), value in timed.items():
            seconds[scheme, name, size] = value / len(batches)  # one batch of `size`
    print(f"{'scheme':17s} {'greedy':>14s} {'beam 4':>14s}  (batch {args.batch}; one sentence)")
    for scheme in SCHEMES:
        cells = []
        for name in ("greedy", "beam4"):
            rate = args.batch / seconds[scheme, name, args.batch]
            cells.append(f"{rate:5.0f} s/s {1000 * seconds[scheme, name, 1]:5.1f} ms")
        print(f"{scheme:17s} {cells[0]:>20s} {cells[1]:>20s}")
    speed = {
        scheme: {
            f"{name}_batch{size}": round(
                seconds["sinusoidal", name, size] / seconds[scheme, name, size], 3
            )
            for name in ("greedy", "beam4")
            for size in (args.batch, 1)
        }
        for scheme in SCHEMES
    }
    print(json.dumps({"reference": "sinusoidal", "speed_over_reference": speed}))


if __name__ == "__main__":
    sys.exit(main())
