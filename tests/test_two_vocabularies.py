"""Every engine and export of a model whose source and target have their own SentencePiece
models, sentence by sentence against the `Translator` it came from: a trained model with a
vocabulary per side, and an imported OPUS-MT run with its `source.spm` and `target.spm`.

A SavedModel restores each tokenizer's model in a function of its own; TensorFlow shares the
kernel of a stateful node between nodes of one name, so two SentencePiece models whose nodes
were named alike both tokenized with the model restored first (the sources with the target
model, in a fresh process)."""

import importlib.util
import io
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import tiny_translator
from opus_mt import write_hugging_face, write_opus_mt
from serving import fresh_process, serving_request

import keras_transformer as kt
from keras_transformer.cli import main
from keras_transformer.datasets import numbers_corpus
from keras_transformer.export import export_translator
from keras_transformer.inference import translate_lines

pytestmark = pytest.mark.xdist_group("two_vocabularies")

LIMIT = 24  # the sources' limit in pieces, EOS included, on every path (LiteRT's is fixed)
MIXED = [
    "twenty-one",
    "",
    "   ",
    "six hundred and twelve thousand, eight hundred and seventy-four",
    "one " * 2500,  # far over the limit
    "seven hundred and three",
    "\u2603 nine",  # a character never seen in training
]
PREFIXES = ["", "", "", "sechs", "", "sieben", ""]  # one per line of MIXED
PHRASES = [["ein"], [""], [""], ["hundert"], [""], ["drei"], [""]]
GERMAN = numbers_corpus("test", source_lang="de", target_lang="en").sources[:12]


def texts(strings):
    """A flat list of `str` of a tensor or nested list of `bytes` or `str`."""
    flat = np.asarray(strings, dtype=object).reshape(-1)
    return [t.decode("utf-8") if isinstance(t, bytes) else t for t in flat]


def expected_signatures(translator, sentences, prefixes, phrases):
    """What each signature of `translator`'s export must give, from the translator, with
    its requests: the whole batch and a batch of one, an empty sentence alone, and ids."""
    n_best = translator.copy(n_best=translator.beam_size)
    requests, answers = [], []
    for rows in [slice(None), slice(0, 1)]:  # the batch, and a batch of one
        batch = sentences[rows]
        requests += [
            ("serving_default", {"inputs": batch}),
            ("translate_n_best", {"inputs": batch}),
            ("translate_with_prefix", {"inputs": batch, "prefixes": prefixes[rows]}),
            ("translate_constrained", {"inputs": batch, "constraints": phrases[rows]}),
        ]
        best = n_best.translate(batch)
        answers += [
            {"outputs": texts(translator(batch))},
            {"translations": texts(best.translations), "scores": best.scores},
            {"outputs": translator.translate(batch, prefixes[rows]).best},
            {"outputs": texts(translator(batch, constraints=phrases[rows]))},
        ]
    requests.append(("serving_default", {"inputs": sentences[1:2]}))  # an empty line alone
    answers.append({"outputs": texts(translator(sentences[1:2]))})
    source_ids = translator.source_ids(tf.constant(sentences)).numpy()
    requests.append(("translate_ids", {"source_ids": source_ids.tolist()}))
    answers.append({"target_ids": translator.translate_ids(source_ids).numpy()})
    return requests, answers


def assert_same_answers(got, expected, requests):
    for answer, reference, (name, _) in zip(got, expected, requests, strict=True):
        for key, value in reference.items():
            if key == "scores":
                np.testing.assert_allclose(answer[key], value, atol=1e-5, err_msg=name)
            elif key == "target_ids":
                np.testing.assert_array_equal(answer[key], value, err_msg=name)
            else:
                assert texts(answer[key]) == value, name


@pytest.fixture(scope="module")
def translator(tiny_two_vocabularies):
    """Beam 2 without XLA, the search an export traces (an export never needs XLA); one
    for the module's tests, which only read it."""
    return tiny_translator(tiny_two_vocabularies, max_length=40, beam_size=2, jit_compile=False)


@pytest.fixture(scope="module")
def exported(translator, tmp_path_factory):
    base = str(tmp_path_factory.mktemp("saved"))
    return export_translator(translator, "numbers_en_de", base)


def test_the_two_vocabularies_differ(translator):
    source, target = translator.source_tokenizer, translator.target_tokenizer
    assert source.vocab_size != target.vocab_size
    ids = [source.tokenize(s).numpy().tolist() for s in ("twenty-one", "seven hundred")]
    assert ids != [target.tokenize(s).numpy().tolist() for s in ("twenty-one", "seven hundred")]


def test_every_signature_gives_the_translators_outputs_in_a_fresh_process(translator, exported):
    requests, expected = expected_signatures(translator, MIXED, PREFIXES, PHRASES)
    assert expected[0]["outputs"][1] == expected[0]["outputs"][2] == ""
    (served,) = fresh_process([serving_request(exported, requests, sentences=MIXED)])
    assert_same_answers(served["signatures"], expected, requests)
    assert served["session"] == expected[0]["outputs"]  # TF Serving's way

    signatures = tf.saved_model.load(exported).signatures  # and in this process
    got = [
        {k: v.numpy().tolist() for k, v in signatures[name](**inputs).items()}
        for name, inputs in requests
    ]
    assert_same_answers(got, expected, requests)


