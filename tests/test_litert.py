"""The LiteRT export against the SavedModel and the package's search, sentence by sentence."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
from made_once import made_once

import keras_transformer as kt
from keras_transformer import run
from keras_transformer.cli import main
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.export import export_translator
from keras_transformer.text import SentencePieceTokenizer, WordPieceTokenizer

pytest.importorskip("ai_edge_litert")
from keras_transformer.export.litert import LITERT_FILE, OPTIONS_FILE, export_litert  # noqa: E402
from keras_transformer.export.litert_runtime import LiteRTTranslator  # noqa: E402

SMALL_EXPORT = pytest.mark.xdist_group("small_litert")  # an untrained model's export, made once

RUN = os.path.join("runs", "numbers_de_en")
EDGE_CASES = ["", "   ", "eins " * 100]  # empty, whitespace only, cut to the source length


@pytest.fixture(scope="session")
def float32_beam(main_job, tmp_path_factory):
    """The main job's run (beam 4) exported as a float32 LiteRT directory, once a test run."""
    directory, _ = main_job

    def export(output):
        export_litert(beam_translator(directory), output / "beam")

    return str(made_once(tmp_path_factory, "main_job_litert", export) / "beam")


def test_float32_litert_gives_the_saved_models_tokens_on_every_test_sentence(
    main_job, float32_beam, tmp_path
):
    """Each sentence's ids and text as `LiteRTTranslator.__call__` decodes them (one LiteRT
    search a sentence), against the SavedModel's; the same for greedy search."""
    directory, _ = main_job
    sentences = numbers_corpus("test", "de", "en").sources + EDGE_CASES
    saved_model = tf.saved_model.load(str(directory / "saved_models" / "numbers_de_en" / "1"))
    serve, ids_of = (
        saved_model.signatures["serving_default"],
        saved_model.signatures["translate_ids"],
    )

    beam = LiteRTTranslator(float32_beam)
    assert beam.options["beam_size"] == 4 and beam.max_source_length == 64
    decoded = []  # (source_ids, target_ids) of each sentence, as `beam(sentences)` decodes it
    beam.translate_ids = recorded(beam.translate_ids, decoded)
    texts = beam(sentences)
    source_ids = np.concatenate([beam.source_ids(s) for s in sentences])  # (N, 64), 0-padded
    np.testing.assert_array_equal(np.concatenate([ids for ids, _ in decoded]), source_ids)
    expected_ids = in_batches(ids_of, "source_ids", source_ids)["target_ids"]  # (N, 64)
    expected_texts = in_batches(serve, "inputs", np.array(sentences, object))["outputs"]
    # The SavedModel cuts sources at the run's limit; an over-long one is compared with
    # the package's translation at the LiteRT file's own limit.
    assert beam.truncated(sentences) == [False] * (len(sentences) - 1) + [True]
    cut = beam_translator(directory).copy(max_source_length=beam.max_source_length)
    expected_texts[-1] = cut(tf.constant(sentences[-1:])).numpy()[0]
    for index, (_, actual) in enumerate(decoded):
        np.testing.assert_array_equal(actual, expected_ids[index : index + 1], str(index))
        assert texts[index] == expected_texts[index].decode(), index
    assert texts[-3:-1] == ["", ""]
    for wrong, received in ((sentences[0], "one string"), ([sentences[0], 3], "an item 3")):
        with pytest.raises(ArgumentError, match=received):
            beam(wrong)

    # Greedy search against a SavedModel of the same run's greedy search.
    greedy_translator = run.make_translator(str(directory / RUN), beam_size=1)
    greedy_saved = export_translator(
        greedy_translator, "greedy", tmp_path, text=False, warmup=False
    )
    ids_of = tf.saved_model.load(greedy_saved).signatures["translate_ids"]
    greedy = LiteRTTranslator(export_litert(greedy_translator, tmp_path / "greedy"))
    expected_ids = in_batches(ids_of, "source_ids", source_ids)["target_ids"]
    for index in range(len(sentences)):
        actual = greedy.translate_ids(source_ids[index : index + 1])
        np.testing.assert_array_equal(actual, expected_ids[index : index + 1], str(index))


