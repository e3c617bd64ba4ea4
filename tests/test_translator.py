"""The Translator's decoding options: n-best, target prefixes, sampling and ensembles."""

import logging
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import load_tiny_translation, renumbered

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.inference import Ensemble, LengthOptions, Translator, beam_search

SENTENCES = numbers_corpus("test").sources[:12]


@pytest.fixture(scope="module")
def parts(tiny_translation):
    """One model and tokenizer for the module's tests, which only read them."""
    return load_tiny_translation(tiny_translation)


def translator(parts, **options):
    model, tokenizer = parts
    return Translator(model, tokenizer, tokenizer, max_length=30, jit_compile=False, **options)


def test_a_translator_holds_one_decode_options_and_copies_by_replacing_fields(parts):
    model, tokenizer = parts
    options = kt.inference.DecodeOptions(beam_size=2, max_length=12, no_repeat_ngram_size=3)
    made = Translator(model, tokenizer, tokenizer, options, jit_compile=False, alpha=1.0)
    assert made.options == options.replace(alpha=1.0)
    assert (made.beam_size, made.alpha, made.max_length) == (2, 1.0, 12)
    assert made.length_options == kt.inference.LengthOptions(0.0, None, 0, 3)
    greedy = made.copy(beam_size=1)
    assert greedy.options == made.options.replace(beam_size=1) and not greedy.jit_compile
    assert greedy.model is model and greedy.source_tokenizer is tokenizer
    with pytest.raises(ArgumentError, match="give single options by name .* options=30"):
        Translator(model, tokenizer, tokenizer, 30)  # max_length was the fourth argument
    with pytest.raises(ArgumentError, match="Unknown decoding option 'beam'"):
        made.copy(beam=3)


def test_a_translator_in_one_cache_traces_one_loop_and_translates_the_same(parts):
    growing = translator(parts, beam_size=3).copy(max_length=40)  # caches of 20 and 40
    fixed = growing.copy(grow_cache=False)
    assert not fixed.grow_cache and fixed.copy(beam_size=2).grow_cache is False
    assert fixed(SENTENCES).numpy().tolist() == growing(SENTENCES).numpy().tolist()

    def loops(made):  # in the graph the calls above traced
        library = made._translate_strings.get_concrete_function().graph.as_graph_def().library
        nodes = [node.op for function in library.function for node in function.node_def]
        return sum(op in ("While", "StatelessWhile") for op in nodes)

    assert (loops(growing), loops(fixed)) == (2, 1)


def test_a_translator_translates_alike_after_the_calls_that_clear_tensorflows_kernels(parts):
    """`keras.utils.set_random_seed` and `keras.backend.clear_session` free TensorFlow's
    eager kernels; a search traced before them still has its tokenizers' models."""
    made = translator(parts, beam_size=2)
    expected = made(SENTENCES[:3]).numpy().tolist()
    for clear in (lambda: keras.utils.set_random_seed(1), keras.backend.clear_session):
        clear()
        assert made(SENTENCES[:3]).numpy().tolist() == expected


def test_translators_made_in_a_loop_print_no_retracing_warning(parts, monkeypatch):
    """Each translator traces its own methods once; TensorFlow counts several translators'
    traces as one function retracing and warns, with advice that does not apply. That
    warning is not shown; its warning about a function that does retrace still is."""
    from tensorflow.python.eager.polymorphic_function import polymorphic_function

    # TensorFlow warns about a function at most twice a process: a fresh count here.
    fresh = polymorphic_function._FrequentTracingDetectorManager()
    monkeypatch.setattr(polymorphic_function, "_frequent_tracing_detector_manager", fresh)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    tf.get_logger().addHandler(handler)
    try:
        for _ in range(5):  # TensorFlow warns at five traces in ten calls
            translator(parts, beam_size=1)(SENTENCES[:1])
        assert [r.getMessage() for r in records if "retracing" in r.getMessage()] == []

        @tf.function
        def retraced(x):
            return x + 1

        for length in range(1, 6):
            retraced(tf.zeros([length]))  # a new shape each call: a trace each call
        assert any("retracing" in r.getMessage() and "retraced" in r.getMessage() for r in records)
    finally:
        tf.get_logger().removeHandler(handler)


