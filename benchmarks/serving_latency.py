"""Latency of an exported SavedModel across source lengths, as a server would see it.

Loads the export in this process with only `tensorflow` and `tensorflow_text`
(not this package), replays its TF Serving warm-up requests as the server
does, then sends 40 single-sentence requests of 40 different lengths, each
once per round, and times each. A length that costs a new compilation shows
up as a slow request; the median and the 99th percentile are printed.

    python benchmarks/serving_latency.py saved_models/numbers_de_en/1

With `--compare-xla`, the same requests also go to the `--xla` export of the
same model, in turn with the default export's, and every output of the two is
compared. The XLA export is the path given, or else is written into a
temporary directory by `keras-transformer export --xla` (in a subprocess)
from `--run-dir`, by default `runs/<the export's model name>`:

    python benchmarks/serving_latency.py saved_models/numbers_de_en/1 --compare-xla

`--intra-op N` and `--inter-op N` set TensorFlow's thread pools before anything
loads, as TF Serving's `--tensorflow_intra_op_parallelism` and
`--tensorflow_inter_op_parallelism` do (0: TensorFlow's choice, the default).
Run with `TF_ENABLE_ONEDNN_OPTS=0` in the environment to time the graph
without TensorFlow's oneDNN kernels.

The last line is JSON: `p50_ms`, `p99_ms`, `max_ms`, `distinct_lengths`,
`warmup_requests`; with `--compare-xla` also `xla_p50_ms`, `xla_p99_ms`,
`default_over_xla` (the default export's speed over the XLA export's: the
XLA export's median latency over the default's) and `outputs_differ` (requests
whose two outputs differ).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (registers the tokenizer ops)

WARMUP = os.path.join("assets.extra", "tf_serving_warmup_requests")


def replay_warmup(path, signatures):
    """Runs the export's warm-up requests, as TF Serving does when it loads a version."""
    from tensorflow_serving.apis import prediction_log_pb2

    count = 0
    for record in tf.data.TFRecordDataset(os.path.join(path, WARMUP)):
        log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
        request = log.predict_log.request
        inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        signatures[request.model_spec.signature_name](**inputs)
        count += 1
    return count


class Served:
    """One loaded export: its `serving_default`, warmed up as a server warms it."""

    def __init__(self, version_dir):
        self.model = tf.saved_model.load(version_dir)
        self.serve = self.model.signatures["serving_default"]
        self.warmup_requests = replay_warmup(version_dir, self.model.signatures)
        self.latencies, self.outputs = [], []

    def request(self, sentence):
        start = time.perf_counter()
        output = self.serve(inputs=tf.constant([sentence]))["outputs"].numpy()
        self.latencies.append((time.perf_counter() - start) * 1000)
        self.outputs.append(output[0].decode())

    def summary(self, prefix=""):
        latencies = np.array(self.latencies)
        return {
            f"{prefix}p50_ms": round(float(np.percentile(latencies, 50)), 1),
            f"{prefix}p99_ms": round(float(np.percentile(latencies, 99)), 1),
            f"{prefix}max_ms": round(float(latencies.max()), 1),
        }


def xla_twin(version_dir, run_dir, directory):
    """Exports `run_dir` with `--xla` into `directory`; returns the version directory."""
    model_name = os.path.basename(os.path.dirname(os.path.abspath(version_dir)))
    run_dir = run_dir or os.path.join("runs", model_name)
    if not os.path.isdir(run_dir):
        sys.exit(
            f"--compare-xla needs the XLA export or the run it came from: {run_dir} is not a "
            "directory (pass --compare-xla XLA_EXPORT or --run-dir RUN)"
        )
    command = [sys.executable, "-m", "keras_transformer", "export", "--run-dir", run_dir]
    command += ["--xla", "--name", model_name, "--base-dir", directory, "--version", "1"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(directory, model_name, "1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version_dir", help="an exported version directory")
    parser.add_argument("--words", default="eins zwei drei vier fünf sechs sieben acht neun")
    parser.add_argument(
        "--compare-xla",
        nargs="?",
        const="",
        metavar="XLA_EXPORT",
        help="also time the --xla export of the same model (written from --run-dir if not given)",
    )
    parser.add_argument("--run-dir", help="the run to export with --xla (default: runs/<name>)")
    parser.add_argument("--rounds", type=int, default=1, help="times each request is sent")
    parser.add_argument("--intra-op", type=int, default=0, help="threads within an op")
    parser.add_argument("--inter-op", type=int, default=0, help="threads running ops at once")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)

    with tempfile.TemporaryDirectory() as scratch:
        served = [Served(args.version_dir)]
        if args.compare_xla is not None:
            xla_dir = args.compare_xla or xla_twin(args.version_dir, args.run_dir, scratch)
            served.append(Served(xla_dir))
        words = args.words.split()
        # 40 sources of 1..40 words: 40 distinct token lengths or more.
        sentences = [" ".join(words[i % len(words)] for i in range(n)) for n in range(1, 41)]
        for _ in range(args.rounds):
            for sentence in sentences:
                for export in served:  # in turn, so that both see the same machine
                    export.request(sentence)
    assert "keras_transformer" not in sys.modules
    default = served[0]
    print("ms per request by words: " + " ".join(f"{x:.0f}" for x in default.latencies[:40]))
    result = {
        **default.summary(),
        "distinct_lengths": len(sentences),
        "warmup_requests": default.warmup_requests,
        "intra_op": args.intra_op,
        "inter_op": args.inter_op,
        "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0",
    }
    if len(served) == 2:
        xla = served[1]
        result.update(xla.summary("xla_"))
        result["default_over_xla"] = round(result["xla_p50_ms"] / result["p50_ms"], 3)
        pairs = zip(default.outputs, xla.outputs, strict=True)
        result["outputs_differ"] = sum(a != b for a, b in pairs)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