def recorded(function, calls):
    """`function`, appending `(argument, result)` to `calls` at each call."""

    def call(argument):
        result = function(argument)
        calls.append((argument, result))
        return result

    return call


def in_batches(signature, name, values, batch_size=256):
    """A SavedModel signature's outputs for `values` fed as `name` a batch at a time.

    Every output's first axis is the batch and `target_ids` is `(batch, max_length)`
    whatever the sentences' lengths, so the batches join on axis 0.
    """
    parts = [
        signature(**{name: tf.constant(values[start : start + batch_size])})
        for start in range(0, len(values), batch_size)
    ]
    return {key: np.concatenate([part[key].numpy() for part in parts]) for key in parts[0]}


def beam_translator(directory):
    return run.make_translator(str(directory / RUN))


@pytest.mark.parametrize("quantization", ["float16", "dynamic_int8"])
def test_quantized_litert_is_smaller_and_translates_nearly_every_sentence_alike(
    main_job, float32_beam, tmp_path, quantization
):
    directory, _ = main_job
    sentences = numbers_corpus("test", "de", "en").sources[:300]
    full = float32_beam
    small = export_litert(
        beam_translator(directory), tmp_path / quantization, quantization=quantization
    )
    sizes = [os.path.getsize(os.path.join(d, LITERT_FILE)) for d in (full, small)]
    assert sizes[1] < 0.6 * sizes[0], sizes
    outputs = [LiteRTTranslator(d)(sentences) for d in (full, small)]
    same = np.mean([a == b for a, b in zip(*outputs, strict=True)])
    assert same >= 0.97, same


