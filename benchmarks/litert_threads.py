"""LiteRT interpreter threads on a trained run: one, two, and `LiteRTTranslator`'s default.

Exports a run's LiteRT files (float32 and dynamic int8, greedy and beam 4, one sentence a
call and a free batch), and times each with every count of `--threads` and with the
default (`export.litert_runtime.default_threads`; a free-batch file runs that many
interpreters of one thread each): the first `--sentences` sentences of the
split one at a time (p50 ms) on the one-sentence file, and as one batch (sentences/s) on
the free-batch file. Every thread count must give the same translations (checked).

    python benchmarks/litert_threads.py --run-dir runs/numbers_de_en [--split test] \
        [--sentences 32] [--threads 1,2]

The last line is JSON.
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from engine_rows import time_engines  # noqa: E402

from keras_transformer import run  # noqa: E402
from keras_transformer.export import LiteRTTranslator  # noqa: E402
from keras_transformer.run.evaluate import test_set  # noqa: E402


def exported(run_dir, work):
    """`{(quantization, beam): (one-sentence directory, free-batch directory)}`."""
    files = {}
    for quantization in ("float32", "dynamic_int8"):
        for beam in (1, 4):
            files[quantization, beam] = tuple(
                run.export_litert_run(
                    run_dir,
                    os.path.join(work, f"{quantization}_beam{beam}_{batch or 'free'}"),
                    beam_size=beam,
                    quantization=None if quantization == "float32" else quantization,
                    batch_size=batch,
                )
                for batch in (1, None)
            )
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--split", help="default: the run's data.test_split")
    parser.add_argument("--sentences", type=int, default=32, help="also the batch's size")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    args = parser.parse_args()

    config = run.load_run(args.run_dir)[0]
    sentences = test_set(config, args.split)[1].sources[: args.sentences]
    files = exported(args.run_dir, tempfile.mkdtemp(prefix="litert_threads_"))
    engines, defaults = {}, {}
    for (quantization, beam), (one_dir, free_dir) in files.items():
        for threads in [int(n) for n in args.threads.split(",")] + [None]:
            one = LiteRTTranslator(one_dir, num_threads=threads)
            free = LiteRTTranslator(free_dir, num_threads=threads)
            name = f"{quantization}_beam{beam}_{threads or 'default'}"
            engines[name] = (lambda s, t=one: t([s]), free)
            defaults[name] = (one.num_threads, free.num_threads)
            assert free(sentences) == [one([s])[0] for s in sentences], name
    latency, throughput = time_engines(engines, sentences)
    print(f"{args.run_dir}: {len(sentences)} sentences")
    header = "file, threads (one sentence / batch)"
    print(f"{header:44}{'1 sentence p50 ms':>19}{'batch sent/s':>14}")
    for name in engines:
        label = f"{name} ({defaults[name][0]} / {defaults[name][1]})"
        print(f"{label:44}{latency[name]:19.2f}{throughput[name]:14.1f}")
    print(json.dumps(dict(latency_ms=latency, sentences_per_s=throughput, threads=defaults)))


if __name__ == "__main__":
    main()
