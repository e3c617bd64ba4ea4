"""Multi-worker training throughput: one worker against two on this machine.

Trains the training benchmark's model size (4+4 layers, d_model 128, 8 heads,
dff 512, vocab 8000) on random batches of `--batch` pairs of `--length`
tokens per worker, first as one process (no `TF_CONFIG`), then as two worker
processes on localhost under `MultiWorkerMirroredStrategy`, each with the
same per-worker batch (so two workers train on twice the tokens per step).
Each run times `--steps` steps after `--warmup` steps and counts the target
tokens of all workers.

On one machine the two workers share its cores, so this measures the
overhead of the strategy and of the all-reduce, not a speed-up: every step
all-reduces the gradient, as many float32 values as the model has trainable
weights (printed as `gradient_bytes`), in both directions.

    python benchmarks/multi_worker.py [--steps 30]

The last line is JSON: `one_worker_tok_s`, `two_workers_tok_s` (all workers'
target tokens per second), `scaling` (their ratio) and `gradient_bytes`.
"""

import argparse
import json
import os
import subprocess
import sys
import time

WORKER = "--as-worker"


def train_and_time(args):
    """Runs in a worker process: prints one JSON line with its step time."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    from keras_transformer.training import distribution_strategy, fit_under_multi_worker
    from keras_transformer.training.strategy import worker_role

    strategy = distribution_strategy(1, "auto")
    role = worker_role(strategy)
    import keras

    import keras_transformer as kt

    keras.utils.set_random_seed(0)
    vocab = 8000
    rng = np.random.default_rng(role.index)
    source = rng.integers(4, vocab, (args.batch, args.length)).astype("int32")
    target = rng.integers(4, vocab, (args.batch, args.length + 1)).astype("int32")
    batch = ((source, target[:, :-1]), target[:, 1:])

    def dataset_fn(context=None):
        return tf.data.Dataset.from_tensors(batch).repeat()

    data = dataset_fn()
    if role.count > 1:
        data = strategy.distribute_datasets_from_function(dataset_fn)
    with strategy.scope():
        model = kt.Transformer(4, 128, 8, 512, vocab, vocab)
        model.compile(
            optimizer=kt.transformer_optimizer(128),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
        )
    if role.count > 1:
        fit_under_multi_worker(model, strategy)
    model.fit(data, steps_per_epoch=args.warmup, epochs=1, verbose=0, shuffle=False)
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0, shuffle=False)
    seconds = time.perf_counter() - start
    parameters = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    print(
        json.dumps(
            {
                "worker": role.index,
                "workers": role.count,
                "seconds": seconds,
                "tokens": args.steps * args.batch * args.length * role.count,
                "gradient_bytes": 4 * parameters,
            }
        ),
        flush=True,
    )


def run_workers(count, args):
    """Starts `count` worker processes (one without TF_CONFIG) and returns the chief's report."""
    from keras_transformer.training.strategy import localhost_tf_configs

    tf_configs = localhost_tf_configs(count)
    command = [sys.executable, os.path.abspath(__file__), WORKER]
    command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += ["--batch", str(args.batch), "--length", str(args.length)]
    processes = []
    for index in range(count):
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.pop("TF_CONFIG", None)
        if count > 1:
            env["TF_CONFIG"] = tf_configs[index]
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env))
    reports = []
    for process in processes:
        out, _ = process.communicate(timeout=3600)
        if process.returncode != 0:
            raise SystemExit(f"a worker failed with exit status {process.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(WORKER, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="pairs per worker and step")
    parser.add_argument("--length", type=int, default=32, help="tokens per sentence")
    args = parser.parse_args()
    if args.as_worker:
        train_and_time(args)
        return
    rates = {}
    for count in (1, 2):
        report = run_workers(count, args)
        rates[count] = report["tokens"] / report["seconds"]
        step_ms = 1000 * report["seconds"] / args.steps
        print(f"{count} worker(s): {rates[count]:8.0f} target tokens/s, {step_ms:.0f} ms a step")
    gradient_bytes = report["gradient_bytes"]
    print(f"all-reduced every step: {gradient_bytes / 1e6:.1f} MB of float32 gradients")
    print(
        json.dumps(
            {
                "one_worker_tok_s": round(rates[1], 1),
                "two_workers_tok_s": round(rates[2], 1),
                "scaling": round(rates[2] / rates[1], 3),
                "gradient_bytes": gradient_bytes,
                "batch_per_worker": args.batch,
                "length": args.length,
                "steps": args.steps,
            }
        )
    )


if __name__ == "__main__":
    main()