def test_litert_cli_exports_and_translates(main_job, tmp_path, monkeypatch, capsys):
    """`keras-transformer export --format litert` and `translate --litert`; the translation
    runs as a user runs it (its own process), the export and the refused commands in this
    one (they were processes of their own)."""
    directory, _ = main_job
    monkeypatch.chdir(directory)
    output = tmp_path / "litert"
    export = ["export", "--run-dir", RUN, "--format", "litert", "--output", str(output)]
    assert main(export + ["--beam-size", "1", "--quantization", "dynamic_int8"]) == 0
    sentences = ["dreihunderteinundzwanzig", "", "   ", "eins " * 100]
    command = os.path.join(os.path.dirname(sys.executable), "keras-transformer")
    done = subprocess.run(
        [command, "translate", "--litert", str(output), *sentences],
        cwd=directory,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["three hundred and twenty-one", "", ""]
    assert (
        "warning: 1 of 4 lines are longer than the 64 source tokens the model reads (EOS "
        "included) and are translated cut to them: line 4"
    ) in done.stderr
    for arguments, message in [
        (
            ["translate", "--litert", str(tmp_path / "nothing"), "eins"],
            f"{OPTIONS_FILE} is missing",
        ),
        (["translate", "--litert", str(output), "--beam-size", "4", "eins"], "need --run-dir"),
        (["export", "--run-dir", RUN, "--max-source-length", "32"], "for --format litert"),
        (["export", "--run-dir", RUN, "--format", "litert", "--quantization", "int4"], "int4"),
    ]:
        capsys.readouterr()
        assert main(arguments) == 2, arguments
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err[-2000:]


def small_translator(tokenizer_class=SentencePieceTokenizer, dtype=None, **options):
    corpus = numbers_corpus("train", limit=300)
    tokenizer = tokenizer_class.train(corpus.sources + corpus.targets, vocab_size=100)
    keras.utils.set_random_seed(0)
    vocab = tokenizer.vocab_size
    model = kt.Transformer(1, 16, 2, 32, vocab, vocab, dtype=dtype)
    return kt.Translator(model, tokenizer, tokenizer, max_length=8, **options)


@pytest.mark.parametrize(
    "translator, message",
    [
        (lambda: small_translator(sample=True), "sampling and n-best lists are not exported"),
        (lambda: small_translator(beam_size=2, n_best=2), "Received: sample=False, n_best=2"),
        (lambda: small_translator(WordPieceTokenizer), "the source tokenizer is a WordPiece"),
        (
            lambda: small_translator(dtype="mixed_bfloat16"),
            r"computes in bfloat16 \(dtype policy mixed_bfloat16\). Give the translator "
            r"`model.float32_copy\(\)`",
        ),
    ],
    ids=["sampling", "n_best", "wordpiece", "mixed_precision"],
)
def test_what_litert_cannot_hold_is_refused_by_name(translator, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        export_litert(translator(), tmp_path)


@pytest.fixture(scope="module")
def small_export(tmp_path_factory):
    """`(translator, LiteRT directory)` of an untrained model whose sources are cut at 8."""
    translator = small_translator(max_source_length=8)
    directory = tmp_path_factory.mktemp("small_litert")
    return translator, export_litert(translator, directory, max_source_length=8)


@SMALL_EXPORT
def test_every_path_cuts_a_source_to_the_same_ids(small_export, tmp_path):
    """The graph (`Translator`, which the SavedModel traces), the LiteRT and CTranslate2
    runtimes and the training pipeline keep a source's first `limit - 1` pieces, then EOS."""
    from keras_transformer.export import CTranslate2Translator, export_ctranslate2

    translator, litert_directory = small_export
    limit = translator.max_source_length
    tokenizer = translator.source_tokenizer
    word = "neunhundertneunundneunzigtausendneunhundert"
    sentences = ["", "   ", *(word[:n] for n in range(1, len(word) + 1)), "eins " * 100]
    pieces = tokenizer.tokenize(tf.constant(sentences)).to_list()
    assert {len(p) + 1 > limit for p in pieces} == {False, True}
    assert {limit - 1, limit} <= {len(p) for p in pieces}  # the last piece kept, the first cut
    expected = [p[: limit - 1] + [tokenizer.eos_id] for p in pieces]  # written out, not shared

    litert = LiteRTTranslator(
        export_litert(translator, tmp_path / "litert", max_source_length=limit)
    )
    ctranslate2 = CTranslate2Translator(export_ctranslate2(translator, tmp_path / "ctranslate2"))
    pipeline = kt.text.make_batches(
        (sentences, sentences),
        tokenizer,
        tokenizer,
        max_length=limit,
        batch_size=len(sentences),
        bucketing=False,
        overflow="truncate",
        shuffle=False,
        cache=False,
    )
    (pipeline_ids, _), _ = next(iter(pipeline.dataset))
    paths = {
        "graph": translator.source_ids(tf.constant(sentences)).numpy(),
        "litert": np.concatenate([litert.source_ids(s) for s in sentences]),
        "pipeline": pipeline_ids.numpy(),
    }
    for name, ids in paths.items():
        assert [[i for i in row if i != tokenizer.pad_id] for row in ids] == expected, name
    pieces_of = [[tokenizer.pieces[i] for i in row[:-1]] for row in expected]
    assert ctranslate2.source_pieces(sentences) == pieces_of  # CTranslate2 appends the EOS
    truncated = [len(p) + 1 > limit for p in pieces]
    assert translator.truncated(sentences).numpy().tolist() == truncated
    assert litert.truncated(sentences) == truncated


@SMALL_EXPORT
def test_litert_translator_refuses_bad_input(small_export, tmp_path, capfd):
    with pytest.raises(FileNotFoundError, match=rf"{OPTIONS_FILE} is missing"):
        LiteRTTranslator(tmp_path)
    capfd.readouterr()
    translate = LiteRTTranslator(small_export[1])
    assert "XNNPACK" not in capfd.readouterr().err  # LiteRT's INFO line is not shown
    with pytest.raises(ValueError, match=r"shape \(1, 8\). Received: shape \(1, 9\)"):
        translate.translate_ids(np.zeros((1, 9), np.int32))
    with pytest.raises(ValueError, match=r"Received: shape \(1, 8\), dtype float32"):
        translate.translate_ids(np.zeros((1, 8), np.float32))
    with pytest.raises(ValueError, match="must be a list of strings"):
        translate("eins")
    with pytest.raises(ValueError, match="item 1 is not UTF-8: .* position 4"):
        translate(["eins", b"zwei\xff"])
    assert len(translate(["eins", "zwei"])) == 2
    for threads in (0, 2.0, True):
        refused = rf"`num_threads` must be .* Received: num_threads={threads}"
        with pytest.raises(ArgumentError, match=refused):
            LiteRTTranslator(small_export[1], num_threads=threads)


@SMALL_EXPORT
def test_litert_translate_gives_the_translators_outputs_and_scores(small_export, monkeypatch):
    """`translate`, the interface every engine shares: the translator's texts and scores
    in its shapes, with one thread or two, and what the file cannot do refused by name."""
    from keras_transformer.export import litert_runtime

    translator, directory = small_export
    engine = LiteRTTranslator(directory)
    assert engine.num_threads == 1  # a small file of one sentence a call
    monkeypatch.setattr(litert_runtime, "SEVERAL_THREADS_BYTES", 1)  # as if it were large
    assert LiteRTTranslator(directory).num_threads == min(4, len(os.sched_getaffinity(0)))
    sentences = ["eins", "zweiundzwanzig", "dreihundert", "", "   ", "eins " * 20]
    ours, theirs = translator.translate(sentences), engine.translate(sentences)
    two_threads = LiteRTTranslator(directory, num_threads=2).translate(sentences)
    assert two_threads.translations.tolist() == theirs.translations.tolist()
    np.testing.assert_allclose(two_threads.scores, theirs.scores, rtol=1e-5)
    assert type(theirs) is type(ours) is kt.inference.Translations
    assert theirs.translations.shape == theirs.scores.shape == (len(sentences), 1)
    assert theirs.translations.tolist() == ours.translations.tolist()
    np.testing.assert_allclose(theirs.scores, ours.scores, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(theirs.truncated, ours.truncated)
    opened = kt.run.open_engine(directory)
    assert isinstance(opened, LiteRTTranslator) and opened(sentences) == engine(sentences)
    with pytest.raises(ArgumentError, match=r"fixed at export; \['beam_size'\]"):
        kt.run.open_engine(directory, {"beam_size": 2})
    lines = kt.inference.translate_lines_with_scores(engine, sentences)
    assert [row[0][0] for row in lines] == theirs["translations"][:, 0].tolist()
    assert kt.inference.translate_lines(engine, sentences) == engine(sentences)
    for name, value in [("prefixes", [""] * 6), ("constraints", [[]] * 6)]:
        with pytest.raises(ArgumentError, match=f"LiteRTTranslator does not take `{name}`"):
            engine.translate(sentences, **{name: value})
    assert engine.translate([])["translations"].shape == (0, 1)


@SMALL_EXPORT
@pytest.mark.parametrize("batch_size", [None, 3])
def test_a_file_of_several_sentences_a_call_gives_the_translators_outputs(
    small_export, tmp_path, monkeypatch, batch_size
):
    """A file whose batch is free (`batch_size=None`) takes each call's sentences in one
    call; one of 3 a call takes them 3 at a time on each interpreter, a short last batch
    padded with empty sources, and only its loop has no shape left open. Both translate and
    score as the translator does, a batch of one too, and rows shared among several
    interpreters as one interpreter does."""
    from keras_transformer.export import litert_runtime

    translator, _ = small_export
    directory = export_litert(translator, tmp_path, max_source_length=8, batch_size=batch_size)
    engine = LiteRTTranslator(directory)  # batches: every usable core, at most 4
    assert engine.num_threads == min(4, len(os.sched_getaffinity(0)))
    signature = (
        engine._interpreters[0].interpreter.get_input_details()[0]["shape_signature"].tolist()
    )
    assert signature == [batch_size or -1, 8] and engine.batch_size == batch_size
    interpreter = engine._interpreters[0].interpreter
    open_shapes = [  # tensors of the search's loops whose shape waits for the batch's
        tensor["name"]
        for graph in range(interpreter._interpreter.NumSubgraphs())
        for tensor in interpreter.get_tensor_details(graph)
        if -1 in tensor["shape_signature"]
    ]
    assert bool(open_shapes) == (batch_size is None), open_shapes[:5]  # a fixed batch: none
    calls = []
    engine.translate_ids = recorded(engine.translate_ids, calls)
    monkeypatch.setattr(litert_runtime, "BATCH_SIZE", 4)  # a free file's sentences a call
    sentences = ["eins", "zweiundzwanzig", "", "dreihundert", "   ", "eins " * 20, "sieben"]
    for given in (sentences, sentences[:1], sentences[2:3], sentences):
        calls.clear()
        ours, theirs = translator.translate(given), engine.translate(given)
        assert theirs.translations.tolist() == ours.translations.tolist(), given
        np.testing.assert_allclose(theirs.scores, ours.scores, rtol=1e-4, atol=1e-5)
        rows = [len(ids) for ids, _ in calls]
        per_call = 4 if batch_size is None else batch_size * len(engine._interpreters)
        expected = [min(per_call, len(given) - start) for start in range(0, len(given), per_call)]
        if batch_size:  # whole batches: a short last one padded
            expected = [-(-n // batch_size) * batch_size for n in expected]
        assert rows == expected, rows
    padded = calls[-1][0][len(sentences) % 3 :]  # the last call's rows past the sentences
    if batch_size:
        np.testing.assert_array_equal(padded, np.tile(engine.source_ids(""), (len(padded), 1)))
    assert engine(sentences) == ours.translations[:, 0].tolist()  # `ours` of `sentences`
    # Rows shared among interpreters of one thread each (3: a free batch's parts of 2, 1, 1
    # and of 1, 1, 1; a fixed batch's 3 batches, one each) give what one interpreter gives.
    one, three = (LiteRTTranslator(directory, num_threads=n) for n in (1, 3))
    assert [len(e._interpreters) for e in (one, three)] == [1, 3]
    alone, shared = one.translate(sentences), three.translate(sentences)
    assert shared.translations.tolist() == alone.translations.tolist() == ours.translations.tolist()
    np.testing.assert_allclose(shared.scores, alone.scores, rtol=1e-6)
    wrong = np.zeros((2, 8), np.int32)
    with pytest.raises(ArgumentError, match=rf"shape \({batch_size or 'B'}, 8\)"):
        engine.translate_ids(np.zeros((0, 8), np.int32) if batch_size is None else wrong)
    with pytest.raises(ValueError, match="batch_size"):
        export_litert(translator, tmp_path / "zero", batch_size=0)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_a_file_with_length_and_repetition_rules_translates_as_the_translator(beam_size, tmp_path):
    """The length and repetition rules (`min_length`, `max_length_a`, `max_length_b`,
    `no_repeat_ngram_size`, the Multi30k recipe's) go into the file with the search and give
    the translator's outputs and scores; the repetition rule holds in LiteRT's built-in ops."""
    rules = dict(no_repeat_ngram_size=2, min_length=2, max_length_a=1.0, max_length_b=6)
    translator = small_translator(beam_size=beam_size, max_source_length=8, **rules)
    engine = LiteRTTranslator(export_litert(translator, tmp_path, max_source_length=8))
    sentences = ["eins", "zweiundzwanzig", "", "dreihundert", "   ", "eins " * 20, "sieben"]
    ours, theirs = translator.translate(sentences), engine.translate(sentences)
    assert theirs.translations.tolist() == ours.translations.tolist()
    np.testing.assert_allclose(theirs.scores, ours.scores, rtol=1e-4, atol=1e-5)
    unruled = small_translator(beam_size=beam_size, max_source_length=8).translate(sentences)
    assert unruled.translations.tolist() != ours.translations.tolist()  # the rules act
