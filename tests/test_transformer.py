import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import keras_transformer as kt

SMALL = dict(
    num_layers=2, d_model=32, num_heads=4, dff=64, input_vocab_size=30, target_vocab_size=40
)


def small_model(**overrides):
    return kt.Transformer(**{**SMALL, **overrides})


def ids(rows, width):
    """Right-padded id rows."""
    return np.array([row + [0] * (width - len(row)) for row in rows], "int32")


SOURCE = ids([[5, 6, 7, 8], [9, 10]], 4)
TARGET = ids([[1, 4, 5], [1, 2]], 3)


@pytest.mark.parametrize("norm_first", [False, True])
def test_appending_padding_does_not_change_real_logits(norm_first):
    model = small_model(norm_first=norm_first)
    logits = ops.convert_to_numpy(model((SOURCE, TARGET)))
    longer = model((np.pad(SOURCE, ((0, 0), (0, 5))), np.pad(TARGET, ((0, 0), (0, 4)))))
    real = TARGET != 0
    np.testing.assert_allclose(ops.convert_to_numpy(longer)[:, :3][real], logits[real], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_changing_target_token_t_leaves_logits_before_t(norm_first):
    model = small_model(norm_first=norm_first)
    target = ids([[1, 4, 5, 6, 7]], 5)
    changed = target.copy()
    changed[0, 2] = 33
    a = ops.convert_to_numpy(model((SOURCE[:1], target)))
    b = ops.convert_to_numpy(model((SOURCE[:1], changed)))
    np.testing.assert_allclose(a[:, :2], b[:, :2], atol=1e-6)
    assert not np.allclose(a[:, 2:], b[:, 2:])


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_with_fully_padded_rows_stays_finite(policy):
    keras.config.set_dtype_policy(policy)
    model = small_model()
    source = ids([[5, 6, 7, 8], [9, 10], []], 4)  # last row: all padding
    target = ids([[1, 4, 5], [], [1, 2]], 3)  # middle row: all padding
    logits = model((source, target), training=True)
    assert logits.dtype == "float32"
    assert np.all(np.isfinite(ops.convert_to_numpy(logits)))
    loss = kt.MaskedSparseCategoricalCrossentropy()(target, logits)
    assert np.isfinite(float(loss))


@pytest.mark.parametrize("shared_embeddings", [None, "all"])
def test_saved_model_loads_without_custom_objects_and_gives_identical_outputs(
    tmp_path, shared_embeddings
):
    model = small_model(
        norm_first=True,
        positions=kt.layers.Sinusoidal(layout="concatenated"),
        attention_dropout_rate=0.2,
        target_vocab_size=30,
        shared_embeddings=shared_embeddings,
    )
    compile_like_the_paper(model, warmup_steps=50)
    model.fit(dataset(copy_pairs(32)), epochs=1, verbose=0, shuffle=False)
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, kt.Transformer)
    assert loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(
        ops.convert_to_numpy(loaded((SOURCE, TARGET))),
        ops.convert_to_numpy(model((SOURCE, TARGET))),
    )
    assert isinstance(loaded.loss, kt.MaskedSparseCategoricalCrossentropy)
    assert len(loaded.weights) == len(model.weights)
    if shared_embeddings == "all":
        assert loaded.decoder.embedding is loaded.encoder.embedding


def test_the_encoder_and_the_decoder_can_each_have_a_depth_of_their_own(tmp_path):
    model = small_model(num_layers=(3, 1))
    logits = ops.convert_to_numpy(model((SOURCE, TARGET)))
    symmetric = small_model(num_layers=2)
    symmetric((SOURCE, TARGET))
    encoder_layer = sum(w.size for w in symmetric.encoder.blocks[0].get_weights())
    decoder_layer = sum(w.size for w in symmetric.decoder.blocks[0].get_weights())
    # One more encoder layer and one fewer decoder layer than `symmetric`.
    assert model.count_params() == symmetric.count_params() + encoder_layer - decoder_layer

    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras", compile=False)
    assert [len(loaded.encoder.blocks), len(loaded.decoder.blocks)] == [3, 1]
    np.testing.assert_array_equal(ops.convert_to_numpy(loaded((SOURCE, TARGET))), logits)


