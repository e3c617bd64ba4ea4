"""Position schemes compared: each trained the same way, then scored on one split.

For each scheme (`model.positions`) this trains a run of one configuration
with the same overrides, seed and batches, then decodes a split with greedy
search and prints cased BLEU and chrF per scheme, the training time and the
best validation loss. The default schedule is a shortened Multi30k recipe:
4 epochs in float32 without R-Drop or subword sampling, the same for every
scheme, enough to rank them, not to reach the recipe's BLEU.

    MULTI30K_DIR=../shared/data/multi30k python benchmarks/positions.py \\
        --runs runs/positions [--schemes sinusoidal,learned] [--set train.epochs=6]

A run directory that has finished training is scored again without training
(so a killed comparison resumes where it stopped). The last line is JSON:
per scheme `bleu`, `chrf`, `val_loss` and `train_seconds`, and the split.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer import run  # noqa: E402
from keras_transformer.config import load_config  # noqa: E402
from keras_transformer.run.directory import RunDirectory  # noqa: E402

SHORTENED = [
    "train.epochs=4",
    "train.cooldown_epochs=0",
    "train.r_drop=0",
    "train.mixed_precision=false",
    "tokenizer.sampling_alpha=null",
]
# What each scheme needs beyond its name.
SCHEME_SETTINGS = {
    "sinusoidal": [],
    "learned": ["model.max_positions=128"],
    "rotary": [],
    "relative": ["model.max_relative_position=16"],
    "relative_bias": [],
    "alibi": [],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, help="parent directory of one run per scheme")
    parser.add_argument("--config", default="multi30k_de_en")
    parser.add_argument("--schemes", default=",".join(SCHEME_SETTINGS))
    parser.add_argument("--set", action="append", default=[], help="section.key=value, for all")
    parser.add_argument("--split", default="val")
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    unknown = sorted(set(schemes) - set(SCHEME_SETTINGS))
    if unknown:
        parser.error(f"unknown schemes {unknown}; known: {sorted(SCHEME_SETTINGS)}")

    results = {}
    for scheme in schemes:
        overrides = [*SHORTENED, *args.set, f"model.positions={scheme}"]
        config = load_config(args.config, overrides + SCHEME_SETTINGS[scheme])
        run_dir = os.path.join(args.runs, scheme)
        started = time.perf_counter()
        if not RunDirectory(run_dir).is_finished():
            run.train(run_dir, config, verbose=2)
        seconds = time.perf_counter() - started
        scores = run.evaluate(run_dir, split=args.split, beam_size=1)
        results[scheme] = {
            "bleu": scores["bleu"],
            "chrf": scores["chrf"],
            "val_loss": RunDirectory(run_dir).best_val_loss(),
            "train_seconds": round(seconds),
        }
        print(
            f"{scheme:>12}  BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}  "
            f"val loss {results[scheme]['val_loss']:.3f}  {seconds / 60:.1f} min",
            flush=True,
        )
    schedule = " ".join(SHORTENED + args.set)
    print(f"{args.split} split, greedy; schedule (later settings win): {schedule}")
    print(json.dumps({"split": args.split, **results}))


if __name__ == "__main__":
    main()
