"""N accumulated micro-batches against one batch of all their rows.

Two ways to accumulate: Keras' optimizer-level accumulation
(`kt.transformer_optimizer(..., gradient_accumulation_steps=N)`, `compare`)
and the model's own (`Transformer.compile(micro_batches=N)`,
`compare_micro_batches`). Both functions are imported by `test_training.py`
and run on one device. Run as a script, this checks both under
`MirroredStrategy` over two logical CPUs (which must be set up before
TensorFlow starts):

    python tests/accumulation_check.py --devices 2

The model's micro-batches must update as one batch does there too (the
script prints `micro-batches: difference ...`). Keras' own accumulating Adam
fails there (its all-reduce sits inside a `tf.cond`, keras-team/keras#17429),
and `kt.transformer_optimizer` refuses accumulation under a strategy with a
`ValueError` that says so. The script prints `refused` and exits 0 when all
of this holds; once Keras fixes the failure it exits 1, so the refusal can be
lifted.
"""

import argparse

import numpy as np

MICRO_BATCHES = 3  # N
ROWS = 4  # rows per micro-batch; every row has the same length, so no padding
UPDATES = 4
VOCAB = 20


def micro_batches(seed=0):
    """`UPDATES * N` micro-batches `((source, target_in), target_out)` of ROWS rows each."""
    rng = np.random.default_rng(seed)
    count = UPDATES * MICRO_BATCHES * ROWS
    source = rng.integers(3, VOCAB, size=(count, 5)).astype("int32")
    target = rng.integers(3, VOCAB, size=(count, 6)).astype("int32")
    target_in = np.concatenate([np.ones((count, 1), "int32"), target], axis=1)
    target_out = np.concatenate([target, np.full((count, 1), 2, "int32")], axis=1)
    return (source, target_in), target_out


def twin_models(strategy, inputs, compile_settings):
    """One tiny model per function that gives `compile` arguments (called in the
    strategy's scope, where the optimizer must be made), all from the same initial
    weights."""
    import keras

    import keras_transformer as kt

    models = []
    with strategy.scope():
        for settings in compile_settings:
            keras.utils.set_random_seed(0)  # the same initial weights
            model = kt.Transformer(1, 16, 2, 32, VOCAB, VOCAB, dropout_rate=0.0)
            model.compile(loss=kt.MaskedSparseCategoricalCrossentropy(), **settings())
            model((inputs[0][:1], inputs[1][:1]))
            models.append(model)
    return models


def weight_difference(first, second, initial):
    """Largest |difference| between two models' weights, and how far the first moved.

    The key projection's bias shifts every logit of a query by the same
    amount, which the softmax ignores: its gradient is zero up to rounding,
    and Adam (epsilon 1e-9) turns that rounding noise into steps, different
    for any other order of summation. It changes no output; it is left out.
    """
    pairs = [
        (a.numpy(), b.numpy(), w)
        for a, b, w in zip(first.weights, second.weights, initial, strict=True)
        if not a.path.endswith("key_bias")
    ]
    difference = max(float(np.abs(a - b).max()) for a, b, _ in pairs)
    moved = max(float(np.abs(a - w).max()) for a, _, w in pairs)
    return difference, moved


def compare(strategy):
    """Largest |weight difference| after UPDATES updates, and how far the weights moved.

    One model updates once every N micro-batches of ROWS rows
    (`gradient_accumulation_steps=N`); the other once per batch of N * ROWS
    rows, the same rows in the same order. Dropout is off and no row has
    padding, so the mean gradient of the micro-batches is the big batch's.
    """
    import tensorflow as tf

    import keras_transformer as kt

    inputs, outputs = micro_batches()

    def dataset(rows):
        return tf.data.Dataset.from_tensor_slices((inputs, outputs)).batch(rows)

    accumulated, big = twin_models(
        strategy,
        inputs,
        [
            lambda accumulate=accumulate: dict(
                optimizer=kt.transformer_optimizer(
                    16, warmup_steps=3, gradient_accumulation_steps=accumulate
                )
            )
            for accumulate in (MICRO_BATCHES, 1)
        ],
    )
    initial = accumulated.get_weights()
    accumulated.fit(dataset(ROWS), epochs=1, shuffle=False, verbose=0)
    big.fit(dataset(ROWS * MICRO_BATCHES), epochs=1, shuffle=False, verbose=0)
    updates = [int(m.optimizer.iterations.numpy()) for m in (accumulated, big)]
    assert updates == [UPDATES, UPDATES], updates
    return weight_difference(accumulated, big, initial)


