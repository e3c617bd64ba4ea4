"""Lexically constrained decoding against exhaustive enumeration on a stub model,
and every search's outputs containing every phrase."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from test_search import BOS, EOS, HistoryStub, assert_output, random_model

from keras_transformer.inference import (
    LengthOptions,
    beam_search,
    constraints,
    greedy_search,
    length_penalty,
    sample,
)

WORDS = [1, 4, 5]  # the stub's vocabulary besides padding, BOS and EOS
SOURCES = np.arange(6, 18, dtype="int32")[:, None]  # twelve sentences
# Per sentence, phrases of the three words (0-padded): none, one, two, one that overlaps itself.
PHRASES = [
    [[0, 0], [0, 0]],
    [[4, 0], [0, 0]],
    [[5, 1], [0, 0]],
    [[1, 1], [0, 0]],
    [[4, 0], [5, 0]],
    [[1, 5], [4, 0]],
] * 2


def contains(output, phrase):
    n = len(phrase)
    return any(output[i : i + n] == phrase for i in range(len(output) - n + 1))


def phrases_of(row, table=PHRASES):
    return [[t for t in phrase if t] for phrase in table[row] if any(phrase)]


def glued(output, phrases, continues):
    """Whether a token of `continues` follows an occurrence of a phrase in `output`."""
    return any(
        output[i : i + len(p)] == p
        and output[i + len(p) : i + len(p) + 1] in [[c] for c in continues]
        for p in phrases
        for i in range(len(output))
    )


def exhaustive_with_phrases(
    model, source_id, phrases, max_length, alpha, must_end=False, continues=()
):
    """Every `(score, output)` of at most `max_length` tokens that contains every
    phrase, with no token of `continues` right after one (and ends with EOS, if it
    `must_end`)."""
    scored = []
    for length in range(1, max_length + 1):
        for words in itertools.product(WORDS, repeat=length - 1):
            cut = length == max_length and not must_end
            endings = [[EOS]] + ([[w] for w in WORDS] if cut else [])
            for ending in endings:
                output = list(words) + ending
                if not all(contains(output, p) for p in phrases) or glued(
                    output, phrases, continues
                ):
                    continue
                log_p = sum(
                    model.log_probs(source_id, output[:t])[token] for t, token in enumerate(output)
                )
                scored.append((log_p / length_penalty(len(output), alpha).numpy(), output))
    return sorted(scored, key=lambda b: -b[0])


def constraint_ids():
    return np.array(PHRASES, "int32")  # (12, 2, 2)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
@pytest.mark.parametrize("max_length", [4, 7])
def test_a_wide_beam_finds_the_best_outputs_that_contain_every_phrase(alpha, max_length):
    # Vocabulary: 0 pad, 1, 4, 5 words, 2 BOS, 3 EOS; 4 tokens at most (max_length
    # 4, or a limit of 0 * source length + 4 below max_length 7, which must end
    # with EOS): 27 live prefixes with 4 extensions each fit in a beam of 128.
    model = HistoryStub(vocab=6, seed=21)
    tokens, scores = beam_search(
        model,
        SOURCES,
        BOS,
        EOS,
        max_length,
        beam_size=128,
        alpha=alpha,
        n_best=3,
        constraint_ids=constraint_ids(),
        length_options=LengthOptions(max_length_b=4),
    )
    for row, source_id in enumerate(SOURCES[:, 0]):
        expected = exhaustive_with_phrases(
            model, int(source_id), phrases_of(row), 4, alpha, must_end=max_length > 4
        )[:3]
        missing = [-np.inf] * (3 - len(expected))  # fewer outputs are allowed than asked for
        np.testing.assert_allclose(
            scores.numpy()[row], [s for s, _ in expected] + missing, rtol=1e-5
        )
        for rank, (_, output) in enumerate(expected):
            assert_output(tokens.numpy()[row, rank], output)


@pytest.mark.parametrize("beam_size", [1, 2, 3])
@pytest.mark.parametrize("max_length", [4, 6])
def test_every_output_of_every_search_contains_every_phrase(beam_size, max_length):
    """Small beams, greedy search and sampling: every output holds every phrase,
    and beam search's score is the reference model's score of its output."""
    model = HistoryStub(vocab=6, seed=22)
    phrases = constraint_ids()
    beam, scores = beam_search(
        model,
        SOURCES,
        BOS,
        EOS,
        max_length,
        beam_size=beam_size,
        alpha=0.0,
        n_best=beam_size,
        constraint_ids=phrases,
    )
    greedy = greedy_search(model, SOURCES, BOS, EOS, max_length, constraint_ids=phrases)[0]
    drawn = sample(model, SOURCES, BOS, EOS, max_length, seed=beam_size, constraint_ids=phrases)
    for row, source_id in enumerate(SOURCES[:, 0]):
        found = [*beam.numpy()[row], greedy.numpy()[row], drawn[0].numpy()[row]]
        for tokens in found:
            output = [int(t) for t in tokens if t]
            assert all(contains(output, p) for p in phrases_of(row)), (row, output)
        for tokens, score in zip(beam.numpy()[row], scores.numpy()[row], strict=True):
            output = [int(t) for t in tokens if t]
            if score > -np.inf:
                log_p = sum(
                    model.log_probs(int(source_id), output[:t])[x] for t, x in enumerate(output)
                )
                np.testing.assert_allclose(score, log_p, rtol=1e-5)


# Phrases of a vocabulary whose token 5 goes on with the word before it: as with
# a real tokenizer, no phrase starts with such a piece.
WORD_PHRASES = [
    [[0, 0], [0, 0]],
    [[4, 0], [0, 0]],
    [[1, 5], [0, 0]],
    [[4, 0], [1, 0]],
    [[1, 5], [4, 0]],
    [[4, 5], [1, 0]],
] * 2


def test_no_piece_that_continues_a_word_follows_a_phrase():
    """The exhaustive best outputs, and greedy search and sampling keep the rule."""
    model = HistoryStub(vocab=6, seed=24)
    continues_word = np.arange(6) == 5
    options = {"constraint_ids": np.array(WORD_PHRASES, "int32"), "continues_word": continues_word}
    tokens, scores = beam_search(model, SOURCES, BOS, EOS, 4, 128, 0.6, n_best=3, **options)
    greedy = greedy_search(model, SOURCES, BOS, EOS, 6, **options)[0]
    drawn = sample(model, SOURCES, BOS, EOS, 6, seed=4, **options)[0]
    changed = 0
    for row, source_id in enumerate(SOURCES[:, 0]):
        phrases = phrases_of(row, WORD_PHRASES)
        expected = exhaustive_with_phrases(model, int(source_id), phrases, 4, 0.6, continues=[5])
        free = exhaustive_with_phrases(model, int(source_id), phrases, 4, 0.6)
        changed += expected[0][1] != free[0][1]
        np.testing.assert_allclose(scores.numpy()[row], [s for s, _ in expected[:3]], rtol=1e-5)
        for rank, (_, output) in enumerate(expected[:3]):
            assert_output(tokens.numpy()[row, rank], output)
        for found in (greedy, drawn):
            output = [int(t) for t in found.numpy()[row] if t]
            assert all(contains(output, p) for p in phrases), (row, output)
            assert not glued(output, phrases, [5]), (row, output)
    assert changed > 0  # the rule decides some sentence's best output


def eager_greedy(model, source_id, phrases, max_length):
    """The reference greedy search with phrases: the most likely token among those
    after which the unmet phrases still fit, except that the phrase furthest along
    (the first on a tie) goes on once started and starts where EOS is most likely."""
    output = []
    while len(output) < max_length and output[-1:] != [EOS]:
        log_p = model.log_probs(source_id, output)
        unmet = [p for p in phrases if not contains(output, p)]
        if not unmet:
            output.append(int(np.argmax(log_p)))
            continue
        furthest = max(unmet, key=lambda p: started(output, p))
        if started(output, furthest) or np.argmax(log_p) == EOS:
            output.append(furthest[started(output, furthest)])
            continue
        room = max_length - 1 - len(output)
        allowed = [t != EOS and still_needed(output + [t], phrases) <= room for t in WORDS + [EOS]]
        output.append(max(np.array(WORDS + [EOS])[allowed], key=lambda t: log_p[t]))
    return output


def started(output, phrase):
    """Tokens of `phrase` that `output` ends with, fewer than all."""
    return max(j for j in range(len(phrase)) if j == 0 or output[-j:] == phrase[:j])


def still_needed(output, phrases):
    unmet = [p for p in phrases if not contains(output, p)]
    return sum(map(len, unmet)) - max([started(output, p) for p in unmet], default=0)


@pytest.mark.parametrize("max_length", [5, 9])
def test_greedy_search_inserts_phrases_where_it_would_end(max_length):
    model = HistoryStub(vocab=6, seed=25)
    found = greedy_search(model, SOURCES, BOS, EOS, max_length, constraint_ids=constraint_ids())[
        0
    ].numpy()
    for row, source_id in enumerate(SOURCES[:, 0]):
        expected = eager_greedy(model, int(source_id), phrases_of(row), max_length)
        assert [int(t) for t in found[row] if t] == expected, row


def test_phrases_in_a_prefix_count_and_an_empty_source_gives_its_phrases():
    model = HistoryStub(vocab=6, seed=23)
    sources = np.array([[3, 0], [7, 8]], "int32")  # an empty source, and another
    phrases = np.array([[[4, 5]], [[4, 5]]], "int32")
    prefixes = np.array([[0, 0], [4, 5]], "int32")
    tokens, _ = beam_search(
        model, sources, BOS, EOS, 6, beam_size=3, prefix_ids=prefixes, constraint_ids=phrases
    )
    assert_output(tokens.numpy()[0], [4, 5, EOS])
    free, _ = beam_search(model, sources[1:], BOS, EOS, 6, beam_size=3, prefix_ids=prefixes[1:])
    np.testing.assert_array_equal(tokens.numpy()[1], free.numpy()[0])  # met by the prefix


def test_sentences_without_phrases_decode_as_without_constraints():
    """A real model; all phrases empty, or only the first sentence's given."""
    model = random_model(norm_first=False)
    rng = np.random.default_rng(7)
    sources = rng.integers(4, 50, (6, 5)).astype("int32")
    none = np.zeros((6, 2, 3), "int32")
    first_only = none.copy()
    first_only[0, 0, :2] = [12, 13]
    for search in [
        lambda c: beam_search(
            model, sources, BOS, EOS, 10, beam_size=4, n_best=2, constraint_ids=c
        ),
        lambda c: greedy_search(model, sources, BOS, EOS, 10, constraint_ids=c),
    ]:
        for a, b, c in zip(search(None), search(none), search(first_only), strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
            np.testing.assert_array_equal(a.numpy()[1:], c.numpy()[1:])


def test_phrases_that_cannot_fit_are_an_error_naming_the_sentence():
    model = HistoryStub(vocab=6, seed=0)
    phrases = np.zeros((2, 1, 4), "int32")
    phrases[1, 0] = [4, 5, 1, 4]
    with pytest.raises(ValueError, match="constraints of sentence 1 need 4 tokens"):
        beam_search(model, SOURCES[:2], BOS, EOS, 4, constraint_ids=phrases)
    with pytest.raises(ValueError, match="`constraint_ids` must be integer"):
        greedy_search(model, SOURCES[:2], BOS, EOS, 4, constraint_ids=np.zeros((2, 3)))


def test_progress_is_the_longest_suffix_that_starts_a_phrase():
    rng = np.random.default_rng(3)
    tokens = rng.integers(4, 6, (8, 7)).astype("int32")
    phrases = rng.integers(4, 6, (8, 2, 3)).astype("int32")
    phrases[:, 1, 2] = 0  # second phrases of two tokens
    lengths = (phrases != 0).sum(-1).astype("int32")
    state = constraints.start(tf.constant(phrases))
    for step in range(8):
        progress = constraints.progress_of(state, tf.constant(lengths))
        for row, c in itertools.product(range(8), range(2)):
            written, phrase = list(tokens[row, :step]), list(phrases[row, c, : lengths[row, c]])
            assert progress.met.numpy()[row, c] == contains(written, phrase)
            under_way = max(j for j in range(len(phrase)) if j == 0 or written[-j:] == phrase[:j])
            assert progress.progress.numpy()[row, c] == under_way, (step, row, c)
        if step < tokens.shape[1]:
            state = constraints.advance(state, phrases, lengths, tf.constant(tokens[:, step]))
