import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import layers


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_implicit_mask_equals_explicit_mask(norm_first):
    ids = np.array([[4, 9, 3, 0], [2, 0, 0, 0]])
    embedded = layers.PositionalEmbedding(20, 16)(ids)
    layer = layers.EncoderLayer(16, 4, 32, norm_first=norm_first)
    implicit = layer(embedded)
    explicit = layer(ops.convert_to_numpy(embedded), mask=ids != 0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(implicit), ops.convert_to_numpy(explicit), atol=1e-6
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(implicit._keras_mask), ids != 0)


def test_encoder_layer_ignores_what_stands_at_padded_positions():
    layer = layers.EncoderLayer(16, 4, 32)
    x = random(2, 6, 16)
    mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]], bool)
    noisy = np.where(mask[..., None], x, random(2, 6, 16, seed=3) * 100)
    a = ops.convert_to_numpy(layer(x, mask=mask))
    b = ops.convert_to_numpy(layer(noisy, mask=mask))
    np.testing.assert_allclose(a[mask], b[mask], atol=1e-5)


def test_encoder_layer_post_ln_is_the_paper_composition():
    layer = layers.EncoderLayer(16, 4, 32, dropout_rate=0.0)
    x = random(2, 5, 16)
    y = ops.convert_to_numpy(layer(x))
    h = ops.convert_to_numpy(layer.self_attention(x, x))
    h = ops.convert_to_numpy(layer.self_attention_norm(x + h))
    expected = layer.feed_forward_norm(h + ops.convert_to_numpy(layer.feed_forward(h)))
    np.testing.assert_allclose(y, ops.convert_to_numpy(expected), atol=1e-5)


def test_encoder_layer_pre_ln_is_the_pre_ln_composition():
    layer = layers.EncoderLayer(16, 4, 32, dropout_rate=0.0, norm_first=True)
    x = random(2, 5, 16)
    y = ops.convert_to_numpy(layer(x))
    n = layer.self_attention_norm(x)
    h = x + ops.convert_to_numpy(layer.self_attention(n, n))
    expected = h + ops.convert_to_numpy(layer.feed_forward(layer.feed_forward_norm(h)))
    np.testing.assert_allclose(y, ops.convert_to_numpy(expected), atol=1e-5)


def test_encoder_appending_padding_changes_nothing_real():
    encoder = layers.Encoder(2, 16, 4, 32, vocab_size=30, dropout_rate=0.0)
    ids = np.array([[5, 6, 7, 0], [8, 9, 0, 0]])
    longer = np.concatenate([ids, np.zeros((2, 3), int)], axis=1)
    a = ops.convert_to_numpy(encoder(ids))
    b = ops.convert_to_numpy(encoder(longer))
    np.testing.assert_allclose(a[ids != 0], b[:, :4][ids != 0], atol=1e-5)


def test_encoder_layer_composes_in_a_functional_classifier_and_trains():
    ids = keras.Input(shape=(None,), dtype="int32")
    x = layers.PositionalEmbedding(50, 16)(ids)
    x = layers.EncoderLayer(16, 4, 32)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)
    model = keras.Model(ids, outputs)
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, size=256)
    # Class 0 sentences use tokens 1..24, class 1 tokens 25..49; 2-8 real tokens.
    data = rng.integers(1, 25, size=(256, 8)) + 24 * labels[:, None]
    data[np.arange(8)[None, :] >= rng.integers(2, 9, size=256)[:, None]] = 0
    history = model.fit(data, labels, epochs=10, batch_size=32, verbose=0)
    assert history.history["accuracy"][-1] > 0.9
    # The mask flowed through: padding appended to the input changes nothing.
    longer = np.concatenate([data[:4], np.zeros((4, 5), int)], axis=1)
    np.testing.assert_allclose(
        model.predict(data[:4], verbose=0), model.predict(longer, verbose=0), atol=1e-5
    )


def test_a_shared_embedding_must_match_the_stack():
    embedding = layers.PositionalEmbedding(vocab_size=20, d_model=16)
    with pytest.raises(
        ValueError, match=r"`embedding` must have this stack's vocab_size.*vocab_size=20.*=30"
    ):
        layers.Encoder(2, 16, 4, 32, vocab_size=30, embedding=embedding)
    encoder = layers.Encoder(2, 16, 4, 32, vocab_size=20, embedding=embedding)
    assert encoder.embedding is embedding