def padded_batch(rows=ROWS * MICRO_BATCHES, seed=0):
    """One batch `((source, target_in), target_out)` whose rows have different lengths.

    The rows' target token counts differ, so slices of rows weigh differently
    in the batch's mean token loss.
    """
    rng = np.random.default_rng(seed)
    source = rng.integers(3, VOCAB, size=(rows, 7)).astype("int32")
    target = rng.integers(3, VOCAB, size=(rows, 7)).astype("int32")
    for row in range(rows):
        source[row, 7 - row % 4 :] = 0
        target[row, 7 - row % 6 :] = 0  # 7, 6, ..., 2 tokens: slices of 4 rows hold 22, 18, 14
    lengths = (target != 0).sum(axis=1)
    target_in = np.concatenate([np.ones((rows, 1), "int32"), target], axis=1)
    target_out = np.concatenate([target, np.zeros((rows, 1), "int32")], axis=1)
    target_out[np.arange(rows), lengths] = 2  # EOS after the last real token
    return (source, target_in), target_out


def compare_micro_batches(strategy):
    """Largest |weight difference| between micro_batches=N and 1 after UPDATES updates,
    and how far the weights moved; also the two models' logged metrics.

    Both models train on the same padded batch, one in N slices of rows
    (`Transformer.compile(micro_batches=N)`), the other whole; dropout is off.
    """
    import tensorflow as tf

    import keras_transformer as kt

    inputs, outputs = padded_batch()
    sliced, whole = twin_models(
        strategy,
        inputs,
        [
            lambda micro_batches=micro_batches: dict(
                optimizer=kt.transformer_optimizer(16, warmup_steps=3),
                metrics=[kt.MaskedAccuracy()],
                micro_batches=micro_batches,
            )
            for micro_batches in (MICRO_BATCHES, 1)
        ],
    )
    initial = sliced.get_weights()
    data = tf.data.Dataset.from_tensors((inputs, outputs)).repeat(UPDATES)
    histories = [m.fit(data, epochs=1, shuffle=False, verbose=0).history for m in (sliced, whole)]
    updates = [int(m.optimizer.iterations.numpy()) for m in (sliced, whole)]
    assert updates == [UPDATES, UPDATES], updates
    return (*weight_difference(sliced, whole, initial), histories)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2)
    args = parser.parse_args()
    import keras
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * args.devices
    )
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(args.devices)])
    import keras_transformer as kt

    difference, moved, histories = compare_micro_batches(strategy)
    print(f"micro-batches: difference {difference:.2e}, moved {moved:.2e}, logs {histories}")
    assert moved > 1e-3 and difference < 1e-5, (difference, moved)
    assert histories[0] == histories[1] or np.allclose(
        [v for h in histories[0].values() for v in h],
        [v for h in histories[1].values() for v in h],
        rtol=1e-5,
    ), histories

    inputs, outputs = micro_batches()
    with strategy.scope():
        model = kt.Transformer(1, 16, 2, 32, VOCAB, VOCAB)
        model.compile(
            optimizer=keras.optimizers.Adam(gradient_accumulation_steps=MICRO_BATCHES),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
        )
        try:
            kt.transformer_optimizer(16, gradient_accumulation_steps=MICRO_BATCHES)
        except ValueError as error:
            assert "works on one device only" in str(error), error
        else:
            raise SystemExit("transformer_optimizer accepted accumulation under a strategy")
    try:
        model.fit(inputs, outputs, batch_size=ROWS, epochs=1, verbose=0)
    except RuntimeError as error:
        assert "merge_call" in str(error), error
        print("refused")
        return
    raise SystemExit("Keras' accumulation now trains under MirroredStrategy: lift the refusal")


if __name__ == "__main__":
    main()
