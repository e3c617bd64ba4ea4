"""A corpus streamed from disk against the same corpus held in memory.

Writes `--pairs` synthetic sentence pairs (2,000,000 by default) as gzip
shards `train-NNN.{de,en}.gz` into `--directory` (kept, and reused when it
already holds them), trains one SentencePiece tokenizer on a sample, then
runs each way of feeding `make_batches` in a process of its own, so that its
peak memory is its own:

- in memory: `load_split` reads the shards into Python lists
  (`ParallelCorpus`), and `make_batches(cache=True)` keeps the tokenized pairs;
- streaming: `StreamingCorpus` reads the shards with `TextLineDataset`, and
  `make_batches(cache=False)` tokenizes them again each epoch.

Each process reports its peak resident memory, the seconds `make_batches`
took (its counting pass reads the whole corpus once), input-pipeline batches
per second over `--batches` batches, and training steps per second of the
training benchmark's model (4+4 layers, d_model 128) over `--steps` steps.

    python benchmarks/streaming_data.py --directory /tmp/stream2m

The last line is JSON: per mode `peak_rss_mb`, `make_batches_s`,
`batches_per_s`, `steps_per_s`, and the ratios streaming / in memory.
"""

import argparse
import gzip
import json
import os
import random
import resource
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

MODE = "--mode"
SHARD_PAIRS = 250_000
WORDS = [f"w{i}" for i in range(3000)]


def write_corpus(directory, pairs):
    """Synthetic pairs: 4 to 30 random words; the target is the source reversed, retagged."""
    os.makedirs(directory, exist_ok=True)
    marker = os.path.join(directory, f"complete-{pairs}")
    if os.path.exists(marker):
        return
    rng = random.Random(0)
    for shard, start in enumerate(range(0, pairs, SHARD_PAIRS)):
        count = min(SHARD_PAIRS, pairs - start)
        with (
            gzip.open(os.path.join(directory, f"train-{shard:03d}.de.gz"), "wt", 1) as de,
            gzip.open(os.path.join(directory, f"train-{shard:03d}.en.gz"), "wt", 1) as en,
        ):
            for _ in range(count):
                words = rng.choices(WORDS, k=rng.randint(4, 30))
                de.write(" ".join(words) + "\n")
                en.write(" ".join(w.replace("w", "v") for w in reversed(words)) + "\n")
    open(marker, "w").close()


class StepClock(keras.callbacks.Callback):
    """Seconds from the end of step `warmup` to the end of the last step."""

    def __init__(self, warmup):
        super().__init__()
        self.warmup = warmup
        self.start = self.seconds = None

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.warmup:
            self.start = time.perf_counter()
        elif self.start is not None:
            self.seconds = time.perf_counter() - self.start


def measure(args):
    """Runs in a child process: one mode's figures as a JSON line."""
    import keras_transformer as kt
    from keras_transformer.datasets import StreamingCorpus, load_split
    from keras_transformer.text import load_tokenizer, make_batches

    # Before the tokenizer: seeding clears TensorFlow's kernel cache, and with it
    # the SentencePiece kernel that the tokenizer's ops look up.
    keras.utils.set_random_seed(0)
    tokenizer = load_tokenizer(os.path.join(args.directory, "tokenizer"))
    start = time.perf_counter()
    if args.mode == "memory":
        corpus = load_split(args.directory, "train", "de", "en")
    else:
        corpus = StreamingCorpus.from_directory(args.directory, "train", "de", "en")
    batches = make_batches(
        corpus,
        tokenizer,
        tokenizer,
        max_length=64,
        tokens_per_batch=4096,
        seed=0,
        cache=args.mode == "memory",
    )
    make_seconds = time.perf_counter() - start

    iterator = iter(batches.dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(args.batches):
        next(iterator)
    batches_per_s = args.batches / (time.perf_counter() - start)

    model = kt.Transformer(4, 128, 8, 512, tokenizer.vocab_size, tokenizer.vocab_size)
    model.compile(
        optimizer=kt.transformer_optimizer(128), loss=kt.MaskedSparseCategoricalCrossentropy()
    )
    clock = StepClock(warmup=3)
    model.fit(
        batches.dataset.repeat(),
        steps_per_epoch=3 + args.steps,
        epochs=1,
        verbose=0,
        callbacks=[clock],
    )
    steps_per_s = args.steps / clock.seconds
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    figures = {
        "peak_rss_mb": round(peak_mb),
        "make_batches_s": round(make_seconds, 1),
        "batches_per_s": round(batches_per_s, 2),
        "steps_per_s": round(steps_per_s, 3),
        "num_batches": batches.num_batches,
    }
    print(json.dumps(figures), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(MODE, choices=["memory", "streaming"], help=argparse.SUPPRESS)
    parser.add_argument("--directory", default="/tmp/keras_transformer_stream")
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    if args.mode:
        measure(args)
        return

    start = time.perf_counter()
    write_corpus(args.directory, args.pairs)
    print(f"corpus of {args.pairs} pairs ready in {time.perf_counter() - start:.0f} s")
    tokenizer_dir = os.path.join(args.directory, "tokenizer")
    if not os.path.isdir(tokenizer_dir):
        from keras_transformer.datasets import StreamingCorpus
        from keras_transformer.text import SentencePieceTokenizer

        corpus = StreamingCorpus.from_directory(args.directory, "train", "de", "en")
        SentencePieceTokenizer.train(corpus.sample_sentences(200_000), 8000).save(tokenizer_dir)

    results = {}
    for mode in ("memory", "streaming"):
        command = [sys.executable, os.path.abspath(__file__), MODE, mode]
        command += ["--directory", args.directory, "--batches", str(args.batches)]
        command += ["--steps", str(args.steps)]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
        print(f"{mode:9s} {results[mode]}", flush=True)
    memory, streaming = results["memory"], results["streaming"]
    ratios = {
        "pipeline_ratio": round(streaming["batches_per_s"] / memory["batches_per_s"], 3),
        "training_ratio": round(streaming["steps_per_s"] / memory["steps_per_s"], 3),
    }
    print(
        f"streaming / in memory: pipeline {ratios['pipeline_ratio']}x, "
        f"training {ratios['training_ratio']}x; peak memory {streaming['peak_rss_mb']} MB "
        f"against {memory['peak_rss_mb']} MB"
    )
    print(json.dumps({"pairs": args.pairs, **results, **ratios}))


if __name__ == "__main__":
    main()
