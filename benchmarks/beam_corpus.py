"""Sentences a second of `translate-corpus` (Apache Beam) against `translate --saved-model`
on the same lines, as whole commands: the pipeline's overhead, and how it grows with workers.

Writes `--lines` sentences of the built-in corpus (German number words, the README main
job's source side) into `--files` files, then, `--repeats` times in turn:

- `translate --saved-model SAVED_MODEL < all lines` (one process; the reference),
- `translate-corpus` on the files with `--direct_num_workers=1` (in memory), and with
  `--direct_num_workers=2 --direct_running_mode=multi_processing`,

each timed from the command's start to its exit (TensorFlow's import and the model's loading
included, as a user waits for them), and checks that every configuration wrote the
reference's translations, line for line.

    python benchmarks/beam_corpus.py saved_models/numbers_de_en/1 --lines 10000

The last line is JSON: per configuration the median seconds and sentences a second, each
pipeline's speed over the reference's (`*_over_translate`), and `same_output`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from keras_transformer.datasets import numbers_corpus

CLI = [sys.executable, "-m", "keras_transformer"]
PIPELINES = {
    "beam_1_worker": ["--direct_num_workers=1"],
    "beam_2_workers": ["--direct_num_workers=2", "--direct_running_mode=multi_processing"],
}


def write_inputs(directory, lines, files):
    """`files` files of `lines` sentences in all, and their lines in file order."""
    sources = numbers_corpus("train", source_lang="de", target_lang="en", limit=lines).sources
    per_file = -(-lines // files)
    names = []
    for index in range(files):
        name = os.path.join(directory, f"part-{index}.de")
        chunk = sources[index * per_file : (index + 1) * per_file]
        with open(name, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in chunk))
        names.append(name)
    return names, sources


def timed(command, stdin=None):
    """`(seconds, stdout)` of a command, which must succeed."""
    start = time.perf_counter()
    done = subprocess.run(command, stdin=stdin, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("saved_model", help="a SavedModel version directory")
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    times = {name: [] for name in ["translate", *PIPELINES]}
    same = True
    with tempfile.TemporaryDirectory() as directory:
        names, sources = write_inputs(directory, args.lines, args.files)
        everything = os.path.join(directory, "all.txt")
        with open(everything, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in sources))
        for repeat in range(args.repeats):
            with open(everything, encoding="utf-8") as stdin:
                seconds, printed = timed(
                    [*CLI, "translate", "--saved-model", args.saved_model], stdin
                )
            times["translate"].append(seconds)
            reference = printed.splitlines()
            for name, options in PIPELINES.items():
                out = os.path.join(directory, f"{name}-{repeat}")
                command = [*CLI, "translate-corpus", "--saved-model", args.saved_model]
                command += [arg for path in names for arg in ("--input", path)]
                seconds, _ = timed([*command, "--output", out, *options])
                times[name].append(seconds)
                written = []
                for path in names:
                    with open(os.path.join(out, os.path.basename(path)), encoding="utf-8") as f:
                        written += f.read().splitlines()
                same = same and written == reference
            print(
                f"round {repeat + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items())
            )

    result = {"lines": args.lines, "files": args.files, "repeats": args.repeats}
    for name, values in times.items():
        median = statistics.median(values)
        result[f"{name}_s"] = round(median, 2)
        result[f"{name}_sentences_per_s"] = round(args.lines / median, 1)
    for name in PIPELINES:
        result[f"{name}_over_translate"] = round(result["translate_s"] / result[f"{name}_s"], 2)
    result["same_output"] = same
    print(json.dumps(result))


if __name__ == "__main__":
    main()
