import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops

import keras_transformer as kt


def paper_rate(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@pytest.mark.parametrize("step", [1, 10, 3999, 4000, 4001, 100000])
def test_schedule_matches_the_paper_formula(step):
    schedule = kt.TransformerSchedule(512, warmup_steps=4000)
    np.testing.assert_allclose(float(schedule(step)), paper_rate(step, 512, 4000), rtol=1e-6)


def test_schedule_is_finite_and_zero_at_step_zero():
    assert float(kt.TransformerSchedule(128)(0)) == 0.0


def test_schedule_rejects_bad_arguments():
    with pytest.raises(
        ValueError, match=r"`warmup_steps` must be a positive integer.*warmup_steps=0"
    ):
        kt.TransformerSchedule(128, warmup_steps=0)


def test_schedule_serializes_inside_an_optimizer():
    optimizer = keras.optimizers.Adam(kt.TransformerSchedule(64, warmup_steps=7))
    restored = keras.optimizers.Adam.from_config(optimizer.get_config())
    serialized = restored.get_config()["learning_rate"]
    assert serialized["registered_name"] == "keras_transformer>TransformerSchedule"
    assert serialized["config"] == {"d_model": 64, "warmup_steps": 7}


def reference_loss(y_true, logits, smoothing):
    """Keras' CategoricalCrossentropy with label smoothing, averaged over real tokens."""
    keras_loss = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=smoothing, reduction=None
    )
    per_token = ops.convert_to_numpy(keras_loss(np.eye(logits.shape[-1])[y_true], logits))
    real = y_true != 0
    return per_token[real].mean()


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_equals_keras_label_smoothed_crossentropy_over_real_tokens(smoothing):
    rng = np.random.default_rng(0)
    y_true = np.array([[4, 2, 7, 0, 0], [3, 0, 0, 0, 0]])
    logits = rng.normal(size=(2, 5, 9)).astype("float32") * 3
    loss = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)
    np.testing.assert_allclose(
        float(loss(y_true, logits)), reference_loss(y_true, logits, smoothing), rtol=1e-5
    )


def test_loss_gradient_equals_the_gradient_of_the_reference():
    import tensorflow as tf

    rng = np.random.default_rng(1)
    y_true = np.array([[4, 2, 7, 0], [3, 1, 0, 0]])
    logits = tf.constant(rng.normal(size=(2, 4, 9)).astype("float32"))
    keras_loss = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=0.1, reduction=None
    )
    weights = (y_true != 0).astype("float32")
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        ours = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(y_true, logits)
        theirs = tf.reduce_sum(keras_loss(np.eye(9)[y_true], logits) * weights) / weights.sum()
    np.testing.assert_allclose(
        tape.gradient(ours, logits), tape.gradient(theirs, logits), atol=1e-6
    )


def test_loss_ignores_padding_and_honours_sample_weight():
    rng = np.random.default_rng(2)
    y_true = np.array([[4, 2, 0], [3, 5, 6]])
    logits = rng.normal(size=(2, 3, 9)).astype("float32")
    loss = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.0)
    per_token = ops.convert_to_numpy(
        kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.0, reduction=None)(y_true, logits)
    )
    assert per_token[0, 2] == 0.0
    garbage = logits.copy()
    garbage[0, 2] = 1e4  # logits at a padded position change nothing
    np.testing.assert_allclose(float(loss(y_true, garbage)), float(loss(y_true, logits)), rtol=1e-6)
    weights = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(
        float(loss(y_true, logits, sample_weight=weights)), per_token[0, :2].mean(), rtol=1e-5
    )
    per_row = np.array([2.0, 1.0])  # one weight a row: (2 * 2 tokens + 3 tokens) weighted
    expected = (2 * per_token[0, :2].sum() + per_token[1].sum()) / (2 * 2 + 3)
    np.testing.assert_allclose(float(loss(y_true, logits, sample_weight=per_row)), expected, 1e-5)


def test_loss_rejects_bad_label_smoothing():
    with pytest.raises(ValueError, match=r"`label_smoothing`.*label_smoothing=1.0"):
        kt.MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)


