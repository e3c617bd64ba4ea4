"""Length limits, minimum length, repeated n-grams and empty sources in every search,
against exhaustive enumeration and step-by-step references; every batch size."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from test_search import BOS, EOS, HistoryStub, assert_output, random_model

from keras_transformer.inference import (
    LengthOptions,
    beam_search,
    greedy_search,
    length_penalty,
    sample,
)
from keras_transformer.inference.rules import repeated_ngram_tokens

WORDS = [1, 4]  # the stub's vocabulary besides padding, BOS and EOS


def has_repeated_ngram(output, n):
    grams = [tuple(output[i : i + n]) for i in range(len(output) - n + 1)]
    return n > 0 and len(grams) != len(set(grams))


def allowed(output, limit, must_end, options):
    """Whether `options` let a search produce `output` (EOS last if it ended).

    At a limit it must end at, an output ends with EOS whatever the other
    options say, and so does an output that no word may extend.
    """
    ended = output[-1:] == [EOS]
    if len(output) > limit or (must_end and not ended):
        return False
    forced_end = must_end and len(output) == limit
    n = options.no_repeat_ngram_size
    stuck = all(has_repeated_ngram(output[:-1] + [w], n) for w in WORDS)
    if ended and len(output) - 1 < options.min_length and not (forced_end or stuck):
        return False
    return not has_repeated_ngram(output, options.no_repeat_ngram_size)


def limit_of(source_row, options, max_length):
    source_length = int((np.asarray(source_row) != 0).sum())
    b = max_length if options.max_length_b is None else options.max_length_b
    return max(1, min(max_length, int(np.floor(options.max_length_a * source_length + b))))


def exhaustive_allowed(model, source_row, max_length, alpha, options):
    """Every `(score, output)` the options allow, best first."""
    limit = limit_of(source_row, options, max_length)
    must_end = limit < max_length
    scored = []
    for length in range(1, max_length + 1):
        for words in itertools.product(WORDS, repeat=length - 1):
            candidates = [list(words) + [EOS]]
            if length == max_length:
                candidates.append(list(words) + [WORDS[0]])
                candidates.append(list(words) + [WORDS[1]])
            for output in candidates:
                if not allowed(output, limit, must_end, options):
                    continue
                log_p = sum(
                    model.log_probs(int(source_row[0]), output[:t])[token]
                    for t, token in enumerate(output)
                )
                penalty = length_penalty(len(output), alpha).numpy()
                scored.append((log_p / penalty, output))
    return sorted(scored, key=lambda b: -b[0])


def stepwise_greedy(model, source_row, max_length, options):
    """Greedy search in NumPy: the most likely token the options allow at each step."""
    limit = limit_of(source_row, options, max_length)
    output, log_p = [], 0.0
    for step in range(max_length):
        log_probs = model.log_probs(int(source_row[0]), output)
        if limit < max_length and step + 1 == limit:
            choices = [EOS]
        else:
            choices = [
                t
                for t in WORDS + [EOS]
                if not (t == EOS and step < options.min_length)
                if not has_repeated_ngram(output + [t], options.no_repeat_ngram_size)
            ]
        token = max(choices or [EOS], key=lambda t: log_probs[t])  # nothing left: EOS
        output.append(token)
        log_p += log_probs[token]
        if token == EOS:
            break
    return output, log_p


# Sources of 1 to 3 tokens (the stub reads the first; the limit counts them all).
SOURCES = np.array([[5 + i, 7 * (i % 3 > 0), 9 * (i % 3 > 1)] for i in range(12)], "int32")
OPTIONS = [
    LengthOptions(max_length_a=1.0, max_length_b=1),
    LengthOptions(min_length=3),
    LengthOptions(no_repeat_ngram_size=2),
    LengthOptions(no_repeat_ngram_size=1, min_length=1),
    LengthOptions(no_repeat_ngram_size=1, min_length=3),  # after two words, only EOS is left
    LengthOptions(max_length_a=0.5, max_length_b=2, min_length=2, no_repeat_ngram_size=3),
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_wide_beam_finds_the_best_output_the_options_allow(options, alpha):
    model = HistoryStub(vocab=5, seed=11)
    tokens, scores = beam_search(
        model, SOURCES, BOS, EOS, 5, beam_size=48, alpha=alpha, n_best=3, length_options=options
    )
    for row, source_row in enumerate(SOURCES):
        expected = exhaustive_allowed(model, source_row, 5, alpha, options)[:3]
        missing = [-np.inf] * (3 - len(expected))  # fewer outputs are allowed than asked for
        np.testing.assert_allclose(
            scores.numpy()[row], [s for s, _ in expected] + missing, rtol=1e-5
        )
        for rank, (_, output) in enumerate(expected):
            assert_output(tokens.numpy()[row, rank], output)


@pytest.mark.parametrize("options", OPTIONS)
def test_greedy_takes_the_most_likely_token_the_options_allow(options):
    model = HistoryStub(vocab=5, seed=12)
    tokens, log_p = greedy_search(model, SOURCES, BOS, EOS, 5, length_options=options)
    for row, source_row in enumerate(SOURCES):
        output, expected_log_p = stepwise_greedy(model, source_row, 5, options)
        assert_output(tokens.numpy()[row], output)
        np.testing.assert_allclose(log_p.numpy()[row], expected_log_p, rtol=1e-5)


def test_samples_keep_to_the_options():
    model = HistoryStub(vocab=5, seed=13)
    options = LengthOptions(max_length_a=1.0, max_length_b=1, min_length=1, no_repeat_ngram_size=2)
    sources = np.repeat(SOURCES, 20, axis=0)
    tokens, _ = sample(model, sources, BOS, EOS, 5, seed=3, length_options=options)
    for row, source_row in zip(tokens.numpy(), sources, strict=True):
        output = [int(t) for t in row if t != 0]
        limit = limit_of(source_row, options, 5)
        assert allowed(output, limit, limit < 5, options), (source_row, output)


def test_repeated_ngram_tokens_are_the_ones_completing_an_earlier_ngram():
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, 7, (6, 9)).astype("int32")  # three words: many repeats
    for n, step in itertools.product([1, 2, 3, 4], range(10)):
        banned = repeated_ngram_tokens(tf.constant(tokens), step, n, tf.zeros([6, 8])).numpy()
        for row in range(6):
            written = list(tokens[row, :step])
            expected = {
                t for t in range(8) if has_repeated_ngram(written + [t], n)
            }  # `written` has none of its own: the search never wrote one
            if has_repeated_ngram(written, n):
                expected = {
                    t
                    for t in range(8)
                    for j in range(len(written) - n + 1)
                    if written[j : j + n - 1] == written[len(written) - n + 1 :]
                    and (written[j : j + n - 1] + [t]) == written[j : j + n]
                }
            assert set(np.flatnonzero(banned[row])) == expected, (n, step, row)


def test_an_empty_source_gives_eos_at_once_or_its_prefix_and_eos():
    model = HistoryStub(vocab=5, seed=14)
    sources = np.array([[6, 8], [3, 0], [0, 0], [5, 0]], "int32")  # rows 1, 2 are empty
    prefix_ids = np.array([[0, 0], [0, 0], [4, 1], [0, 0]], "int32")
    alone = greedy_search(model, sources[[0, 3]], BOS, EOS, 5)[0].numpy()
    greedy = greedy_search(model, sources, BOS, EOS, 5)[0].numpy()
    np.testing.assert_array_equal(greedy[[0, 3]], alone)
    assert_output(greedy[1], [EOS])
    assert_output(greedy[2], [EOS])
    beam, scores = beam_search(model, sources, BOS, EOS, 5, beam_size=3, n_best=2)
    assert_output(beam.numpy()[1, 0], [EOS])
    assert scores.numpy()[1, 1] == -np.inf  # no other output is allowed
    drawn = sample(model, sources, BOS, EOS, 5, seed=1)[0].numpy()
    assert_output(drawn[2], [EOS])
    with_prefix = beam_search(model, sources, BOS, EOS, 5, prefix_ids=prefix_ids)[0].numpy()
    assert_output(with_prefix[2], [4, 1, EOS])
    assert_output(with_prefix[1], [EOS])


SEARCHES = {
    "greedy": lambda m, s, p: greedy_search(m, s, BOS, EOS, 6, prefix_ids=p),
    "greedy with attention": lambda m, s, p: greedy_search(
        m, s, BOS, EOS, 6, prefix_ids=p, attention_layer=-1
    )[::2],
    "beam": lambda m, s, p: beam_search(m, s, BOS, EOS, 6, beam_size=3, prefix_ids=p),
    "n-best": lambda m, s, p: beam_search(m, s, BOS, EOS, 6, beam_size=3, n_best=2, prefix_ids=p),
    "beam with attention": lambda m, s, p: beam_search(
        m, s, BOS, EOS, 6, beam_size=3, prefix_ids=p, attention_layer=0
    )[::2],
    "sample": lambda m, s, p: sample(m, s, BOS, EOS, 6, top_k=1, prefix_ids=p),
    "options": lambda m, s, p: beam_search(
        m, s, BOS, EOS, 6, beam_size=2, prefix_ids=p, length_options=OPTIONS[-1]
    ),
}


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_every_search_decodes_each_batch_size_as_sentences_alone(search):
    """Traced with the batch size known, as a `Translator` traces a batch of
    one sentence, and compiled with XLA: each row is what its sentence gives
    alone, with and without a prefix, for batches of 1 and 3 sentences.
    (Sampling draws each row's tokens from the batch's random numbers, so it
    is checked with top_k=1.)"""
    model = random_model(norm_first=False)
    rng = np.random.default_rng(5)
    sources = rng.integers(4, 50, (3, 4)).astype("int32")
    sources[1, 2:] = 0
    prefixes = np.zeros((3, 2), "int32")
    prefixes[0, :2], prefixes[2, :1] = [7, 9], [11]
    run = SEARCHES[search]
    compiled = tf.function(lambda s, p: run(model, s, p), jit_compile=True, autograph=False)
    alone = [
        [t.numpy() for t in compiled(sources[i : i + 1], prefixes[i : i + 1])] for i in range(3)
    ]
    together = compiled(sources, prefixes)
    for i in range(3):
        for part, own in zip(together, alone[i], strict=True):
            np.testing.assert_allclose(part.numpy()[i], own[0], atol=1e-5)
    without = tf.function(lambda s: run(model, s, None), autograph=False)
    assert without(sources[:1])[0].shape[0] == 1


@pytest.mark.parametrize(
    "options, message",
    [
        ({"alpha": float("nan")}, r"`alpha` must be a finite number. Received: alpha=nan"),
        ({"alpha": float("inf")}, "`alpha` must be a finite number"),
        ({"length_options": LengthOptions(max_length_a=-1.0)}, "`max_length_a` must be"),
        ({"length_options": LengthOptions(max_length_a=float("nan"))}, "`max_length_a`"),
        ({"length_options": LengthOptions(max_length_b=0)}, "`max_length_b` must be"),
        ({"length_options": LengthOptions(min_length=6)}, "`min_length` counts the tokens"),
        ({"length_options": LengthOptions(no_repeat_ngram_size=-1)}, "`no_repeat_ngram_size`"),
    ],
)
def test_decoding_options_are_checked_where_they_enter(options, message):
    model = HistoryStub(vocab=5, seed=0)
    with pytest.raises(ValueError, match=message):
        beam_search(model, SOURCES, BOS, EOS, 6, **options)