@pytest.mark.parametrize("shared_embeddings, tied_matrices", [("output", 1), ("all", 2)])
def test_shared_embeddings_are_one_matrix_that_also_projects_to_logits(
    shared_embeddings, tied_matrices
):
    separate = small_model(target_vocab_size=30)
    tied = small_model(target_vocab_size=30, shared_embeddings=shared_embeddings)
    separate((SOURCE, TARGET))
    tied((SOURCE, TARGET))
    assert separate.count_params() - tied.count_params() == tied_matrices * 30 * 32
    embedding = tied.decoder.embedding.token_embedding.embeddings  # (V, D)
    assert (tied.encoder.embedding is tied.decoder.embedding) == (shared_embeddings == "all")

    tied.output_bias.assign(np.random.default_rng(0).normal(size=30))
    x = ops.convert_to_numpy(tied.decoder(TARGET, tied.encoder(SOURCE)))  # (B, T, D)
    expected = x @ ops.convert_to_numpy(embedding).T + ops.convert_to_numpy(tied.output_bias)
    np.testing.assert_allclose(
        ops.convert_to_numpy(tied((SOURCE, TARGET))), expected, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    "inputs, message",
    [
        ((SOURCE.astype("float32"), TARGET), r"`token_ids` must be integer.*dtype=float32"),
        ((SOURCE, TARGET[:, :, None]), r"`target_ids` must have rank 2.*shape=\(2, 3, 1\)"),
        (SOURCE, r"`source_ids` must have rank 2.*shape=2"),
        ((SOURCE, TARGET, TARGET), r"`inputs` must be a pair \(source_ids, target_ids\)"),
    ],
)
def test_bad_inputs_fail_with_a_clear_error(inputs, message):
    with pytest.raises(ValueError, match=message):
        small_model()(inputs)


def test_bad_sizes_fail_early():
    with pytest.raises(
        ValueError, match=r"`num_heads` must divide `d_model`. Received: d_model=30, num_heads=4"
    ):
        small_model(d_model=30)
    with pytest.raises(ValueError, match=r"`num_layers` must be a positive integer.*num_layers=0"):
        small_model(num_layers=0)
    with pytest.raises(ValueError, match=r"`num_layers` must be a positive.*=0"):
        small_model(num_layers=(2, 0))
    with pytest.raises(ValueError, match=r"`num_layers` must be a positive integer or a pair"):
        small_model(num_layers=(2, 1, 1))
    with pytest.raises(
        ValueError, match=r"`dropout_rate` must be a number in \[0, 1\).*dropout_rate=-0.1"
    ):
        small_model(dropout_rate=-0.1)
    with pytest.raises(ValueError, match=r"`shared_embeddings` must be one of.*'yes'"):
        small_model(shared_embeddings="yes")
    with pytest.raises(
        ValueError,
        match=r"needs one vocabulary.*input_vocab_size=30, target_vocab_size=40",
    ):
        small_model(shared_embeddings="all")


# Training on a synthetic task: copy (or reverse) a sequence of random tokens.

BOS, EOS = 1, 2


def copy_pairs(count, reverse=True, seed=0):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(count):
        tokens = list(rng.integers(3, 20, size=rng.integers(3, 9)))
        pairs.append((tokens, tokens[::-1] if reverse else tokens))
    return pairs


def dataset(pairs, batch_size=32):
    source = ids([s for s, _ in pairs], 8)
    target_in = ids([[BOS] + t for _, t in pairs], 9)
    target_out = ids([t + [EOS] for _, t in pairs], 9)
    return tf.data.Dataset.from_tensor_slices(((source, target_in), target_out)).batch(batch_size)


def compile_like_the_paper(model, warmup_steps):
    model.compile(
        optimizer=kt.transformer_optimizer(model.d_model, warmup_steps=warmup_steps),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
        metrics=[kt.MaskedAccuracy()],
    )