def test_masked_accuracy_counts_only_real_tokens():
    metric = kt.MaskedAccuracy()
    y_true = np.array([[2, 1, 3, 0], [1, 0, 0, 0]])
    predicted = np.array([[2, 0, 3, 1], [0, 1, 1, 1]])  # 2 of 3 right, then 0 of 1
    metric.update_state(y_true, np.eye(4)[predicted])
    np.testing.assert_allclose(float(metric.result()), 2 / 4)
    metric.update_state(y_true[:1], np.eye(4)[y_true[:1]])  # 3 of 3 right
    np.testing.assert_allclose(float(metric.result()), 5 / 7)


def test_scaled_schedule_scales_and_serializes():
    from keras_transformer.training import ScaledSchedule

    scaled = ScaledSchedule(kt.TransformerSchedule(256, warmup_steps=800), 0.7)
    np.testing.assert_allclose(float(scaled(800)), 0.7 * paper_rate(800, 256, 800), rtol=1e-6)
    optimizer = keras.optimizers.Adam(scaled)
    restored = keras.optimizers.Adam.from_config(optimizer.get_config())
    np.testing.assert_allclose(float(restored.learning_rate), float(optimizer.learning_rate))
    serialized = restored.get_config()["learning_rate"]
    assert serialized["registered_name"] == "keras_transformer>ScaledSchedule"


def schedule_of(optimizer):
    return keras.optimizers.schedules.deserialize(optimizer.get_config()["learning_rate"])


def test_transformer_optimizer_is_the_papers_adam_on_the_scaled_schedule(tmp_path):
    optimizer = kt.transformer_optimizer(256, warmup_steps=800, scale=0.7)
    config = optimizer.get_config()
    assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.98, 1e-9)
    for step in [1, 400, 800, 5000]:
        np.testing.assert_allclose(
            float(schedule_of(optimizer)(step)), 0.7 * paper_rate(step, 256, 800), rtol=1e-6
        )
    assert isinstance(schedule_of(kt.transformer_optimizer(64)), kt.TransformerSchedule)
    model = kt.Transformer(1, 8, 2, 8, input_vocab_size=9, target_vocab_size=9)
    model.compile(optimizer=optimizer, loss=kt.MaskedSparseCategoricalCrossentropy())
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))  # build the weights
    optimizer.build(model.trainable_variables)  # and the optimizer's
    model.save(tmp_path / "model.keras")
    restored = keras.models.load_model(tmp_path / "model.keras").optimizer
    np.testing.assert_allclose(
        float(schedule_of(restored)(800)), 0.7 * paper_rate(800, 256, 800), rtol=1e-6
    )


def test_per_update_schedule_gives_each_update_the_inner_schedules_rate():
    from keras_transformer.training import PerUpdateSchedule

    inner = kt.TransformerSchedule(64, warmup_steps=10)
    per_update = PerUpdateSchedule(inner, 4)
    for update in [0, 1, 9, 10, 11, 50]:
        for micro_batch in range(4):  # Keras counts micro-batches
            expected = paper_rate(update, 64, 10) if update else 0.0
            np.testing.assert_allclose(
                float(per_update(4 * update + micro_batch)), expected, rtol=1e-6
            )
    restored = keras.optimizers.Adam.from_config(keras.optimizers.Adam(per_update).get_config())
    np.testing.assert_allclose(float(schedule_of(restored)(43)), float(inner(10)), rtol=1e-6)
    with pytest.raises(ValueError, match="`micro_batches` must be a positive integer"):
        PerUpdateSchedule(inner, 0)


def test_accumulated_micro_batches_update_like_one_batch_of_all_their_rows():
    import tensorflow as tf
    from accumulation_check import compare

    with pytest.warns(DeprecationWarning, match=r"compile\(micro_batches=N\)"):
        difference, moved = compare(tf.distribute.get_strategy())
    assert moved > 1e-3  # the updates did something
    assert difference < 1e-5, difference


def test_micro_batches_give_the_update_of_their_whole_batch_weighted_by_tokens():
    import tensorflow as tf
    from accumulation_check import compare_micro_batches

    difference, moved, (sliced, whole) = compare_micro_batches(tf.distribute.get_strategy())
    assert moved > 1e-3  # the updates did something
    assert difference < 1e-5, difference
    assert len(sliced["loss"]) == 1  # one epoch of UPDATES steps, one update each (asserted)
    np.testing.assert_allclose(sliced["loss"], whole["loss"], rtol=1e-5)
    np.testing.assert_allclose(sliced["masked_accuracy"], whole["masked_accuracy"], rtol=1e-6)


