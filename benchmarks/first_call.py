"""Time to a new translator's first translations: tracing and compiling, against the
same package at another git revision.

A `Translator` traces its search (and, with XLA, compiles it) the first time it
sees an input; every later call of the same shape reuses the result. This
script measures what a user waits for: a new translator of a run directory
(`run.make_translator`, beam 4 unless `--beam-size`) translates five batches one
after the other, of 2, 1, 5, 3 and 2 sentences, the middle three padded to new
buckets, and then the first batch again ten times (the steady call). Each
package version runs in a fresh process, so that nothing traced by one
measurement serves another; `--baseline REV` runs the package as it was at git
revision REV (`git archive` of `keras_transformer/`) beside the working tree's,
with and without XLA, and prints the ratio of each call's time.

    python benchmarks/first_call.py --run-dir runs/numbers_de_en --baseline 3264bae

The last line is JSON: per version and XLA setting, the seconds of each of the
five calls and of the steady call; with a baseline, `ratio`: the baseline's
seconds over the working tree's, per call (above 1: the working tree is faster).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCHES = [
    ["dreihunderteinundzwanzig", "siebzehn"],
    ["siebzehn"],
    ["eins"] * 5,
    ["zwei " * 12] * 3,
    ["achtzehn", "neunzehn"],
]

MEASURE = """
import json, sys, time
import keras_transformer as kt
translator = kt.run.make_translator(sys.argv[1], beam_size=int(sys.argv[2]),
                                    jit_compile=sys.argv[3] == "1")
batches = json.loads(sys.argv[4])
seconds = []
for batch in batches:
    start = time.perf_counter()
    translator.translate(batch)
    seconds.append(time.perf_counter() - start)
start = time.perf_counter()
for _ in range(10):
    translator.translate(batches[0])
print(json.dumps({"calls": seconds, "steady": (time.perf_counter() - start) / 10}))
"""


def measure(package_root, run_dir, beam_size, xla):
    """One fresh process's seconds, with the package found first in `package_root`."""
    env = dict(os.environ, PYTHONPATH=package_root, TF_CPP_MIN_LOG_LEVEL="3")
    arguments = [run_dir, str(beam_size), "1" if xla else "0", json.dumps(BATCHES)]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *arguments],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def package_at(revision, folder):
    """`folder`, holding `keras_transformer/` as it was at git revision `revision`."""
    archive = subprocess.run(
        ["git", "-C", REPO, "archive", revision, "keras_transformer"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--beam-size", type=int, default=4)
    parser.add_argument("--baseline", help="a git revision to compare with")
    args = parser.parse_args()
    run_dir = os.path.abspath(args.run_dir)
    with tempfile.TemporaryDirectory() as folder:
        versions = {"working tree": REPO}
        if args.baseline:
            versions[args.baseline] = package_at(args.baseline, folder)
        figures = {}
        for xla in (False, True):
            for name, root in versions.items():
                key = f"{name}, {'XLA' if xla else 'no XLA'}"
                figures[key] = measure(root, run_dir, args.beam_size, xla)
                calls = ", ".join(f"{s:.2f}" for s in figures[key]["calls"])
                print(f"{key}: calls {calls} s; steady {figures[key]['steady'] * 1000:.0f} ms")
            if args.baseline:
                ours = figures[f"working tree, {'XLA' if xla else 'no XLA'}"]
                theirs = figures[f"{args.baseline}, {'XLA' if xla else 'no XLA'}"]
                ratio = [b / a for a, b in zip(ours["calls"], theirs["calls"], strict=True)]
                figures[f"ratio, {'XLA' if xla else 'no XLA'}"] = ratio
                print(f"  {args.baseline} / working tree: " + ", ".join(f"{r:.2f}x" for r in ratio))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
