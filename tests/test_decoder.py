import numpy as np
import pytest
from keras import ops

from keras_transformer import layers


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_position_t_sees_nothing_after_t(norm_first):
    layer = layers.DecoderLayer(16, 4, 32, norm_first=norm_first)
    x, context = random(2, 6, 16), random(2, 5, 16, seed=1)
    changed = x.copy()
    changed[:, 3:] = random(2, 3, 16, seed=2)
    a = ops.convert_to_numpy(layer(x, context))
    b = ops.convert_to_numpy(layer(changed, context))
    np.testing.assert_allclose(a[:, :3], b[:, :3], atol=1e-5)
    assert not np.allclose(a[:, 3:], b[:, 3:])


def test_decoder_layer_ignores_padded_context():
    layer = layers.DecoderLayer(16, 4, 32)
    x, context = random(2, 4, 16), random(2, 5, 16, seed=1)
    context_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], bool)
    noisy = np.where(context_mask[..., None], context, 50.0)
    a = layer(x, context, context_mask=context_mask)
    b = layer(x, noisy, context_mask=context_mask)
    np.testing.assert_allclose(ops.convert_to_numpy(a), ops.convert_to_numpy(b), atol=1e-5)


def test_decoder_layer_returns_self_and_cross_attention_scores():
    layer = layers.DecoderLayer(16, 4, 32)
    outputs, scores = layer(random(2, 4, 16), random(2, 7, 16), return_attention_scores=True)
    assert outputs.shape == (2, 4, 16)
    assert scores["self_attention"].shape == (2, 4, 4, 4)
    assert scores["cross_attention"].shape == (2, 4, 4, 7)
    upper = np.triu(np.ones((4, 4), bool), k=1)
    assert np.all(ops.convert_to_numpy(scores["self_attention"])[:, :, upper] == 0)


def test_decoder_stack_takes_the_context_mask_from_the_encoder():
    encoder = layers.Encoder(1, 16, 4, 32, vocab_size=30)
    decoder = layers.Decoder(2, 16, 4, 32, vocab_size=40, norm_first=True)
    source = np.array([[5, 6, 7, 0, 0], [8, 9, 10, 11, 0]])
    target = np.array([[1, 4, 0], [1, 2, 3]])
    context = encoder(source)
    implicit = decoder(target, context)
    explicit = decoder(target, ops.convert_to_numpy(context), context_mask=source != 0)
    np.testing.assert_allclose(
        ops.convert_to_numpy(implicit), ops.convert_to_numpy(explicit), atol=1e-6
    )
    np.testing.assert_array_equal(ops.convert_to_numpy(implicit._keras_mask), target != 0)