def test_micro_batches_more_than_rows_use_one_slice_a_row_and_save_with_the_model(tmp_path):
    from accumulation_check import VOCAB, padded_batch

    inputs, outputs = padded_batch(rows=2)
    losses = []
    for micro_batches in (5, 1):
        keras.utils.set_random_seed(0)
        model = kt.Transformer(1, 16, 2, 32, VOCAB, VOCAB, dropout_rate=0.0)
        model.compile(
            optimizer=kt.transformer_optimizer(16, warmup_steps=3),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
            micro_batches=micro_batches,
        )
        losses.append([float(model.train_on_batch(inputs, outputs)) for _ in range(2)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    model.compile(
        optimizer=kt.transformer_optimizer(16),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
        micro_batches=4,
    )
    model.optimizer.build(model.trainable_variables)  # as training would, so its state saves
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert loaded.micro_batches == 4
    assert isinstance(loaded.loss, kt.MaskedSparseCategoricalCrossentropy)
    with pytest.raises(ValueError, match="`micro_batches` must be a positive integer"):
        model.compile(loss=kt.MaskedSparseCategoricalCrossentropy(), micro_batches=0)


def test_micro_batches_train_under_mirrored_strategy_where_keras_accumulation_fails():
    script = os.path.join(os.path.dirname(__file__), "accumulation_check.py")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, script, "--devices", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "micro-batches: difference" in result.stdout
    assert "refused" in result.stdout


def test_an_embedding_row_seen_twice_gets_adams_second_moment_of_its_summed_gradient():
    import tensorflow as tf

    from keras_transformer.training import SummedSlicesAdam

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((4,), dtype="int32"), keras.layers.Embedding(5, 3), keras.layers.Flatten()]
    )
    tokens = np.array([[1, 1, 1, 2]], "int32")  # token 1 three times: three slices of row 1
    target = np.random.default_rng(0).normal(size=(1, 12)).astype("float32")
    before = model.get_weights()[0]
    with tf.GradientTape() as tape:
        loss = keras.losses.mean_squared_error(target, model(tokens))
    (slices,) = tape.gradient(loss, model.trainable_variables)
    assert isinstance(slices, tf.IndexedSlices) and len(slices.indices) == 4
    gradient = tf.convert_to_tensor(slices).numpy()  # each row's gradient, slices summed

    optimizer = SummedSlicesAdam(0.1, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    optimizer.apply([slices], model.trainable_variables)
    # Adam (Kingma and Ba, 2015, Algorithm 1) in NumPy, first step.
    m, v = 0.1 * gradient, 0.02 * gradient**2
    np.testing.assert_allclose(optimizer._velocities[0].numpy(), v, rtol=1e-5, atol=1e-12)
    step = 0.1 * np.sqrt(1 - 0.98) / (1 - 0.9) * m / (np.sqrt(v) + 1e-9)
    np.testing.assert_allclose(model.get_weights()[0], before - step, rtol=1e-5, atol=1e-6)


class KerasOwnStep(kt.Transformer):
    """The reference: Keras' own training step, on the full `(B, T, V)` logits."""

    def train_step(self, data):
        return keras.Model.train_step(self, data)


def test_logits_at_real_tokens_train_as_keras_own_step_on_all_logits():
    import tensorflow as tf

    from keras_transformer.models.train_step import forward

    rng = np.random.default_rng(3)
    source = rng.integers(1, 40, (6, 7)).astype("int32")
    target_in = rng.integers(1, 40, (6, 9)).astype("int32")
    target_out = rng.integers(1, 40, (6, 9)).astype("int32")
    for row, length in enumerate([9, 6, 3, 8, 1, 5]):  # uneven padding
        target_in[row, length:] = target_out[row, length:] = 0
        source[row, max(1, 7 - row) :] = 0
    weights = rng.uniform(0.5, 2.0, target_out.shape).astype("float32")  # per token
    histories, trained = [], []
    for model_class in (kt.Transformer, KerasOwnStep):
        keras.utils.set_random_seed(0)
        model = model_class(2, 16, 2, 32, 40, 40, dropout_rate=0.0)
        model((source, target_in))  # builds the weights, the same for both models
        initial = model.get_weights()
        model.compile(
            optimizer=kt.transformer_optimizer(16, warmup_steps=2),
            loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
            metrics=[kt.MaskedAccuracy()],
        )
        history = model.fit(
            (source, target_in),
            target_out,
            sample_weight=weights,
            batch_size=6,
            epochs=3,
            shuffle=False,
            verbose=0,
        )
        histories.append(history.history)
        trained.append(model)
    packed, full = trained
    y, y_pred, _, _ = forward(packed, (source, target_in), tf.constant(target_out), None)
    assert tuple(y_pred.shape) == (int((target_out != 0).sum()), 40)  # only the real tokens
    moved = [np.abs(w - w0).max() for w, w0 in zip(full.get_weights(), initial, strict=True)]
    assert max(moved) > 1e-3  # the updates did something
    # An attention layer's key bias adds q.b to every logit of a query's row, which the
    # softmax cancels: its gradient is zero but for rounding, which Adam (epsilon 1e-9)
    # scales up to steps of the learning rate's size, differently in each code path.
    key_bias = [w.path.endswith("key_bias") for w in packed.weights]
    assert sum(key_bias) == 6  # 2 encoder layers, 2 decoder layers with two attentions each
    with tf.GradientTape() as tape:
        _, _, _, loss = forward(packed, (source, target_in), tf.constant(target_out), None)
    gradients = tape.gradient(loss, packed.trainable_weights)
    for weight, gradient in zip(packed.trainable_weights, gradients, strict=True):
        if weight.path.endswith("key_bias"):
            assert np.abs(gradient.numpy()).max() < 1e-6, weight.path
    for a, b, is_key_bias in zip(packed.get_weights(), full.get_weights(), key_bias, strict=True):
        if not is_key_bias:
            np.testing.assert_allclose(a, b, atol=1e-5)
    for key in ("loss", "masked_accuracy"):
        np.testing.assert_allclose(histories[0][key], histories[1][key], rtol=1e-5)


def small_batches():
    """`(x, y)`: 16 rows of a 40-token vocabulary with uneven padding."""
    rng = np.random.default_rng(3)
    source = rng.integers(4, 40, (16, 7)).astype("int32")
    target = rng.integers(4, 40, (16, 9)).astype("int32")
    for row in range(16):
        target[row, 3 + row % 6 :] = 0
        source[row, 2 + row % 5 :] = 0
    return (source, target[:, :-1]), target[:, 1:]


class StepWatch(keras.callbacks.Callback):
    """Per update: the loss, the loss scale (if any), and the weights."""

    def on_train_begin(self, logs=None):
        self.loss, self.scale, self.weights = [], [], [self.model.get_weights()]

    def on_train_batch_end(self, batch, logs=None):
        self.loss.append(logs["loss"])
        self.scale.append(float(getattr(self.model.optimizer, "dynamic_scale", 0.0)))
        self.weights.append(self.model.get_weights())


def train_small(policy="float32", optimizer=None, **compile_options):
    """A StepWatch of 16 updates of a small Transformer under the dtype `policy`."""
    from keras_transformer.training.compile import compile_model

    x, y = small_batches()
    keras.config.set_dtype_policy(policy)
    try:
        keras.utils.set_random_seed(0)
        model = kt.Transformer(1, 32, 4, 64, 40, 40, dropout_rate=0.0)
        model(x)  # the weights, before the first update
        compile_model(model, warmup_steps=4, **compile_options)
        if optimizer is not None:
            model.compile(optimizer=optimizer(), loss=model.loss, metrics=[kt.MaskedAccuracy()])
        watch = StepWatch()
        model.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=0, callbacks=[watch])
    finally:
        keras.config.set_dtype_policy("float32")
    return watch