def test_a_translator_traces_its_search_once_for_every_bucket(parts, monkeypatch):
    """Sources of other lengths and batches of other sizes pad to other buckets; the
    search is traced once for all of them, once more for prefixes, and the outputs are
    each sentence's alone. (With XLA, where each bucket still compiles, see
    `test_a_bucketed_search_pads_to_few_shapes_and_gives_each_row_its_own_search`.)"""
    traces = []
    search = kt.inference.BucketedSearch._search

    def counted(self, *args):
        traces.append([None if a is None else a.shape.as_list() for a in args])
        return search(self, *args)

    monkeypatch.setattr(kt.inference.BucketedSearch, "_search", counted)
    model, tokenizer = parts
    # Options no other translator of the module's model has: translators that search
    # alike share one search, and this one must be new.
    made = Translator(model, tokenizer, tokenizer, max_length=29, beam_size=2, jit_compile=False)
    batches = [SENTENCES[:1], SENTENCES[:5], ["one " * 20] * 3, SENTENCES[:2]]
    outputs = [made.translate(batch).best for batch in batches]
    assert traces == [[[None, None], None, None]], traces
    assert outputs == [[made.translate([s]).best[0] for s in batch] for batch in batches]
    made.translate(SENTENCES[:2], prefixes=["one", ""])
    made.translate(SENTENCES[:3], prefixes=["two", "", "three"])
    assert traces[1:] == [[[None, None], [None, None], None]], traces


def test_n_best_are_sorted_and_the_first_is_the_best(parts):
    beam = translator(parts, beam_size=4, n_best=3)
    result = beam.translate(SENTENCES)
    texts, scores = result.translations, result.scores
    assert texts.shape == scores.shape == (len(SENTENCES), 3)
    assert (np.diff(scores, axis=1) <= 1e-6).all(), scores
    best = beam.copy(n_best=1)(tf.constant(SENTENCES)).numpy()
    assert result.best == texts[:, 0].tolist() == [t.decode() for t in best]
    with pytest.raises(ValueError, match="`n_best` can be at most `beam_size`"):
        beam.copy(n_best=5)


def test_translate_gives_python_values_of_what_translate_tensors_gives_a_graph(parts):
    search = translator(parts, beam_size=3, n_best=2, max_source_length=4)
    sentences = ["one", "one two three four five six", ""]  # cut: [False, True, False] below
    result, tensors = search.translate(sentences), search.translate_tensors(sentences)
    texts = [[t.decode() for t in row] for row in tensors["translations"].numpy()]
    assert result.translations.tolist() == texts
    assert {type(t) for row in result.translations for t in row} == {str}
    np.testing.assert_array_equal(result.scores, tensors["scores"].numpy())
    assert result.truncated.tolist() == tensors["truncated"].numpy().tolist() == [0, 1, 0]
    scores = tensors["scores"].numpy()[1].tolist()
    assert result.hypotheses()[1] == list(zip(texts[1], scores, strict=True))
    assert dict(result).keys() == {"translations", "scores", "truncated"}

    @tf.function(autograph=False)
    def in_a_graph(sentences):
        return search.translate(sentences)

    with pytest.raises(ArgumentError, match="translate_tensors"):
        in_a_graph(tf.constant(["eins"]))


@pytest.mark.parametrize("beam_size", [1, 4])
def test_translations_start_with_their_prefix(parts, beam_size):
    free = translator(parts, beam_size=beam_size)
    plain = [t.decode() for t in free(tf.constant(SENTENCES)).numpy()]
    own_start = [text.split()[0] for text in plain]
    prefixes = [own_start[i] if i % 3 == 0 else "" if i % 3 == 1 else "seven" for i in range(12)]
    texts = free.translate(SENTENCES, prefixes).best
    for i, (text, prefix) in enumerate(zip(texts, prefixes, strict=True)):
        assert text.startswith(prefix), (text, prefix)
        if i % 3 != 2:  # its own first word, or no prefix: the free translation
            assert text == plain[i], (text, plain[i])


