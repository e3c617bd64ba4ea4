"""Where a training step's time goes: input, forward, backward, optimizer, `fit`.

The model and batches of `train_throughput.py` (vocab 8000, 4+4 layers,
d_model 128, 8 heads, dff 512, batch 64, length 64, ~15% padding). Each part
of the package's training step runs as a `tf.function` of its own, timed in
alternation with the others, and each figure is the median:

- input: taking the next batch from the `tf.data` pipeline `fit` reads;
- forward: the encoder and decoder (`Transformer.hidden_states`), then the
  output projection at the real target tokens, then the loss;
- backward: the gradient of that loss, minus the forward pass it repeats;
- optimizer: `apply_gradients` of a fixed set of gradients;
- fit: a whole `fit` step (`train_step`, metrics, callbacks), minus the
  gradient and optimizer parts.

Then TensorFlow's profiler traces a few `fit` steps and the time spent inside
its ops is split by kind: matrix products, dropout's random numbers,
transposes, and the rest (element-wise work, reductions, gathers). The
matrix products' share bounds what faster matrix products alone can give:
with share m made r times faster, the step is at most 1 / (1 - m + m / r)
times faster. r is measured here as the bfloat16 over the float32 matrix
product peak, which is what `mixed_bfloat16` could give at best if every
other op stayed as fast as in float32.

Usage:
    python benchmarks/train_step_split.py [--rounds 7] [--dtype mixed_bfloat16]

The last line printed is one JSON object with the milliseconds of each part,
the ops' shares (`op_share`) and, for a float32 step, that bound
(`matmul_bound`; null otherwise).
"""

import argparse
import collections
import glob
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from train_throughput import (  # noqa: E402
    CONFIG,
    VOCAB,
    StepTimer,
    make_batches,
    make_dataset,
    matmul_peak,
)

import keras_transformer as kt  # noqa: E402
from keras_transformer.models.train_step import forward  # noqa: E402

OP_KINDS = {
    "matrix_products": {
        "MatMul",
        "BatchMatMulV2",
        "_FusedMatMul",
        "_MklMatMul",
        "_MklBatchMatMulV2",
        "_MklNativeFusedMatMul",
        "_MklFusedMatMul",
        "_MklNativeBatchMatMulV2",
    },
    "random_numbers": {"StatelessRandomUniformV2", "StatelessRandomGetKeyCounter"},
    "transposes": {"Transpose", "_MklTranspose", "ConjugateTranspose"},
}


def op_seconds(model, dataset, steps):
    """Seconds inside each op type during `steps` profiled `fit` steps, summed over threads."""
    logdir = tempfile.mkdtemp()
    tf.profiler.experimental.start(logdir)
    model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(f"{logdir}/plugins/profile/*/*.xplane.pb")[0], "rb") as file:
        space.ParseFromString(file.read())
    seconds = collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        names = {key: value.name for key, value in plane.event_metadata.items()}
        for line in plane.lines:
            if line.name.startswith("tf_Compute"):  # the executor's threads
                for event in line.events:
                    name = names.get(event.metadata_id, "")
                    if ":" in name and "::" not in name:  # "scope/op_name:OpType"
                        seconds[name.rsplit(":", 1)[1]] += event.duration_ps / 1e12
    return seconds


def op_shares(seconds):
    """The share of each kind in `OP_KINDS`, and of the rest, in the ops' total time."""
    total = sum(seconds.values())
    shares = {kind: sum(seconds[op] for op in ops) / total for kind, ops in OP_KINDS.items()}
    shares["other"] = 1 - sum(shares.values())
    return shares


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dtype", default="float32", help="float32 or mixed_bfloat16")
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    batches = make_batches(4)
    dataset = make_dataset(batches)
    model = kt.Transformer(
        **CONFIG, input_vocab_size=VOCAB, target_vocab_size=VOCAB, dtype=args.dtype
    )
    model.compile(
        optimizer=kt.transformer_optimizer(CONFIG["d_model"]),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        metrics=[kt.MaskedAccuracy()],
    )
    (source, target_in), target_out = batches[0]
    x, y = (tf.constant(source), tf.constant(target_in)), tf.constant(target_out)
    model(x)
    model.optimizer.build(model.trainable_variables)
    fixed_gradients = [tf.Variable(tf.zeros_like(v) + 1e-3) for v in model.trainable_variables]
    iterator = iter(dataset)

    @tf.function
    def hidden():
        return tf.reduce_sum(tf.cast(model.hidden_states(x, training=True), tf.float32))

    @tf.function
    def loss():
        return forward(model, x, y, None)[3]

    @tf.function
    def gradient():
        with tf.GradientTape() as tape:
            value = forward(model, x, y, None)[3]
        return tf.add_n([tf.reduce_sum(g) for g in tape.gradient(value, model.trainable_variables)])

    @tf.function
    def optimizer():
        weights = model.trainable_variables
        model.optimizer.apply_gradients(zip(fixed_gradients, weights, strict=True))
        return tf.constant(0.0)

    parts = {
        "input": lambda: next(iterator)[1],
        "encoder_decoder": hidden,
        "forward": loss,
        "forward_backward": gradient,
        "optimizer": optimizer,
    }
    for part in parts.values():
        part().numpy()
    timer = StepTimer()
    model.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0)  # traces the train function
    seconds = {name: [] for name in [*parts, "fit_step"]}
    for _ in range(args.rounds):
        for name, part in parts.items():
            start = time.perf_counter()
            part().numpy()
            seconds[name].append(time.perf_counter() - start)
        timer.seconds = []
        model.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0, callbacks=[timer])
        seconds["fit_step"].append(statistics.median(timer.seconds))
    ms = {name: 1000 * statistics.median(values) for name, values in seconds.items()}
    split = {
        "input_ms": ms["input"],
        "encoder_decoder_ms": ms["encoder_decoder"],
        "projection_and_loss_ms": ms["forward"] - ms["encoder_decoder"],
        "backward_ms": ms["forward_backward"] - ms["forward"],
        "optimizer_ms": ms["optimizer"],
        "fit_overhead_ms": ms["fit_step"] - ms["forward_backward"] - ms["optimizer"],
        "fit_step_ms": ms["fit_step"],
    }
    for name, value in split.items():
        share = "" if name == "fit_step_ms" else f"  {value / ms['fit_step']:6.1%}"
        print(f"{name:24s} {value:7.1f}{share}")

    seconds = op_seconds(model, dataset, steps=3)
    total = sum(seconds.values())
    shares = op_shares(seconds)
    print("time inside ops, by kind:")
    for kind, share in shares.items():
        print(f"  {kind:22s} {share:6.1%}")
    largest = ", ".join(f"{op} {value / total:.1%}" for op, value in seconds.most_common(8))
    print(f"  largest op types: {largest}")
    peak_ratio = bound = None
    if args.dtype == "float32":  # the bound is bfloat16's, seen from a float32 step
        peak_ratio = matmul_peak(dtype=tf.bfloat16) / matmul_peak()
        m = shares["matrix_products"]
        bound = 1 / (1 - m + m / peak_ratio)
        print(
            f"bfloat16 / float32 matrix product peak {peak_ratio:.2f}x: matrix products alone "
            f"that much faster make the step at most {bound:.2f}x faster"
        )
    print(
        json.dumps(
            {
                "dtype": args.dtype,
                **{k: round(v, 1) for k, v in split.items()},
                "op_share": {k: round(v, 3) for k, v in shares.items()},
                "bf16_peak_ratio": peak_ratio and round(peak_ratio, 2),
                "matmul_bound": bound and round(bound, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