def test_fit_learns_to_copy_sequences():
    model = kt.Transformer(
        num_layers=2,
        d_model=64,
        num_heads=4,
        dff=128,
        input_vocab_size=20,
        target_vocab_size=20,
        dropout_rate=0.0,
    )
    compile_like_the_paper(model, warmup_steps=100)
    train = dataset(copy_pairs(1024, reverse=False)).cache()
    # Accuracy swings while the learning rate is near its peak (0.95 after epoch 6, 0.85
    # after 8 on one CPU) and settles near 0.98 from epoch 13 on.
    model.fit(train, epochs=16, verbose=0, shuffle=False)
    _, accuracy = model.evaluate(dataset(copy_pairs(256, reverse=False, seed=1)), verbose=0)
    assert accuracy > 0.9  # chance is 1/17 per token


MIRRORED = textwrap.dedent(
    """
    import numpy as np, tensorflow as tf, keras
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras_transformer as kt
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    with strategy.scope():
        model = kt.Transformer(1, 32, 4, 64, input_vocab_size=20, target_vocab_size=20)
        model.compile(
            optimizer=kt.transformer_optimizer(32, warmup_steps=20),
            loss=kt.MaskedSparseCategoricalCrossentropy(),
            metrics=[kt.MaskedAccuracy()],
        )
    rng = np.random.default_rng(0)
    source = rng.integers(3, 20, size=(256, 6)).astype("int32")
    target_in = np.concatenate([np.ones((256, 1), "int32"), source], axis=1)
    target_out = np.concatenate([source, np.full((256, 1), 2, "int32")], axis=1)
    data = tf.data.Dataset.from_tensor_slices(((source, target_in), target_out)).batch(32)
    history = model.fit(data, epochs=3, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0], losses
    print("ok", losses)
    """
)


def test_fit_under_mirrored_strategy_on_two_logical_cpus():
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout


def test_the_top_level_offers_what_users_reach_for_first():
    from keras_transformer.export import export_translator
    from keras_transformer.inference import Translator

    assert kt.Translator is Translator and kt.export_translator is export_translator
    for name in ["text", "datasets", "inference", "export", "training", "layers"]:
        assert getattr(kt, name).__name__ == f"keras_transformer.{name}"
    assert set(kt.__all__) <= set(dir(kt))


def test_a_decoder_that_starts_from_a_zero_embedding_ignores_its_first_token():
    model = kt.Transformer(1, 16, 2, 32, 30, 30, start_from_zero_embedding=True)
    source = np.array([[4, 5, 6, 3]])
    first, other = np.array([[2, 7, 8]]), np.array([[9, 7, 8]])
    logits = model((source, first)).numpy()
    np.testing.assert_array_equal(model((source, other)).numpy(), logits)
    plain = kt.Transformer(1, 16, 2, 32, 30, 30)
    plain((source, first))
    plain.set_weights(model.get_weights())
    assert np.abs(plain((source, first)).numpy() - logits).max() > 1e-3
    # the plain model with BOS's row zeroed by hand: the same logits
    rows = plain.decoder.embedding.token_embedding.embeddings
    rows.assign(tf.tensor_scatter_nd_update(rows, [[2]], tf.zeros((1, 16))))
    np.testing.assert_allclose(plain((source, first)).numpy(), logits, atol=1e-6)


def test_each_position_wise_product_traces_as_one_matrix_product():
    """Keras' `ops.matmul` of a 3-D tensor traces as a `tensordot` of about twenty ops; the
    layers project rows (`over_rows`), which keeps searches and SavedModels small."""
    model = small_model()
    model((SOURCE, TARGET))
    spec = tf.TensorSpec([None, None], tf.int32)
    graph = tf.function(lambda s, t: model((s, t))).get_concrete_function(spec, spec).graph
    names = [op.name for op in graph.get_operations()]
    assert not [name for name in names if "Tensordot" in name]
    # 2 encoder layers (Q, K, V, O, two feed-forward), 2 decoder layers (two attentions),
    # the output projection
    matmuls = [op for op in graph.get_operations() if op.type == "MatMul"]
    assert len(matmuls) == 2 * 6 + 2 * 10 + 1
