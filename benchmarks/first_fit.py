"""The first `fit` of a new Transformer: the package's order against Keras' own.

Without a `tf.distribute` strategy, Keras' `fit` creates a model's weights and
its optimizer's variables inside the first trace of the training step, and a
`tf.function` that creates variables is traced twice. `Transformer.fit`
creates them first (`models.train_step.build_before_tracing`). Each variant
runs in a fresh process (nothing traced before), `--repeats` times, trains the
same small model on the built-in corpus from the same seed, and prints its
wall time; the last line is JSON with both times (min and median), their
ratio, and whether the two variants ended with the same weights and optimizer
state, bit for bit.

    python benchmarks/first_fit.py [--repeats 3] [--batches 6] [--epochs 2]
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def fit_once(variant, batches, epochs):
    """Trains the model in this process: `(seconds of fit, sha256 of its final state)`."""
    import keras

    import keras_transformer as kt
    from keras_transformer.datasets import numbers_corpus
    from keras_transformer.models import train_step
    from keras_transformer.text import SentencePieceTokenizer, make_batches

    if variant == "keras":  # Keras' order: the first trace creates the variables
        train_step.build_before_tracing = lambda model: None
    keras.utils.set_random_seed(0)
    corpus = numbers_corpus("train", limit=3000)
    tokenizer = SentencePieceTokenizer.train(corpus.sources + corpus.targets, vocab_size=120)
    data = make_batches(corpus, tokenizer, tokenizer, tokens_per_batch=2048, seed=0).dataset
    model = kt.Transformer(2, 64, 4, 128, tokenizer.vocab_size, tokenizer.vocab_size)
    model.compile(
        optimizer=kt.transformer_optimizer(64, warmup_steps=200),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
        metrics=[kt.MaskedAccuracy()],
    )
    start = time.perf_counter()
    model.fit(data.take(batches), epochs=epochs, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256()
    for value in model.get_weights() + [v.numpy() for v in model.optimizer.variables]:
        digest.update(value.tobytes())
    return seconds, digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--variant", choices=["keras", "package"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # a child process: one fit, one JSON line
        seconds, digest = fit_once(args.variant, args.batches, args.epochs)
        print(json.dumps({"seconds": seconds, "digest": digest}))
        return
    times, digests = {"keras": [], "package": []}, {"keras": set(), "package": set()}
    for _ in range(args.repeats):
        for variant in times:  # interleaved, so that a slow spell of the VM hits both
            command = [sys.executable, __file__, "--variant", variant]
            command += ["--batches", str(args.batches), "--epochs", str(args.epochs)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.splitlines()[-1])
            times[variant].append(result["seconds"])
            digests[variant].add(result["digest"])
            print(f"{variant:8s} fit {result['seconds']:6.2f} s", flush=True)
    summary = {
        variant: {"min": min(t), "median": statistics.median(t)} for variant, t in times.items()
    }
    summary["median_ratio"] = summary["keras"]["median"] / summary["package"]["median"]
    summary["same_state"] = len(digests["keras"] | digests["package"]) == 1
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
