"""R-Drop (`Transformer.compile(r_drop=alpha)`): the loss against NumPy, training, saving."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.models.train_step import forward, symmetric_kl
from keras_transformer.training.compile import compile_model

VOCAB = 40


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def numpy_symmetric_kl(a, b):
    """½ (KL(P||Q) + KL(Q||P)) per row, from the definition of KL."""
    p, q = np.exp(log_softmax(a)), np.exp(log_softmax(b))
    kl_pq = (p * (np.log(p) - np.log(q))).sum(-1)
    kl_qp = (q * (np.log(q) - np.log(p))).sum(-1)
    return 0.5 * (kl_pq + kl_qp)


def numpy_smoothed_cross_entropy(logits, labels, eps):
    """(1 - eps) * -log p(y) + eps * mean_v -log p(v), per row."""
    log_p = log_softmax(logits)
    return -(1 - eps) * log_p[np.arange(len(labels)), labels] - eps * log_p.mean(-1)


def test_symmetric_kl_is_the_mean_of_both_kl_divergences():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 11)) * 2
    np.testing.assert_allclose(symmetric_kl(a, b), numpy_symmetric_kl(a, b), rtol=1e-5)
    np.testing.assert_allclose(symmetric_kl(a, a), 0.0, atol=1e-6)


def small_batch():
    rng = np.random.default_rng(1)
    source = rng.integers(4, VOCAB, (6, 7)).astype("int32")
    target = rng.integers(4, VOCAB, (6, 9)).astype("int32")
    for row in range(6):
        target[row, 3 + row :] = 0
        source[row, 2 + row % 4 :] = 0
    return (source, target[:, :-1]), target[:, 1:]


def dropout_model(jit_compile=False, r_drop=5.0, dropout_rate=0.3):
    keras.utils.set_random_seed(0)
    model = kt.Transformer(1, 32, 4, 64, VOCAB, VOCAB, dropout_rate=dropout_rate)
    x, _ = small_batch()
    model(x)
    compile_model(model, warmup_steps=4, r_drop=r_drop, jit_compile=jit_compile)
    return model


@pytest.mark.parametrize("packed", [True, False], ids=["logits_at_real_tokens", "all_logits"])
def test_the_r_drop_loss_is_the_mean_loss_of_two_dropout_passes_plus_alpha_halves_kl(packed):
    model = dropout_model(jit_compile=not packed)  # the step under XLA uses all the logits
    x, y = small_batch()
    weights = np.linspace(0.5, 2.0, len(y)).astype("float32")  # per row
    labels, logits, _, loss = forward(model, x, tf.constant(y), tf.constant(weights))
    labels, logits = np.asarray(labels), np.asarray(logits, np.float64)

    real = y != 0
    token_weights = np.broadcast_to(weights[:, None], y.shape)[real]  # (N,)
    if packed:  # (2N, V): the N real tokens of each pass
        first, second = np.split(logits, 2)
    else:  # (2B, T, V) -> the real tokens of each pass
        first, second = (half[real] for half in np.split(logits, 2))
    assert first.shape == second.shape == (real.sum(), VOCAB)
    assert np.abs(first - second).max() > 1e-2  # the passes dropped different units
    if packed:
        np.testing.assert_array_equal(labels, np.concatenate([y[real], y[real]]))
    cross_entropy = [numpy_smoothed_cross_entropy(h, y[real], 0.1) for h in (first, second)]
    mean_loss = (token_weights * (cross_entropy[0] + cross_entropy[1])).sum() / (
        2 * token_weights.sum()
    )
    kl = (token_weights * numpy_symmetric_kl(first, second)).sum() / token_weights.sum()
    np.testing.assert_allclose(float(loss), mean_loss + 5.0 / 2 * kl, rtol=1e-4)


def test_without_dropout_the_r_drop_term_vanishes():
    model = dropout_model(dropout_rate=0.0)
    plain = dropout_model(r_drop=0.0, dropout_rate=0.0)
    x, y = small_batch()
    loss = forward(model, x, tf.constant(y), None)[3]
    reference = forward(plain, x, tf.constant(y), None)[3]
    np.testing.assert_allclose(float(loss), float(reference), rtol=1e-5)


def test_r_drop_trains_with_micro_batches_and_saves_with_the_model(tmp_path):
    x, y = small_batch()
    model = dropout_model()
    model.compile(
        optimizer=kt.transformer_optimizer(32, warmup_steps=4),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
        metrics=[kt.MaskedAccuracy()],
        micro_batches=2,
        r_drop=5.0,
    )
    history = model.fit(x, y, batch_size=6, epochs=30, verbose=0).history["loss"]
    assert history[-1] < history[0] - 0.5, history
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert (restored.r_drop, restored.micro_batches) == (5.0, 2)


@pytest.mark.parametrize("alpha", [-1.0, float("nan"), True, "5"])
def test_a_bad_r_drop_alpha_is_refused_by_name(alpha):
    model = kt.Transformer(1, 16, 2, 32, VOCAB, VOCAB)
    with pytest.raises(ValueError, match=r"`r_drop` must be a number >= 0. Received: r_drop="):
        model.compile(optimizer="adam", r_drop=alpha)