@pytest.fixture(scope="module")
def float32_run():
    return train_small()


def test_float16_training_scales_its_loss_and_skips_the_updates_that_overflow(float32_run):
    half = train_small("mixed_float16")
    np.testing.assert_allclose(half.loss, float32_run.loss, rtol=2e-2)  # falls as float32's does
    assert half.scale[0] == 2.0**15  # Keras' LossScaleOptimizer, used by the package's step

    # A scale far too large: the first updates overflow in float16 and are skipped while
    # it halves; after 3 finite updates in a row it doubles.
    scaled = train_small(
        "mixed_float16",
        optimizer=lambda: keras.optimizers.LossScaleOptimizer(
            kt.transformer_optimizer(32, warmup_steps=4), 2.0**24, dynamic_growth_steps=3
        ),
    )
    scales = np.array([2.0**24] + scaled.scale)
    halved = scales[1:] < scales[:-1]
    assert halved[0] and 2 <= halved.sum() <= 12 and (scales[1:] > scales[:-1]).any(), scales
    first_applied = np.flatnonzero(~halved)[0]  # where the schedule's rate is still 0
    for step, weights in enumerate(scaled.weights[1:]):
        assert all(np.isfinite(w).all() for w in weights), step
        before = scaled.weights[step]
        unchanged = all(np.array_equal(a, b) for a, b in zip(weights, before, strict=True))
        assert unchanged == (halved[step] or step == first_applied), step  # overflows: nothing
    assert scaled.loss[-1] < scaled.loss[halved.sum()]