def test_a_prefix_fits_in_max_length_and_each_sentence_has_one(parts):
    _, tokenizer = parts
    prefix = "seven hundred and seventy-seven"
    tokens = int(tokenizer.tokenize([prefix]).row_lengths()[0])
    fits = translator(parts, beam_size=4).copy(max_length=tokens)
    texts = fits.translate(SENTENCES[:2], ["", prefix]).best
    assert texts[1] == prefix  # the whole output, without EOS
    with pytest.raises(ValueError, match=f"Prefix 1 has {tokens} tokens.*max_length={tokens - 1}"):
        fits.copy(max_length=tokens - 1).translate(SENTENCES[:2], ["", prefix])
    with pytest.raises(ValueError, match="Received: 2 sentences, 1 prefixes"):
        fits.translate(SENTENCES[:2], [prefix])


def test_sampling_is_seeded_and_cold_sampling_is_greedy(parts):
    greedy = translator(parts, beam_size=1)(tf.constant(SENTENCES)).numpy()
    cold = translator(parts, sample=True, temperature=1e-4, seed=5)(tf.constant(SENTENCES))
    np.testing.assert_array_equal(cold.numpy(), greedy)
    hot = translator(parts, sample=True, temperature=2.0, n_best=4, seed=1)
    first = hot.translate(SENTENCES).translations
    np.testing.assert_array_equal(hot.translate(SENTENCES).translations, first)
    assert any(len(set(row)) > 1 for row in first)  # four draws are not all alike
    other = hot.copy(seed=2).translate(SENTENCES).translations
    assert (other != first).any()


def test_an_ensemble_of_a_model_with_itself_is_that_model(parts):
    model, tokenizer = parts
    single = translator(parts, beam_size=4, n_best=2).translate(SENTENCES)
    doubled = Translator(
        Ensemble([model, model]), tokenizer, tokenizer, max_length=30, n_best=2, jit_compile=False
    )
    one = doubled.copy(model=Ensemble([model]))
    both = doubled.translate(SENTENCES)
    np.testing.assert_array_equal(both["translations"], single["translations"])
    # Equal to float rounding: the two searches are different graphs, which TensorFlow's
    # graph rewrites may compute in a different order.
    np.testing.assert_allclose(both["scores"], single["scores"], rtol=1e-6)
    np.testing.assert_allclose(both["scores"], one.translate(SENTENCES)["scores"], rtol=1e-6)


def test_an_ensemble_averages_log_probabilities_and_needs_one_vocabulary(parts):
    model, _ = parts
    other = kt.Transformer(1, 16, 2, 16, model.input_vocab_size, model.target_vocab_size)
    ensemble = Ensemble([model, other])
    source = np.array([[5, 6, 3]], "int32")
    state = ensemble.encode(source)
    cache = ensemble.initial_cache(state, 4)
    logits, _, _ = ensemble.decode_step(np.array([2], "int32"), 0, cache, state)
    expected = []
    for member in (model, other):
        own = member.encode(source)
        own_cache = member.initial_cache(own, 4)
        own_logits, _, _ = member.decode_step(np.array([2], "int32"), 0, own_cache, own)
        expected.append(tf.nn.log_softmax(own_logits).numpy())
    mean = np.mean(expected, axis=0)  # the renormalized mean of the log-probabilities
    expected_log_probs = mean - np.logaddexp.reduce(mean, axis=-1, keepdims=True)
    np.testing.assert_allclose(tf.nn.log_softmax(logits), expected_log_probs, atol=1e-5)
    _, _, attention = ensemble.decode_step(np.array([2], "int32"), 0, cache, state, -1)
    each = [
        member.decode_step(np.array([2], "int32"), 0, member.initial_cache(own, 4), own, -1)[2]
        for member, own in zip((model, other), state, strict=True)
    ]
    np.testing.assert_allclose(attention, np.mean(each, axis=0), atol=1e-6)
    small = kt.Transformer(1, 16, 2, 16, 7, 7)
    with pytest.raises(ValueError, match="must share their vocabularies"):
        Ensemble([model, small])


