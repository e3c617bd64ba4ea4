"""Length generalization of each position scheme: train on short sentences, decode long ones.

For each scheme this trains the README main job's configuration (the built-in
numbers corpus, German to English) with training pairs longer than
`--train-max-length` tokens dropped, so the model never sees a source or target
beyond it, then decodes the test split (numbers of 3 to 6 digits) greedily and
prints the exact-match share by length, the longer side of the pair in tokens
as training counts it (the source with EOS, the target with BOS): the lengths
training held, and the longer ones, where a scheme has to carry what it learned
about positions past the positions it was trained on.

    python benchmarks/positions_length.py --runs runs/positions_length \\
        [--schemes sinusoidal,rotary] [--train-max-length 12] [--set train.epochs=4]

A run directory that has finished training is decoded again without training.
The last line is JSON: per scheme, the exact-match share and count per length,
and the share over the lengths seen and unseen in training.
"""

import argparse
import collections
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.config import load_config  # noqa: E402
from keras_transformer.datasets import numbers_corpus  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402
from keras_transformer.run.directory import RunDirectory  # noqa: E402

# What each scheme sets; a learned table keeps rows for the longest decoded sentence.
SCHEMES = {
    "sinusoidal": [],
    "learned": ["model.positions=learned", "model.max_positions=64"],
    "every_layer": ["model.add_positions=every_layer"],
    "queries_and_keys": ["model.add_positions=queries_and_keys"],
    "rotary": ["model.positions=rotary"],
    "relative": ["model.positions=relative", "model.max_relative_position=16"],
    "relative_bias": ["model.positions=relative_bias"],
    "alibi": ["model.positions=alibi"],
}


def exact_by_length(translator, sources, references, seen):
    """Exact-match share per pair length in tokens, and over lengths `<= seen` and above."""
    source_lengths = np.count_nonzero(translator.source_ids(sources).numpy(), axis=1)  # with EOS
    target_lengths = translator.target_tokenizer.tokenize(references).row_lengths().numpy() + 1
    lengths = np.maximum(source_lengths, target_lengths)
    outputs = translate_lines(translator, sources, 256)
    right = collections.defaultdict(list)
    for length, output, reference in zip(lengths, outputs, references, strict=True):
        right[int(length)].append(output == reference)
    shares = {n: (float(np.mean(v)), len(v)) for n, v in sorted(right.items())}

    def share(keep):
        kept = [r for n, v in right.items() if keep(n) for r in v]
        return float(np.mean(kept)) if kept else None

    return {
        "by_length": shares,
        "seen": share(lambda n: n <= seen),
        "unseen": share(lambda n: n > seen),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", required=True, help="parent directory of one run per scheme")
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    parser.add_argument(
        "--train-max-length",
        type=int,
        default=12,
        help="longest training pair in tokens (the test split's pairs reach 17)",
    )
    parser.add_argument("--set", action="append", default=[], help="section.key=value, for all")
    args = parser.parse_args()
    schemes = args.schemes.split(",")
    unknown = sorted(set(schemes) - set(SCHEMES))
    if unknown:
        parser.error(f"unknown schemes {unknown}; known: {sorted(SCHEMES)}")
    shorter = [f"data.max_length={args.train_max_length}", "data.overflow=drop"]

    results = {}
    for scheme in schemes:
        config = load_config(None, [*shorter, *args.set, *SCHEMES[scheme]])
        data = config["data"]
        test = numbers_corpus(data["test_split"], data["source_lang"], data["target_lang"])
        run_dir = os.path.join(args.runs, scheme)
        if not RunDirectory(run_dir).is_finished():
            run.train(run_dir, config, verbose=2)
        (translator,), _ = run.translators(run_dir, "best", [1])
        results[scheme] = exact_by_length(
            translator, test.sources, test.targets, args.train_max_length
        )
        figures = results[scheme]
        print(
            f"{scheme:>17}  seen {figures['seen']:.1%}  unseen {figures['unseen'] or 0:.1%}  "
            + "  ".join(f"{n}:{s:.0%}/{c}" for n, (s, c) in figures["by_length"].items()),
            flush=True,
        )
    print(f"test split, greedy; training pairs of at most {args.train_max_length} tokens")
    print(json.dumps({"train_max_length": args.train_max_length, **results}))


if __name__ == "__main__":
    main()
