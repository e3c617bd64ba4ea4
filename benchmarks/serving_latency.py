"""Latency of an exported SavedModel across source lengths, as a server would see it.

Loads the export in this process with only `tensorflow` and `tensorflow_text`
(not this package), replays its TF Serving warm-up requests as the server
does, then sends 40 single-sentence requests of 40 different lengths, each
once, and times each. A length that costs a new compilation shows up as a
slow request; the median and the 99th percentile are printed.

    python benchmarks/serving_latency.py saved_models/numbers_de_en/1

The last line is JSON: `p50_ms`, `p99_ms`, `max_ms`, `distinct_lengths`,
`warmup_requests`.
"""

import argparse
import json
import os
import sys
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version_dir", help="an exported version directory")
    parser.add_argument("--words", default="eins zwei drei vier fünf sechs sieben acht neun")
    args = parser.parse_args()

    model = tf.saved_model.load(args.version_dir)
    serve = model.signatures["serving_default"]
    warmed = replay_warmup(args.version_dir, model.signatures)
    words = args.words.split()
    latencies = []
    for n in range(1, 41):  # 40 sources of 1..40 words: 40 distinct token lengths or more
        sentence = " ".join(words[i % len(words)] for i in range(n))
        start = time.perf_counter()
        serve(inputs=tf.constant([sentence]))["outputs"].numpy()
        latencies.append((time.perf_counter() - start) * 1000)
    assert "keras_transformer" not in sys.modules
    latencies = np.array(latencies)
    print("ms per request by words: " + " ".join(f"{x:.0f}" for x in latencies))
    print(
        json.dumps(
            {
                "p50_ms": round(float(np.percentile(latencies, 50)), 1),
                "p99_ms": round(float(np.percentile(latencies, 99)), 1),
                "max_ms": round(float(latencies.max()), 1),
                "distinct_lengths": len(latencies),
                "warmup_requests": warmed,
            }
        )
    )


if __name__ == "__main__":
    main()