@pytest.mark.parametrize(
    "options",
    [
        {"beam_size": 1},
        {"beam_size": 3, "n_best": 2},
        {"beam_size": 3, "patience": 1},
        {"sample": True, "n_best": 2, "seed": 4},
    ],
)
def test_empty_and_whitespace_sources_translate_as_empty_strings(parts, options):
    search = translator(parts, **options)
    result = search.translate(["", SENTENCES[0], "   "]).translations
    assert result[0, 0] == result[2, 0] == ""
    if not search.sample:  # a sample's random numbers depend on the batch
        alone = search.translate([SENTENCES[0]]).translations
        np.testing.assert_array_equal(result[1], alone[0])
    assert search.translate([" "]).best == [""]


@pytest.mark.parametrize(
    "sentences, received",
    [
        (SENTENCES[0], "one string"),
        ([SENTENCES[:2]], "shape (1, 2)"),
        ([1, 2], "[1, 2]"),
        (tf.constant([1, 2]), "dtype=int32"),
    ],
)
def test_anything_but_a_list_of_strings_is_refused_by_every_entry_point(parts, sentences, received):
    search = translator(parts, beam_size=1)
    for entry_point in (search, search.translate, search.truncated, search.source_ids):
        with pytest.raises(ArgumentError, match="`sentences` must be") as error:
            entry_point(sentences)
        assert received in str(error.value)
    assert search.translate([])["translations"].shape == (0, 1)
    assert search([]).shape == (0,)


def test_sources_cut_to_max_source_length_are_reported(parts):
    search = translator(parts, beam_size=1, max_source_length=4)
    sentences = ["one", "one two three four five six", ""]
    lengths = search.source_tokenizer.tokenize(tf.constant(sentences)).row_lengths().numpy()
    expected = lengths + 1 > 4  # EOS counts
    assert expected.tolist() == [False, True, False]
    np.testing.assert_array_equal(search.truncated(sentences), expected)
    np.testing.assert_array_equal(search.translate(sentences)["truncated"], expected)


def test_length_options_and_patience_reach_the_search_as_given(parts):
    options = {"max_length_a": 0.5, "max_length_b": 3, "min_length": 2, "no_repeat_ngram_size": 1}
    search = translator(parts, beam_size=3, **options)
    source_ids = search.source_ids(tf.constant(SENTENCES))
    model, tokenizer = parts
    expected, _ = beam_search(
        model,
        source_ids,
        tokenizer.bos_id,
        tokenizer.eos_id,
        30,
        beam_size=3,
        length_options=LengthOptions(**options),
    )
    np.testing.assert_array_equal(search.translate_ids(source_ids), expected)
    for row, source in zip(expected.numpy(), source_ids.numpy(), strict=True):
        output = [t for t in row if t]
        assert len(output) <= int(0.5 * (source != 0).sum() + 3)
        assert len(set(output)) == len(output) and output[-1] == tokenizer.eos_id
    with pytest.raises(ValueError, match="`alpha` must be a finite number"):
        search.copy(alpha=float("nan"))
    with pytest.raises(ValueError, match="`no_repeat_ngram_size` must be an integer >= 0"):
        search.copy(no_repeat_ngram_size=-2)
    with pytest.raises(ValueError, match="`patience` must be a number >= 1"):
        search.copy(patience=0)

    stops_sooner = translator(parts, beam_size=4, alpha=1.0, patience=1)
    source_ids = search.source_ids(tf.constant(numbers_corpus("test").sources[:64]))
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    sooner, _ = beam_search(model, source_ids, bos, eos, 30, 4, alpha=1.0, patience=1)
    exact, _ = beam_search(model, source_ids, bos, eos, 30, 4, alpha=1.0)
    np.testing.assert_array_equal(stops_sooner.translate_ids(source_ids), sooner)
    assert (sooner.numpy() != exact.numpy()).any(axis=1).sum() >= 1  # patience reached it