def test_the_training_step_under_xla_gives_the_loss_it_gives_without(float32_run):
    with_xla, without = train_small(jit_compile=True), float32_run
    assert with_xla.model.jit_compile and not without.model.jit_compile
    np.testing.assert_allclose(with_xla.loss, without.loss, rtol=1e-4)
    x, _ = small_batches()
    # after training steps whose sums XLA orders its own way: logits of about 3 within 5e-4
    np.testing.assert_allclose(with_xla.model(x), without.model(x), atol=5e-4)


def test_linear_cooldown_follows_its_schedule_then_falls_in_a_line_to_zero(tmp_path):
    from keras_transformer.training import LinearCooldown

    def expected(step):  # the paper's rate * 0.7, times the share of the cool-down left
        return 0.7 * paper_rate(step, 256, 800) * min(1.0, max(0.0, (4000 - step) / 1000))

    optimizer = kt.transformer_optimizer(256, warmup_steps=800, scale=0.7, cooldown=(4000, 1000))
    assert isinstance(schedule_of(optimizer), LinearCooldown)
    model = kt.Transformer(1, 8, 2, 8, input_vocab_size=9, target_vocab_size=9)
    model.compile(optimizer=optimizer, loss=kt.MaskedSparseCategoricalCrossentropy())
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    optimizer.build(model.trainable_variables)
    model.save(tmp_path / "model.keras")
    restored = schedule_of(keras.models.load_model(tmp_path / "model.keras").optimizer)
    for step in [1, 800, 2999, 3000, 3250, 3500, 3999, 4000, 4500]:
        for schedule in (schedule_of(optimizer), restored):
            np.testing.assert_allclose(float(schedule(step)), expected(step), rtol=1e-5, atol=0)
    with pytest.raises(ValueError, match="`cooldown_steps` must be at most `total_steps`"):
        LinearCooldown(kt.TransformerSchedule(64), total_steps=10, cooldown_steps=11)


