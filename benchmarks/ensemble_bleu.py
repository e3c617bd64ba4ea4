"""An ensemble of trained runs against each run alone: BLEU on one split.

Each run decodes the split alone, then all of them together as one
`Ensemble` (the mean of their logits at every step), with the same search
(the first run's `decode` options unless given). The runs must share their
tokenizers, e.g. two seeds of one configuration.

    MULTI30K_DIR=... python benchmarks/ensemble_bleu.py \\
        --run-dir runs/seed0 --run-dir runs/seed1 --split val

The last line is JSON: per system the cased BLEU, chrF and the split.
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer import run  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", action="append", required=True, help="repeat: 2 or more")
    parser.add_argument("--split", default="val")
    parser.add_argument("--checkpoint", default="best", choices=["best", "averaged"])
    parser.add_argument("--beam-size", type=int)
    args = parser.parse_args()
    if len(args.run_dir) < 2:
        parser.error("give at least two --run-dir")

    systems = {os.path.basename(os.path.normpath(d)): d for d in args.run_dir}
    systems["ensemble"] = args.run_dir
    results = {}
    for name, run_dirs in systems.items():
        translator, config = run.translators(run_dirs, args.checkpoint, [args.beam_size])
        corpus = run.corpus_split(config["data"], args.split)
        hypotheses = translate_lines(translator[0], corpus.sources, config["decode"]["batch_size"])
        scores = run.score_translations(hypotheses, corpus.targets)
        results[name] = {"bleu": scores["bleu"], "chrf": scores["chrf"]}
        print(f"{name:>12}  BLEU {scores['bleu']:6.2f}  chrF {scores['chrf']:6.2f}", flush=True)
    print(f"signature: {scores['signature']}, split {args.split}, beam {translator[0].beam_size}")
    print(json.dumps({"split": args.split, "checkpoint": args.checkpoint, **results}))


if __name__ == "__main__":
    main()