def contains_phrase(tokenizer, text, phrase):
    """Whether the pieces of `phrase` occur in those of `text` as one run, and
    the phrase in the text as whole words ("eight" is not in "eighteen")."""
    pieces = tokenizer.tokenize(tf.constant([text, phrase])).to_list()
    n = len(pieces[1])
    as_pieces = any(pieces[0][i : i + n] == pieces[1] for i in range(len(pieces[0]) - n + 1))
    return as_pieces and re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text) is not None


@pytest.mark.parametrize(
    "options", [{"beam_size": 4}, {"beam_size": 1}, {"sample": True, "seed": 3}]
)
def test_translations_contain_their_constraints(parts, options):
    search = translator(parts, **options)
    _, tokenizer = parts
    phrases = [["eight"], [], ["seventy", "two"], ["hundred and"], ["one"], [], ["nine"]]
    sentences = SENTENCES[: len(phrases) - 1] + [""]
    texts = search(sentences, constraints=phrases).numpy()
    for text, wanted in zip(texts, phrases, strict=True):
        for phrase in wanted:
            assert contains_phrase(tokenizer, text.decode(), phrase), (text, phrase)
    free = search(tf.constant(sentences)).numpy()
    if not search.sample:  # sentences without phrases translate as without constraints
        assert texts[1] == free[1] and texts[5] == free[5]
        alone = search(sentences[2:3], constraints=phrases[2:3]).numpy()  # a batch of one
        assert alone[0] == texts[2]
    assert texts[-1] == b"nine"  # an empty sentence: its phrase alone


def test_constraints_that_cannot_fit_are_refused_naming_the_sentence(parts):
    search = translator(parts, beam_size=2)
    with pytest.raises(ValueError, match="constraints of sentence 1 need"):
        search.translate(["eins", "zwei"], constraints=[[], ["one two three " * 10]])
    with pytest.raises(ValueError, match="Give one row of constraints per sentence"):
        search.translate(["eins", "zwei"], constraints=[["one"]])


def test_a_vocabulary_that_numbers_its_special_pieces_otherwise_translates_the_same(parts):
    """BOS and EOS moved to ordinary pieces' ids, those pieces to 2 and 3, and the model's
    embedding and output rows with them: the same translations, from other ids."""
    model, tokenizer = parts
    word = next(i for i in range(10, tokenizer.vocab_size) if tokenizer.pieces[i][1:].isalpha())
    model2, tokenizer2, permutation = renumbered(model, tokenizer, [(2, 9), (3, word)])
    assert (tokenizer2.bos_id, tokenizer2.eos_id, tokenizer2.unk_id) == (9, word, 1)
    sources = [*SENTENCES[:6], "", "   "]
    ids = tokenizer.tokenize(sources).to_list()
    assert tokenizer2.tokenize(sources).to_list() == [list(permutation[row]) for row in ids]
    phrases = [[tokenizer.pieces[word][1:]]] * 2  # now the piece of id 3, EOS's old id
    for options in [dict(beam_size=1), dict(beam_size=3, n_best=2)]:
        ours, theirs = (
            Translator(m, t, t, max_length=30, jit_compile=False, **options)
            for m, t in [(model, tokenizer), (model2, tokenizer2)]
        )
        expected = ours.translate(sources)
        got = theirs.translate(sources)
        assert got.translations.tolist() == expected.translations.tolist()
        np.testing.assert_allclose(got.scores, expected.scores, rtol=1e-4, atol=1e-5)
        assert got.translations[-2:].tolist() == [[""] * options.get("n_best", 1)] * 2
        result = theirs.search(theirs.source_ids(sources[:2]))
        assert result.token_ids.numpy().tolist() == (
            permutation[ours.search(ours.source_ids(sources[:2])).token_ids.numpy()].tolist()
        )
        constrained = theirs.translate(sources[:2], constraints=phrases)["translations"]
        expected = ours.translate(sources[:2], constraints=phrases)["translations"]
        assert constrained.tolist() == expected.tolist()
        assert all(phrases[0][0] in t for t in constrained[:, 0])