def test_train_cools_the_rate_down_over_its_last_epochs(tmp_path):
    from keras_transformer.config import load_config
    from keras_transformer.run import train

    rates = []  # (optimizer step, the rate its update uses)

    class Rates(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            optimizer = self.model.optimizer
            rates.append((int(optimizer.iterations), float(optimizer.learning_rate)))

    overrides = [
        "data.train_limit=200",
        "tokenizer.vocab_size=80",
        "model.num_layers=1",
        "model.d_model=16",
        "model.num_heads=2",
        "model.dff=32",
        "train.warmup_steps=4",
        "train.epochs=3",
        "train.cooldown_epochs=2",
    ]
    train(tmp_path / "run", load_config(overrides=overrides), verbose=0, callbacks=[Rates()])
    steps = [step for step, _ in rates]
    total = len(steps)
    assert steps == list(range(total)) and total % 3 == 0 and total >= 6
    for step, rate in rates:
        left = min(1.0, (total - step) / (2 * total / 3))  # epochs 2 and 3 cool down
        paper = paper_rate(step, 16, 4) if step else 0.0
        np.testing.assert_allclose(rate, paper * left, rtol=1e-5, atol=1e-12, err_msg=str(step))
    assert rates[total // 3][1] == pytest.approx(paper_rate(total // 3, 16, 4), rel=1e-5)


X86_CPUINFO = """processor\t: 0
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni{extra}

processor\t: 1
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni{extra}
"""


def test_cpu_flags_reads_x86_and_arm_cpuinfo_and_none_where_there_is_none(tmp_path):
    from keras_transformer.training.precision import cpu_flags

    x86 = tmp_path / "x86"
    x86.write_text(X86_CPUINFO.format(extra=" avx512_bf16"))
    assert cpu_flags(x86) == {"fpu", "sse2", "avx2", "avx512f", "avx512_vnni", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16\nCPU part\t: 0xd40\n")
    assert cpu_flags(arm) == {"fp", "asimd", "sve", "bf16"}
    assert cpu_flags(tmp_path / "absent") is None
    riscv = tmp_path / "riscv"
    riscv.write_text("processor\t: 0\nhart\t\t: 0\nisa\t\t: rv64imafdc\nmmu\t\t: sv39\n")
    assert cpu_flags(riscv) is None  # readable, but says nothing of bfloat16


@pytest.mark.parametrize(
    "policy, gpus, flags, warns",
    [
        ("mixed_bfloat16", [], {"avx2", "avx512f"}, True),
        ("mixed_bfloat16", [], {"avx2", "avx512f", "avx512_bf16"}, False),
        ("mixed_bfloat16", [], {"avx2", "amx_bf16"}, False),
        ("mixed_bfloat16", [], {"asimd", "bf16"}, False),
        ("mixed_bfloat16", ["GPU:0"], {"avx2"}, False),
        ("mixed_bfloat16", [], None, False),  # flags unknown: nothing to say
        ("mixed_float16", [], {"avx2"}, False),
    ],
)
def test_mixed_bfloat16_warns_only_on_a_cpu_without_bfloat16_instructions(
    policy, gpus, flags, warns
):
    from keras_transformer.training.precision import slow_bfloat16_warning

    warning = slow_bfloat16_warning(policy, gpus, flags and frozenset(flags))
    assert (warning is not None) == warns
    if warns:
        assert "without bfloat16 instructions" in warning
        assert "--set train.mixed_precision=false" in warning


def test_train_gives_the_warning_before_it_loads_any_data(tmp_path, monkeypatch):
    import importlib
    import logging

    from keras_transformer.config import load_config

    train_module = importlib.import_module("keras_transformer.run.train")
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    train_module.log.addHandler(handler)

    class DataLoaded(Exception):
        pass

    def prepare_data(*args):
        raise DataLoaded

    monkeypatch.setattr(train_module, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
    monkeypatch.setattr(train_module, "prepare_data", prepare_data)
    try:
        config = load_config(overrides=["train.mixed_precision=bfloat16"])
        with pytest.raises(DataLoaded):
            train_module.train(tmp_path / "run", config)
    finally:
        train_module.log.removeHandler(handler)
    assert any("without bfloat16 instructions" in message for message in messages)


def test_fit_traces_its_step_once_and_trains_as_when_the_step_built_the_model(monkeypatch):
    """`fit` creates the weights and the optimizer's variables before it traces the training
    step, so the step is traced once instead of twice (a `tf.function` that creates
    variables is traced again), and training gives the same weights and optimizer state as
    Keras' own order, which builds them inside the first trace."""
    import tensorflow as tf

    from keras_transformer.models import train_step as steps

    rng = np.random.default_rng(0)
    source = rng.integers(3, 20, (8, 6)).astype("int32")
    target = rng.integers(3, 20, (8, 5)).astype("int32")
    data = tf.data.Dataset.from_tensor_slices(((source, target[:, :-1]), target[:, 1:]))
    step, traces = steps.train_step, []
    monkeypatch.setattr(steps, "train_step", lambda *args: traces.append(1) or step(*args))

    def trained():
        keras.utils.set_random_seed(0)
        model = kt.Transformer(1, 16, 2, 32, 20, 20)
        model.compile(
            optimizer=kt.transformer_optimizer(16, warmup_steps=10),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
            micro_batches=2,
        )
        traces.clear()
        model.fit(data.batch(4), epochs=2, verbose=0, shuffle=False)
        return len(traces), model.get_weights() + [v.numpy() for v in model.optimizer.variables]

    traced, weights = trained()
    monkeypatch.setattr(steps, "build_before_tracing", lambda model: None)  # Keras' order
    keras_traced, keras_weights = trained()
    assert (traced, keras_traced) == (1, 2)
    assert len(weights) == len(keras_weights)
    for ours, theirs in zip(weights, keras_weights, strict=True):
        np.testing.assert_array_equal(ours, theirs)
