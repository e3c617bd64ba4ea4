import numpy as np
import pytest
import tensorflow as tf
from conftest import load_tiny_translation

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.inference import beam_search, greedy_search, length_penalty

BOS, EOS = 2, 3


def random_model(norm_first, shared_embeddings=None):
    vocab = 60 if shared_embeddings == "all" else 50
    return kt.Transformer(
        2,
        32,
        4,
        64,
        vocab,
        60,
        norm_first=norm_first,
        dropout_rate=0.3,
        attention_dropout_rate=0.2,
        shared_embeddings=shared_embeddings,
    )


@pytest.mark.parametrize(
    "norm_first, shared_embeddings", [(False, None), (True, None), (False, "all")]
)
def test_cached_step_by_step_logits_equal_the_full_forward_pass(norm_first, shared_embeddings):
    model = random_model(norm_first, shared_embeddings)
    rng = np.random.default_rng(0)
    source = rng.integers(1, 50, (3, 7)).astype("int32")
    source[1, 4:] = 0
    target = rng.integers(1, 60, (3, 6)).astype("int32")
    full = model((source, target), training=False).numpy()  # (B, T, V)

    context = model.encoder(source, training=False)
    cache = model.decoder.initial_cache(context, max_length=10)
    steps = []
    for t in range(6):
        x, cache = model.decoder.call_with_cache(target[:, t : t + 1], t, cache, source != 0)
        steps.append(model.output_logits(x).numpy()[:, 0])
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)


def uncached_greedy(model, source, max_length):
    """The reference: re-run the whole model on the growing prefix, take the argmax."""
    prefix = np.full((source.shape[0], 1), BOS, "int32")
    finished = np.zeros(source.shape[0], bool)
    out = np.zeros((source.shape[0], max_length), "int32")
    for t in range(max_length):
        logits = model((source, prefix), training=False).numpy()[:, -1]
        logits[:, [0, BOS]] = -np.inf
        token = np.where(finished, 0, logits.argmax(-1))
        out[:, t] = token
        finished |= token == EOS
        prefix = np.concatenate([prefix, np.where(token == 0, EOS, token)[:, None]], axis=1)
    return out


def sources(tokenizer, n=16, offset=0):
    texts = numbers_corpus("test").sources[offset : offset + n]
    pieces = tokenizer.tokenize(texts).to_list()
    width = max(map(len, pieces)) + 1
    return np.array([p + [EOS] + [0] * (width - len(p) - 1) for p in pieces], "int32")


def test_greedy_search_equals_the_uncached_argmax_loop(tiny_translation):
    model, tokenizer = load_tiny_translation(tiny_translation)
    source = sources(tokenizer)
    search = tf.function(lambda s: greedy_search(model, s, BOS, EOS, max_length=30))
    tokens, _ = search(source)
    np.testing.assert_array_equal(tokens.numpy(), uncached_greedy(model, source, 30))


def test_beam_of_one_is_greedy_exactly(tiny_translation):
    model, tokenizer = load_tiny_translation(tiny_translation)
    source = sources(tokenizer, n=32)
    greedy, _ = greedy_search(model, source, BOS, EOS, max_length=30)
    beam, _ = beam_search(model, source, BOS, EOS, max_length=30, beam_size=1)
    np.testing.assert_array_equal(beam.numpy(), greedy.numpy())


def normalized_scores(model, source, tokens, alpha):
    """log P(y | x) / lp(|y|) by teacher forcing, |y| counting EOS; padding and BOS blocked."""
    tokens = tokens.numpy()
    lengths = np.array([list(row).index(EOS) + 1 if EOS in row else len(row) for row in tokens])
    target_in = np.concatenate([np.full((len(tokens), 1), BOS), tokens[:, :-1]], axis=1)
    logits = model((source, target_in.astype("int32"))).numpy()
    logits[..., [0, BOS]] = -np.inf
    log_probs = tf.nn.log_softmax(logits).numpy()
    picked = np.take_along_axis(log_probs, tokens[..., None], axis=-1)[..., 0]
    real = np.arange(tokens.shape[1])[None] < lengths[:, None]
    return np.where(real, picked, 0.0).sum(1) / length_penalty(lengths, alpha).numpy()


def test_beam_search_scores_at_least_as_well_as_greedy_on_average(tiny_translation):
    model, tokenizer = load_tiny_translation(tiny_translation)
    source = sources(tokenizer, n=64)
    greedy, _ = greedy_search(model, source, BOS, EOS, max_length=40)
    beam, beam_scores = beam_search(model, source, BOS, EOS, max_length=40, beam_size=4)
    greedy_score = normalized_scores(model, source, greedy, alpha=0.6)
    beam_score = normalized_scores(model, source, beam, alpha=0.6)
    np.testing.assert_allclose(beam_scores.numpy(), beam_score, atol=1e-3)
    assert beam_score.mean() >= greedy_score.mean()


def test_searches_reject_bad_arguments():
    model = random_model(False)
    with pytest.raises(ValueError, match=r"`source_ids` must be integer.*float32"):
        greedy_search(model, np.ones((2, 3), "float32"), BOS, EOS)
    with pytest.raises(ValueError, match=r"`beam_size` must be a positive integer.*beam_size=0"):
        beam_search(model, np.ones((2, 3), "int32"), BOS, EOS, beam_size=0)