@pytest.mark.skipif(
    not os.environ.get("TF_2_12_PYTHON"),
    reason="set TF_2_12_PYTHON to a Python with tensorflow==2.12.1 and tensorflow-text==2.12.1",
)
def test_every_signature_translates_alike_in_tensorflow_2_12(translator, exported):
    """TF Serving's latest release links TensorFlow Text 2.12.1: the export loads and runs in
    that release too (`tests/data/list_registered_ops.py` says how to install it)."""
    requests, expected = expected_signatures(translator, MIXED, PREFIXES, PHRASES)
    exports = [serving_request(exported, requests, sentences=MIXED)]
    (served,) = fresh_process(exports, os.environ["TF_2_12_PYTHON"])
    assert_same_answers(served["signatures"], expected, requests)
    assert served["session"] == expected[0]["outputs"]


def test_the_saved_model_cli_translates_as_the_translator_does(
    translator, exported, monkeypatch, capsys
):
    stdin = io.TextIOWrapper(io.BytesIO("".join(s + "\n" for s in MIXED).encode()), "utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    capsys.readouterr()
    assert main(["translate", "--saved-model", exported]) == 0  # one line each, from stdin
    assert capsys.readouterr().out.splitlines() == translate_lines(translator, MIXED)
    assert main(["translate", "--saved-model", exported, "twenty-one"]) == 0  # one sentence
    assert capsys.readouterr().out.splitlines() == translate_lines(translator, MIXED[:1])


@pytest.mark.skipif(importlib.util.find_spec("ai_edge_litert") is None, reason="no LiteRT")
def test_litert_translates_as_the_translator_does(tiny_two_vocabularies, tmp_path):
    from keras_transformer.export import export_litert
    from keras_transformer.export.litert_runtime import LiteRTTranslator

    translator = tiny_translator(
        tiny_two_vocabularies, max_length=40, max_source_length=LIMIT, jit_compile=False
    )
    engine = LiteRTTranslator(export_litert(translator, tmp_path, max_source_length=LIMIT))
    assert engine(MIXED) == translate_lines(translator, MIXED)
    assert engine(MIXED[:1]) == translate_lines(translator, MIXED[:1])
    assert engine.truncated(MIXED) == translator.truncated(MIXED).numpy().tolist()


def test_ctranslate2_translates_as_the_translator_does(tiny_two_vocabularies, tmp_path):
    pytest.importorskip("ctranslate2")
    from keras_transformer.export import CTranslate2Translator, export_ctranslate2

    for beam_size in (1, 2):
        # With one stopping rule (CTranslate2's patience) the two searches end on the
        # same hypotheses; the exact search may find a better one after them.
        translator = tiny_translator(
            tiny_two_vocabularies,
            max_length=40,
            beam_size=beam_size,
            patience=4,
            max_source_length=LIMIT,
            jit_compile=False,
        )
        engine = CTranslate2Translator(export_ctranslate2(translator, tmp_path / str(beam_size)))
        assert engine(MIXED) == translate_lines(translator, MIXED), beam_size
        assert engine(MIXED[:1]) == translate_lines(translator, MIXED[:1]), beam_size


@pytest.fixture(scope="module")
def imported_runs(tmp_path_factory):
    """OPUS-MT runs with a SentencePiece model per side: in Marian's layout with one
    vocabulary (as OPUS-MT's) and with one per side, and in Hugging Face's untied layout
    (`vocab.json` and `target_vocab.json`)."""
    root = tmp_path_factory.mktemp("opus_mt_two_vocabularies")
    made = {
        "marian": write_opus_mt(root / "marian", tying=None, seed=5),
        "marian_two_vocabularies": write_opus_mt(
            root / "two", tying=None, seed=6, separate_vocabularies=True
        ),
        "hugging_face": write_hugging_face(
            write_opus_mt(root / "hf_marian", tying=None), root / "hf"
        ),
    }
    assert os.path.isfile(os.path.join(made["hugging_face"], "target_vocab.json"))
    return {
        name: kt.run.import_marian(directory, root / f"{name}_run").path
        for name, directory in made.items()
    }


def test_each_imported_runs_saved_model_translates_as_its_translator(imported_runs, tmp_path):
    """The export of each layout's imported run gives its translator's translations, loaded
    in a new process and as an engine in this one. Was one test per layout; their three
    exports now load in one new process."""
    sources = GERMAN + ["", "  ", "eins " * 300]
    translators, exports = {}, []
    for layout, run_dir in imported_runs.items():
        translator = kt.run.make_translator(run_dir, beam_size=4, max_length=30, jit_compile=False)
        source, target = translator.source_tokenizer, translator.target_tokenizer
        assert source.model_proto != target.model_proto, layout
        if layout == "marian_two_vocabularies":
            assert source.pieces != target.pieces  # ids mean other pieces on each side
        base_dir = str(tmp_path / layout)
        exported = kt.run.export(run_dir, base_dir=base_dir, beam_size=4, max_length=30)
        translators[layout] = translator, exported
        exports.append(serving_request(exported, [("serving_default", {"inputs": sources})]))
    served = fresh_process(exports)
    for (layout, (translator, exported)), answer in zip(translators.items(), served, strict=True):
        got = answer["signatures"][0]["outputs"]
        assert got == translate_lines(translator, sources), layout
        assert got == translator.translate(sources).best, layout
        engine = kt.run.open_engine(exported)  # the export as an engine, in this process
        assert engine(sources) == got and engine.translate(sources).best == got, layout
        truncated = translator.truncated(sources).numpy().tolist()
        assert engine.truncated(sources).tolist() == truncated, layout