def test_translators_that_search_alike_share_one_search_and_its_trace(parts):
    """A translator whose model, tokenizers, options and search settings are another's
    searches with the other's search, traced once for both; one that differs in any of
    them (an option, XLA, another model) has a search of its own."""
    model, tokenizer = parts
    first = Translator(model, tokenizer, tokenizer, max_length=27, beam_size=2, jit_compile=False)
    expected = first(SENTENCES[:3]).numpy().tolist()
    second = first.copy()
    assert second.bucketed_search is first.bucketed_search
    assert second(SENTENCES[:3]).numpy().tolist() == expected
    assert second(SENTENCES[:1]).numpy().tolist() == expected[:1]
    assert first.bucketed_search._compiled.experimental_get_tracing_count() == 1
    for other in (
        first.copy(beam_size=3),
        first.copy(max_source_length=9),
        first.copy(jit_compile=True),
        first.copy(grow_cache=False),
        Translator(model.__class__.from_config(model.get_config()), tokenizer, tokenizer),
    ):
        assert other.bucketed_search is not first.bucketed_search


def test_a_model_keeps_its_most_recently_asked_for_searches(parts):
    """A sweep over options keeps `KEPT_SEARCHES` searches with the model, the most recently
    asked for; a translator whose search the model let go still searches with it."""
    from keras_transformer.inference.bucketed_search import KEPT_SEARCHES

    model, tokenizer = parts
    made = [
        Translator(model, tokenizer, tokenizer, max_length=10 + i, jit_compile=False)
        for i in range(KEPT_SEARCHES + 2)
    ]
    again = made[-1].copy()
    assert again.bucketed_search is made[-1].bucketed_search
    assert made[2].copy().bucketed_search is made[2].bucketed_search  # kept
    assert made[0].copy().bucketed_search is not made[0].bucketed_search  # let go
    assert made[0](SENTENCES[:1]).numpy().tolist() == made[0].copy()(SENTENCES[:1]).numpy().tolist()


def test_a_bucketed_search_pads_to_few_shapes_and_gives_each_row_its_own_search(parts):
    """Batches of 3 and 4 sources of up to 8 tokens share one padded shape (4, 8), which
    XLA compiles once, and one source is (1, 8); the search is traced once for both. Each
    row's output equals the search run on that source alone, unpadded."""
    model, tokenizer = parts
    options = kt.inference.DecodeOptions(beam_size=2, max_length=20)
    search = kt.inference.BucketedSearch(model, tokenizer, tokenizer, options)
    made = translator(parts)  # for its source ids
    sources = [s for s in SENTENCES if len(tokenizer.tokenize(s)) < 8]
    target = kt.inference.TargetSide(tokenizer.bos_id, tokenizer.eos_id)
    alone = kt.inference.make_search(options, target)
    for batch in (sources[:3], sources[:4], sources[:1]):
        result = search(made.source_ids(batch))
        assert result.token_ids.shape[0] == len(batch)
        for row, sentence in enumerate(batch):
            expected = alone(model, made.source_ids([sentence]))  # (1, S), no padding
            length = int(expected.lengths[0, 0])
            assert result.token_ids[row, 0, :length].numpy().tolist() == (
                expected.token_ids[0, 0, :length].numpy().tolist()
            ), sentence
            np.testing.assert_allclose(result.scores[row], expected.scores[0], atol=1e-4)
    assert search._compiled.experimental_get_tracing_count() == 1  # for (None, None)
