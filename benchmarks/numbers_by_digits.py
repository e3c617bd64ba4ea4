"""Exact matches by digit count, for a model trained on the built-in numbers corpus.

The test split holds numbers of 3 to 6 digits that training never saw; the
hundred numbers below 100 are all in training (see
`keras_transformer.datasets.numbers`), so they are decoded separately, every
one of them. An average over the test split hides a model that cannot say
"zwei"; this prints, for greedy search and each beam size, the exact-match
share of each digit count, and lists the small numbers it gets wrong.

    python benchmarks/numbers_by_digits.py --run-dir runs/numbers_de_en [--beam-size 1,4]

With `--from-evaluate`, the split's translations are read from the files
`keras-transformer evaluate` wrote for the same checkpoint and beam sizes
(`<split>.<checkpoint>.beam<k>.hyp.txt`), and only the numbers below 100 are
decoded.

The last line is JSON: per search (`beam1`, `beam4`, ...), `by_digits` (digit
count -> exact-match share over the test split and the numbers 0-99 together),
`small` (share of the 100 numbers below 100), `test` (share of the test
split) and `small_wrong` (number -> translation, for the misses).
"""

import argparse
import collections
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from keras_transformer import run  # noqa: E402
from keras_transformer.datasets import numbers_corpus, small_numbers, split_numbers  # noqa: E402
from keras_transformer.inference import translate_lines  # noqa: E402


def exact_by_digits(translator, batch_size, source_lang, target_lang, split, test_outputs=None):
    """The figures of one search: exact-match shares by digit count, small numbers, test.

    `test_outputs` are the split's translations by this search, when they are known;
    otherwise the split is decoded.
    """
    test = numbers_corpus(split, source_lang, target_lang)
    small = small_numbers(source_lang, target_lang)
    numbers = split_numbers(split) + list(range(100))
    references = test.targets + small.targets
    if test_outputs is None:
        test_outputs = translate_lines(translator, test.sources, batch_size)
    if len(test_outputs) != len(test.sources):
        raise SystemExit(f"{len(test_outputs)} translations of {len(test.sources)} sentences")
    outputs = test_outputs + translate_lines(translator, small.sources, batch_size)
    right = [out == ref for out, ref in zip(outputs, references, strict=True)]
    by_digits = collections.defaultdict(list)
    for number, correct in zip(numbers, right, strict=True):
        by_digits[len(str(number))].append(correct)
    n_test = len(test.sources)
    return {
        "by_digits": {d: sum(v) / len(v) for d, v in sorted(by_digits.items())},
        "small": sum(right[n_test:]) / 100,
        "test": sum(right[:n_test]) / n_test,
        "small_wrong": {n: outputs[n_test + n] for n in range(100) if not right[n_test + n]},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--beam-size", default="1,4", help="comma-separated, 1 is greedy")
    parser.add_argument("--split", default="test")
    parser.add_argument("--checkpoint", default="best")
    parser.add_argument(
        "--from-evaluate",
        action="store_true",
        help="read the split's translations from the files `evaluate` wrote",
    )
    args = parser.parse_args()
    beam_sizes = [int(k) for k in args.beam_size.split(",")]
    made, config = run.translators(args.run_dir, args.checkpoint, beam_sizes)
    data = config["data"]
    if data["corpus"] != "numbers":
        parser.error(f"{args.run_dir} was trained on corpus {data['corpus']!r}, not 'numbers'")
    figures = {}
    for translator in made:
        written = None
        if args.from_evaluate:
            directory = run.RunDirectory(args.run_dir)
            path = directory.hypotheses_path(args.split, args.checkpoint, translator.beam_size)
            if not os.path.isfile(path):
                parser.error(f"{path} is missing: run `keras-transformer evaluate` first")
            with open(path, encoding="utf-8") as f:
                written = f.read().splitlines()
        result = exact_by_digits(
            translator,
            config["decode"]["batch_size"],
            data["source_lang"],
            data["target_lang"],
            args.split,
            written,
        )
        figures[f"beam{translator.beam_size}"] = result
        shares = "  ".join(f"{d} digits {s:6.1%}" for d, s in result["by_digits"].items())
        print(f"beam {translator.beam_size}: {shares}")
        print(f"  0-99 {result['small']:.1%}, {args.split} split {result['test']:.1%}")
        for number, text in result["small_wrong"].items():
            print(f"  {number}: {text!r}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
