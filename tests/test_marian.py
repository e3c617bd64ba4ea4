"""OPUS-MT (Marian) models imported as run directories, against Marian's math in NumPy and
CTranslate2's own Marian converter, from Marian's layout and from Hugging Face's.

The package's translators here decode without XLA, so that no test waits for a compilation
per batch shape; `test_export` checks that XLA gives the same outputs."""

import csv
import gzip
import importlib.util
import json
import os
import shutil
import zipfile

import numpy as np
import pytest
import sacrebleu
import safetensors.numpy
import sentencepiece
import tensorflow as tf
import yaml
from opus_mt import AWKWARD_PIECES, marian_log_probs, write_hugging_face, write_opus_mt

import keras_transformer as kt
from keras_transformer.cli import main
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError, DamagedFileError
from keras_transformer.importers import read_marian
from keras_transformer.layers.positions import Learned, Sinusoidal
from keras_transformer.run.opus_mt import import_marian
from keras_transformer.text.marian_tokenizer import read_vocabulary

ctranslate2 = pytest.importorskip("ctranslate2")
from ctranslate2.converters import OpusMTConverter  # noqa: E402
from ctranslate2.converters.marian import load_vocab  # noqa: E402

CONFIGURATIONS = {
    "post_norm_relu_tied": dict(),
    "pre_norm_swish_untied": dict(pre_norm=True, activation="swish", tying=None),
    "post_norm_gelu_output_tied": dict(activation="gelu", tying="output"),
}
SOURCES = numbers_corpus("test", source_lang="de", target_lang="en").sources[:24] + ["", "  "]
# Hugging Face's layout: (its Marian directory's configuration, write_hugging_face's
# arguments, the activation of the NumPy reference: Hugging Face's "gelu" is the exact one)
HUGGING_FACE = {
    "tied_float16": (dict(), dict(float16=True), "relu"),
    "output_tied_gelu": (dict(tying="output"), dict(activation="gelu", positions=0), "exact_gelu"),
    "untied_swish": (dict(activation="swish", tying=None), dict(), "swish"),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Per configuration: (the OPUS-MT directory, its imported run directory)."""
    root = tmp_path_factory.mktemp("opus_mt")
    made = {}
    for name, options in CONFIGURATIONS.items():
        model_dir = write_opus_mt(root / name, **options)
        made[name] = model_dir, import_marian(model_dir, root / f"{name}_run").path
    return made


@pytest.fixture(scope="module")
def hugging_face(tmp_path_factory):
    """Per configuration: (its Marian directory, its copy in Hugging Face's layout)."""
    root = tmp_path_factory.mktemp("hugging_face")
    made = {}
    for name, (options, layout, _) in HUGGING_FACE.items():
        model_dir = write_opus_mt(root / name, seed=3, **options)
        made[name] = model_dir, write_hugging_face(model_dir, root / f"{name}_hf", **layout)
    return made


def pieces_of(translator, sentences):
    """The best output of `translator` per sentence, as target pieces before EOS."""
    ids = translator.search(translator.source_ids(tf.constant(sentences))).token_ids[:, 0]
    pieces, eos = translator.target_tokenizer.pieces, translator.target_tokenizer.eos_id
    rows = []
    for row in ids.numpy().tolist():
        row = row[: row.index(eos)] if eos in row else row
        rows.append([pieces[i] for i in row if i != translator.target_tokenizer.pad_id])
    return rows


def import_with_cli(model_dir, run_dir):
    """`keras-transformer import --format marian` of `model_dir` into `run_dir`: its exit code."""
    return main(
        ["import", "--format", "marian", "--model-dir", str(model_dir), "--run-dir", str(run_dir)]
    )


def test_a_marian_vocabulary_reads_as_ctranslate2_reads_it(imported, tmp_path):
    model_dir, _ = imported["post_norm_relu_tied"]
    path = os.path.join(model_dir, "opus.vocab.yml")
    pieces = read_vocabulary(path)
    assert pieces == load_vocab(path)
    assert pieces[:2] == ["</s>", "<unk>"] and set(AWKWARD_PIECES) <= set(pieces)
    text = open(path, encoding="utf-8").read()
    assert '"\\"": ' in text and "? " in text and "'yes'" in text or '"yes"' in text
    for damage, message in [
        ("just a piece\n", "line 1 is not `piece: id`"),
        ("a: 0\nb: 0\n", "id 0 is given twice"),
        ("a: 0\nb: 2\n", r"not 0 to 1 \(missing \[1\]\)"),
    ]:
        bad = tmp_path / "bad.yml"
        bad.write_text(damage, encoding="utf-8")
        with pytest.raises(DamagedFileError, match=message):
            read_vocabulary(bad)


def assert_marians_probabilities(run_dir, options, weights, pairs=6, **reference):
    """The imported run's log-probabilities of the first `pairs` validation pairs equal
    `marian_log_probs` of `options` and `weights` (with `reference`'s epsilon and
    activation) to 2e-5, and padding and the start piece get none; returns them, in
    the package's ids, as (source ids, target ids, log-probabilities of each target id
    then EOS)."""
    _, model, source, target = kt.run.load_run(run_dir)
    corpus = numbers_corpus("val", source_lang="de", target_lang="en", limit=pairs)
    scored = []
    for sentence, translation in zip(corpus.sources, corpus.targets, strict=True):
        source_ids = source.tokenize(tf.constant([sentence]))[0].numpy().tolist()
        target_ids = target.tokenize(tf.constant([translation]))[0].numpy().tolist()
        expected = marian_log_probs(
            options,
            weights,
            np.array([i - 1 for i in source_ids] + [0]),  # the package numbers from 1
            np.array([i - 1 for i in target_ids]),
            **reference,
        )  # (T + 1, V)
        logits = model(
            (np.array([source_ids + [source.eos_id]]), np.array([[target.bos_id] + target_ids]))
        )
        log_probs = tf.nn.log_softmax(logits)[0].numpy()  # (T + 1, V + 2)
        np.testing.assert_allclose(log_probs[:, 1:-1], expected, atol=2e-5)
        assert np.exp(log_probs[:, [0, -1]]).max() < 1e-30  # padding and the start piece
        picked = log_probs[np.arange(len(target_ids) + 1), target_ids + [target.eos_id]]
        scored.append((source_ids, target_ids, picked))
    return scored


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_an_imported_model_gives_marians_probabilities(imported, name):
    model_dir, run_dir = imported[name]
    marian = read_marian(model_dir)
    assert_marians_probabilities(run_dir, marian.options, marian.weights)


def test_a_sentencepiece_vocabulary_numbers_pieces_by_the_models_own_ids(tmp_path, capsys):
    """`vocabs: [opus.spm, opus.spm]`: Marian numbers a piece by the SentencePiece model's
    id, so the imported run's ids are SentencePiece's own (plus one) and its
    log-probabilities are Marian's NumPy forward pass's; a damaged `.spm` vocabulary and a
    kind the importer does not read are refused in one line."""
    model_dir = write_opus_mt(tmp_path / "m", spm_vocabulary=True)
    run_dir = import_marian(model_dir, tmp_path / "run").path
    marian = read_marian(model_dir)
    processor = sentencepiece.SentencePieceProcessor(model_file=str(model_dir / "opus.spm"))
    assert marian.vocabularies[0][:2] == ["</s>", "<unk>"]
    _, _, source, target = kt.run.load_run(run_dir)
    corpus = numbers_corpus("val", source_lang="de", target_lang="en", limit=20)
    for tokenizer, texts in [(source, corpus.sources), (target, corpus.targets)]:
        ids = tokenizer.tokenize(tf.constant(texts)).to_list()
        assert [[i - 1 for i in row] for row in ids] == processor.encode(list(texts))
    assert_marians_probabilities(run_dir, marian.options, marian.weights, pairs=4)

    def renamed(copy):
        os.rename(copy / "opus.spm", copy / "opus.json")
        text = (copy / "decoder.yml").read_text().replace("opus.spm", "opus.json")
        (copy / "decoder.yml").write_text(text)

    assert "opus.spm is not a SentencePiece model" in refusal_of_import(
        model_dir, truncated("opus.spm"), tmp_path, capsys
    )
    assert "a `.json` or factored `.fsv` vocabulary" in refusal_of_import(
        model_dir, renamed, tmp_path, capsys
    )


def test_a_multi_target_model_writes_the_language_it_is_given(tmp_path, capsys):
    """A vocabulary with `>>por<<` and `>>spa<<`: the import names the languages; every
    engine puts the token given first, and greedy search then finds CTranslate2's pieces
    for the conversion given the same token, with a batch of one too; without a language,
    or with one the model does not write, the run is refused with the list."""
    model_dir = write_opus_mt(tmp_path / "m", languages=("por", "spa"))
    run_dir = tmp_path / "run"
    assert import_with_cli(model_dir, run_dir) == 0
    assert "target languages (--target-language): por, spa" in capsys.readouterr().out
    with pytest.raises(ValueError, match="needs a target language .*: one of por, spa"):
        kt.run.make_translator(str(run_dir), jit_compile=False)
    with pytest.raises(
        ValueError, match="'deu' is not a language of this model; it writes por, spa"
    ):
        kt.run.make_translator(str(run_dir), target_language="deu", jit_compile=False)
    OpusMTConverter(str(model_dir)).convert(str(tmp_path / "ct2"))
    reference = ctranslate2.Translator(str(tmp_path / "ct2"))
    source_spm = kt.text.load_tokenizer(os.path.join(run_dir, "tokenizers", "source"))
    ids = source_spm.tokenize(tf.constant(SOURCES)).to_list()
    lines = SOURCES[:6] + ["", "  "]
    outputs = {}
    for language in ("por", ">>spa<<"):
        token = language if language.startswith(">>") else f">>{language}<<"
        translator = kt.run.make_translator(
            str(run_dir), beam_size=1, target_language=language, jit_compile=False
        )
        theirs = reference.translate_batch(
            [[token] + [source_spm.pieces[i] for i in row] for row in ids],
            beam_size=1,
            max_decoding_length=translator.max_length,
            min_decoding_length=0,
        )
        assert translator.source_ids(tf.constant(["acht"])).numpy()[
            0, 0
        ] == source_spm.pieces.index(token)
        outputs[token] = pieces_of(translator, SOURCES)
        # The last two sources are empty: their translation is empty, as without a prefix.
        assert outputs[token][-2:] == [[], []]
        assert outputs[token][:-2] == [result.hypotheses[0] for result in theirs[:-2]], language
        assert pieces_of(translator, SOURCES[:1]) == outputs[token][:1]
        expected = kt.inference.translate_lines(translator, lines)
        assert expected[-2:] == ["", ""]
        args = ["translate", "--run-dir", str(run_dir), "--beam-size", "1"]
        assert main([*args, "--target-language", language, *lines]) == 0
        assert capsys.readouterr().out.splitlines() == expected
    assert outputs[">>por<<"] != outputs[">>spa<<"]

    assert main(["translate", "--run-dir", str(run_dir), *lines]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "one of por, spa" in error
    assert main(["export", "--run-dir", str(run_dir), "--base-dir", str(tmp_path / "no")]) == 2
    assert "one of por, spa" in capsys.readouterr().err and not (tmp_path / "no").exists()
    options = dict(beam_size=1, target_language="spa")
    translator = kt.run.make_translator(str(run_dir), jit_compile=False, **options)
    expected = kt.inference.translate_lines(translator, lines)
    exported = kt.run.export(str(run_dir), base_dir=str(tmp_path / "saved"), **options)
    served = tf.saved_model.load(exported).signatures["serving_default"](inputs=tf.constant(lines))
    assert [t.decode() for t in served["outputs"].numpy()] == expected
    ct2_dir = kt.run.export_ctranslate2_run(str(run_dir), tmp_path / "ct2_export", **options)
    assert kt.export.CTranslate2Translator(ct2_dir)(lines) == expected
    if importlib.util.find_spec("ai_edge_litert") is not None:
        from keras_transformer.export.litert_runtime import LiteRTTranslator

        litert_dir = kt.run.export_litert_run(str(run_dir), tmp_path / "litert", **options)
        assert LiteRTTranslator(litert_dir)(lines) == expected


def test_trained_positions_import_as_a_learned_table(tmp_path):
    """Marian's `Wpos` (--transformer-train-position-embeddings) added at positions 0, 1, ...
    of each stack, the decoder's zero start at 0: the NumPy forward pass, and CTranslate2's
    own conversion of the directory scoring every token as the import does. (That
    conversion's translate_batch disagrees with its own score_batch on such a model, so its
    searches are no referee here.)"""
    model_dir = write_opus_mt(
        tmp_path / "m", pre_norm=True, activation="swish", tying=None, trained_positions=40
    )
    run_dir = import_marian(model_dir, tmp_path / "run").path
    config = json.load(open(os.path.join(run_dir, "config.json")))["model"]
    assert (config["positions"], config["max_positions"]) == ("learned", 40)
    marian = read_marian(model_dir)
    scored = assert_marians_probabilities(run_dir, marian.options, marian.weights, pairs=4)
    OpusMTConverter(str(model_dir)).convert(str(tmp_path / "ct2"))
    reference = ctranslate2.Translator(str(tmp_path / "ct2"))
    _, _, source, target = kt.run.load_run(run_dir)
    for source_ids, target_ids, ours in scored:
        pieces = [source.pieces[i] for i in source_ids]
        result = reference.score_batch([pieces], [[target.pieces[i] for i in target_ids]])[0]
        np.testing.assert_allclose(result.log_probs, ours, atol=1e-4)


@pytest.mark.parametrize("name", HUGGING_FACE)
def test_a_hugging_face_copy_gives_the_probabilities_of_its_network(hugging_face, name, tmp_path):
    """Hugging Face's network is Marian's with layer norms that add 1e-5 (and, where its
    config says so, the exact GELU); float16 files give the float16 weights."""
    model_dir, hf_dir = hugging_face[name]
    _, layout, activation = HUGGING_FACE[name]
    marian = read_marian(model_dir)
    dtype = "float16" if layout.get("float16") else "float32"
    weights = {k: v.astype(dtype).astype("float32") for k, v in marian.weights.items()}
    run_dir = import_marian(hf_dir, tmp_path / "run").path
    assert_marians_probabilities(
        run_dir, marian.options, weights, pairs=4, epsilon=1e-5, activation=activation
    )


# An OPUS-MT model with only Hugging Face's TensorFlow weights, saved by transformers' own
# TFMarianMTModel, and the logits transformers gives it (`tests/data/write_tf_marian.py`).
TF_COPY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "opus_mt_tf_h5")


def test_a_tensorflow_copy_imports_and_gives_the_logits_transformers_gives(tmp_path, capsys):
    """`tf_model.h5` alone (no safetensors, no PyTorch): the imported run's log-probabilities
    of every Marian piece are those of transformers' `TFMarianMTModel` on the same ids; a
    damaged file is refused in one line."""
    assert not os.path.exists(os.path.join(TF_COPY, "model.safetensors"))
    run_dir = import_marian(TF_COPY, tmp_path / "run").path
    _, model, _, target = kt.run.load_run(run_dir)
    reference = np.load(os.path.join(TF_COPY, "transformers_logits.npz"))
    source_ids = reference["source_ids"] + 1  # the package numbers Marian's pieces from 1
    decoder_ids = reference["decoder_ids"] + 1
    decoder_ids[:, 0] = target.bos_id  # where Hugging Face's decoder starts from "<pad>"
    ours = tf.nn.log_softmax(model((source_ids, decoder_ids))).numpy()[..., 1:-1]
    theirs = tf.nn.log_softmax(reference["logits"][..., :-1]).numpy()  # without "<pad>"
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=1e-4)

    def cut(copy):
        path = copy / "tf_model.h5"
        path.write_bytes(path.read_bytes()[:5000])

    error = refusal_of_import(TF_COPY, cut, tmp_path, capsys)
    assert "tf_model.h5 is damaged or not an HDF5 file" in error


def test_a_hugging_face_copy_imports_and_translates_from_the_command_line(
    hugging_face, tmp_path, capsys
):
    _, hf_dir = hugging_face["untied_swish"]
    run_dir = tmp_path / "run"
    args = ["import", "--format", "marian", "--model-dir", str(hf_dir), "--run-dir", str(run_dir)]
    assert main(args) == 0
    assert json.load(open(run_dir / "imported.json"))["format"] == "hugging-face"
    lines = SOURCES[:3] + ["", "  "]
    expected = kt.inference.translate_lines(
        kt.run.make_translator(str(run_dir), jit_compile=False), lines
    )
    capsys.readouterr()
    assert main(["translate", "--run-dir", str(run_dir), *lines]) == 0
    assert capsys.readouterr().out.splitlines() == expected
    assert expected[3:] == ["", ""]


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_imported_searches_find_what_ctranslate2s_marian_conversion_finds(imported, name, tmp_path):
    """An imported run decodes as its `decoder.yml` says Marian decodes it (beam 4,
    log P / |Y| ** 0.6, a sentence done once 4 hypotheses have ended): CTranslate2's
    conversion with that beam and length penalty finds the same pieces for every
    sentence, outputs cut at the length limit too (a limit of 1 cuts every output that does
    not end at once, whatever the random weights make of the rest). So does greedy search.
    The package's exact beam search (no patience) finds the same or an output CTranslate2's
    own score ranks higher. (CTranslate2 allows EOS from the first step with
    `min_decoding_length=0`, as the package and Marian do.)"""
    model_dir, run_dir = imported[name]
    decode = json.load(open(os.path.join(run_dir, "config.json")))["decode"]
    assert decode | {"max_length": 0} == kt.config.default_config()["decode"] | {
        "max_length": 0,
        "beam_size": 4,
        "alpha": 0.6,
        "length_penalty": "average",
        "patience": 1.0,
    }
    OpusMTConverter(str(model_dir)).convert(str(tmp_path / "ct2"))
    reference = ctranslate2.Translator(str(tmp_path / "ct2"))
    source_spm = kt.text.load_tokenizer(os.path.join(run_dir, "tokenizers", "source"))
    ids = source_spm.tokenize(tf.constant(SOURCES)).to_list()
    source_pieces = [[source_spm.pieces[i] for i in row] for row in ids]

    def ctranslate2s(beam, max_length):
        results = reference.translate_batch(
            source_pieces,
            beam_size=beam,
            length_penalty=0.6 if beam > 1 else 0.0,
            max_decoding_length=max_length,
            min_decoding_length=0,
            return_scores=True,
        )
        return [r.hypotheses[0] for r in results], [r.scores[0] for r in results]

    cut = 0
    for beam, max_length in [(1, 30), (4, 30), (4, 8), (4, 1)]:
        theirs, _ = ctranslate2s(beam, max_length)
        translator = kt.run.make_translator(
            run_dir, beam_size=beam, max_length=max_length, jit_compile=False
        )
        assert pieces_of(translator, SOURCES) == theirs, (beam, max_length)
        cut += sum(len(pieces) == max_length for pieces in theirs)
    assert cut >= 2  # outputs that end at the limit, without EOS

    theirs, their_scores = ctranslate2s(4, 30)
    exact = kt.run.make_translator(run_dir, max_length=30, patience=100, jit_compile=False)
    ours = pieces_of(exact, SOURCES)
    for i in [i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b]:
        log_probs = reference.score_batch([source_pieces[i]], [ours[i]])[0].log_probs
        ended = len(ours[i]) < 30  # score_batch adds EOS's log P last: not an output's cut there
        score = sum(log_probs[: len(log_probs) - (not ended)]) / (len(ours[i]) + ended) ** 0.6
        assert score > their_scores[i], (SOURCES[i], ours[i], theirs[i])


def test_an_imported_run_fine_tunes_exports_and_translates(imported, tmp_path, capsys):
    model_dir, _ = imported["post_norm_relu_tied"]
    run_dir = tmp_path / "run"
    assert import_with_cli(model_dir, run_dir) == 0
    data = tmp_path / "data"
    data.mkdir()
    for split, size in (("train", 400), ("val", 60)):
        corpus = numbers_corpus(split, source_lang="de", target_lang="en", limit=size)
        (data / f"{split}.de").write_text("\n".join(corpus.sources) + "\n", encoding="utf-8")
        (data / f"{split}.en").write_text("\n".join(corpus.targets) + "\n", encoding="utf-8")
    before = _val_loss(run_dir)
    # Imported, the run has no data of its own: evaluate says so, and scores files given;
    # what evaluate writes into the run does not keep train from fine-tuning it below.
    assert main(["evaluate", "--run-dir", str(run_dir)]) == 2
    assert "data.corpus is null" in capsys.readouterr().err
    val = numbers_corpus("val", source_lang="de", target_lang="en", limit=60)
    with gzip.open(data / "held.de.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(val.sources) + "\n")
    own = ["--source", str(data / "held.de.gz"), "--reference", str(data / "val.en")]
    mismatched = ["--source", str(data / "val.de"), "--reference", str(data / "train.en")]
    assert main(["evaluate", "--run-dir", str(run_dir), *mismatched]) == 2
    assert "has 60 lines and" in capsys.readouterr().err
    assert main(["evaluate", "--run-dir", str(run_dir), "--beam-size", "1", *own]) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    greedy = kt.run.make_translator(str(run_dir), beam_size=1, jit_compile=False)
    with open(result["hypotheses"], encoding="utf-8") as f:
        hypotheses = f.read().splitlines()
    assert hypotheses == kt.inference.translate_lines(greedy, val.sources)
    bleu = sacrebleu.corpus_bleu(hypotheses, [val.targets]).score
    assert (result["sentences"], result["bleu"]) == (60, round(bleu, 2))
    assert result["hypotheses"].endswith("held.de.best.beam1.hyp.txt")
    args = ["train", "--run-dir", str(run_dir)]
    for setting in [
        "data.corpus=files",
        f"data.directory={data}",
        "data.tokens_per_batch=512",
        "train.epochs=2",
        "train.warmup_steps=20",
    ]:
        args += ["--set", setting]
    assert main(args) == 0
    config = json.load(open(run_dir / "config.json"))
    assert config["model"]["start_from_zero_embedding"] and config["data"]["corpus"] == "files"
    with open(run_dir / "metrics.csv", encoding="utf-8") as f:
        losses = [float(row["loss"]) for row in csv.DictReader(f)]
    after = _val_loss(run_dir)
    assert after < before and losses[-1] < losses[0], (before, after, losses)

    fine_tuned = ["evaluate", "--run-dir", str(run_dir), "--beam-size", "1"]
    assert main([*fine_tuned, "--split", "val"]) == 0  # the corpus it was fine-tuned on
    by_split = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert main([*fine_tuned, "--data-dir", str(data), "--split", "val"]) == 0
    by_directory = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert by_split["sentences"] == by_directory["sentences"] == 60
    assert by_split["bleu"] == by_directory["bleu"]

    translator = kt.run.make_translator(str(run_dir), beam_size=2, jit_compile=False)
    expected = kt.inference.translate_lines(translator, SOURCES[:6] + [""])
    capsys.readouterr()
    args = ["translate", "--run-dir", str(run_dir), "--beam-size", "2"]
    assert main(args + SOURCES[:2]) == 0
    assert capsys.readouterr().out.splitlines() == expected[:2]
    exported = kt.run.export(str(run_dir), base_dir=str(tmp_path / "saved"), beam_size=2)
    loaded = tf.saved_model.load(exported)
    served = loaded.signatures["serving_default"](inputs=tf.constant(SOURCES[:6] + [""]))
    texts = [t.decode() for t in served["outputs"].numpy()]
    assert texts == expected
    if importlib.util.find_spec("ai_edge_litert") is not None:
        from keras_transformer.export.litert_runtime import LiteRTTranslator

        litert_dir = kt.run.export_litert_run(str(run_dir), tmp_path / "litert", beam_size=2)
        assert LiteRTTranslator(litert_dir)(SOURCES[:6] + [""]) == expected
    ct2_dir = kt.run.export_ctranslate2_run(
        str(run_dir), tmp_path / "ct2", beam_size=1, max_length=20
    )
    greedy = kt.run.make_translator(str(run_dir), beam_size=1, max_length=20, jit_compile=False)
    engine = kt.export.CTranslate2Translator(ct2_dir)
    assert engine(SOURCES) == kt.inference.translate_lines(greedy, SOURCES)


@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_an_imported_run_exports_back_to_the_marian_directory_it_came_from(
    imported, name, tmp_path, capsys
):
    """`export --format marian` of an imported run writes what the OPUS-MT directory it
    came from holds: every array equal (so import(export(run)) is the same network), the
    vocabulary, the SentencePiece models, the architecture's options and the search of
    `decoder.yml`. CTranslate2's OpusMTConverter of the export finds the package's
    beam-4 pieces for every sentence, empty ones included."""
    model_dir, run_dir = imported[name]
    out = tmp_path / "marian"
    args = ["export", "--format", "marian", "--run-dir", str(run_dir), "--output", str(out)]
    assert main(args) == 0
    assert f"exported: {out}" in capsys.readouterr().out
    original, exported = read_marian(model_dir), read_marian(out)
    assert sorted(exported.weights) == sorted(original.weights)
    for key, value in original.weights.items():
        value = value.astype("float32")
        np.testing.assert_array_equal(exported.weights[key].reshape(value.shape), value, key)
    assert exported.vocabularies == original.vocabularies
    assert exported.sentencepiece == original.sentencepiece
    assert exported.decoding == original.decoding == read_marian(model_dir).decoding
    assert exported.options == exported.options | {
        key: value
        for key, value in original.options.items()
        if key.startswith(("dim-emb", "enc-", "dec-", "transformer-", "tied-"))
        and key != "transformer-dropout"
    }

    OpusMTConverter(str(out)).convert(str(tmp_path / "ct2"))
    source = kt.text.load_tokenizer(os.path.join(run_dir, "tokenizers", "source"))
    pieces = [[source.pieces[i] for i in row] for row in source.tokenize(SOURCES).to_list()]
    results = ctranslate2.Translator(str(tmp_path / "ct2")).translate_batch(
        pieces, beam_size=4, length_penalty=0.6, max_decoding_length=30, min_decoding_length=0
    )
    translator = kt.run.make_translator(run_dir, max_length=30, jit_compile=False)
    assert pieces_of(translator, SOURCES) == [r.hypotheses[0] for r in results]


@pytest.mark.parametrize("name", ["post_norm_relu_tied", "post_norm_gelu_output_tied"])
def test_an_imported_run_exports_to_hugging_faces_layout_as_its_conversion_writes_it(
    imported, name, tmp_path, capsys
):
    """`export --format hugging_face` of an imported run writes the tensors, vocabulary and
    configuration that `write_hugging_face` (Hugging Face's conversion of the same Marian
    directory) writes, but for the name of Marian's GELU, which the conversion calls
    "gelu" (the exact one) and the export "quick_gelu" (x * sigmoid(1.702 x), Marian's).
    Imported back, the run gives the probabilities of Marian's network with Hugging
    Face's layer norms (1e-5), and decodes with the run's beam and length penalty."""
    model_dir, run_dir = imported[name]
    out = tmp_path / "hf"
    args = ["export", "--format", "hugging_face", "--run-dir", str(run_dir), "--output", str(out)]
    assert main(args) == 0
    assert f"exported: {out}" in capsys.readouterr().out
    reference = write_hugging_face(model_dir, tmp_path / "reference", positions=512)
    ours = safetensors.numpy.load_file(str(out / "model.safetensors"))
    theirs = safetensors.numpy.load_file(str(reference / "model.safetensors"))
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        np.testing.assert_allclose(ours[key], value.reshape(ours[key].shape), atol=1e-5)
    config = json.load(open(out / "config.json", encoding="utf-8"))
    their_config = json.load(open(reference / "config.json", encoding="utf-8"))
    gelu = their_config.pop("activation_function") == "gelu"
    assert config.pop("activation_function") == ("quick_gelu" if gelu else "relu")
    assert config == config | their_config
    for file_name in ("vocab.json", "source.spm", "target.spm"):
        assert (out / file_name).read_bytes() == (reference / file_name).read_bytes() or (
            json.loads((out / file_name).read_text("utf-8"))
            == json.loads((reference / file_name).read_text("utf-8"))
        )
    generation = json.load(open(out / "generation_config.json", encoding="utf-8"))
    assert (generation["num_beams"], generation["length_penalty"]) == (4, 0.6)

    back = import_marian(out, tmp_path / "back").path
    decode = json.load(open(os.path.join(back, "config.json")))["decode"]
    assert (decode["beam_size"], decode["alpha"], decode["length_penalty"]) == (4, 0.6, "average")
    marian = read_marian(model_dir)
    assert_marians_probabilities(back, marian.options, marian.weights, pairs=4, epsilon=1e-5)


def randomized(model, seed):
    """`model` with every weight drawn anew, so that no two layer norms or biases agree;
    a learned position table is one for both stacks, as Marian's is."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    if isinstance(model.positions, Learned):
        table = model.encoder.embedding.position_encoding.embeddings
        model.decoder.embedding.position_encoding.embeddings.assign(table)
    return model


@pytest.fixture(scope="module")
def numbers_tokenizers():
    """SentencePiece tokenizers of the package (padding 0, UNK 1, BOS 2, EOS 3), one a side."""
    corpus = numbers_corpus("train", source_lang="de", target_lang="en", limit=400)
    return (
        kt.text.SentencePieceTokenizer.train(corpus.sources, vocab_size=60),
        kt.text.SentencePieceTokenizer.train(corpus.targets, vocab_size=50),
    )


def marian_ready_model(source, target, **options):
    """A randomized model of the tokenizers' sizes that Marian can express, or, with
    `options`, one that differs as they say."""
    settings = dict(
        positions=Sinusoidal(layout="concatenated"),
        start_from_zero_embedding=True,
        activation="silu",
    )
    model = kt.Transformer(
        (2, 1), 16, 2, 32, source.vocab_size, target.vocab_size, **(settings | options)
    )
    one = np.ones((1, 2), "int32")
    model((one, one))
    return randomized(model, seed=5)


# Per layout: models Marian's or Hugging Face's layout can express, and the files written.
MARIAN_FILES = ["decoder.yml", "model.npz", "source.spm", "source.vocab.yml"]
MARIAN_FILES += ["target.spm", "target.vocab.yml"]
HUGGING_FACE_FILES = ["config.json", "generation_config.json", "model.safetensors"]
HUGGING_FACE_FILES += ["source.spm", "target.spm", "target_vocab.json"]
HUGGING_FACE_FILES += ["tokenizer_config.json", "vocab.json"]
ROUND_TRIPS = {
    "marian_pre_norm_sinusoidal": ("marian", dict(norm_first=True)),
    "marian_output_tied_learned": (
        "marian",
        dict(shared_embeddings="output", positions=Learned(100), activation="gelu_sigmoid"),
    ),
    "hugging_face_untied": ("hugging_face", dict(layer_norm_epsilon=1e-5)),
    "hugging_face_output_tied_gelu_sigmoid": (
        "hugging_face",
        dict(shared_embeddings="output", activation="gelu_sigmoid", layer_norm_epsilon=1e-5),
    ),
}


@pytest.mark.parametrize("name", ROUND_TRIPS)
def test_a_model_of_the_packages_tokenizers_exports_and_imports_to_the_same_logits(
    numbers_tokenizers, name, tmp_path
):
    """A model with the package's SentencePiece tokenizers (a vocabulary per side, of two
    sizes, EOS and UNK not where Marian numbers them) goes to Marian's or Hugging Face's
    layout and back: the imported tokenizers cut every sentence into the same pieces,
    and the imported model's logits are the original's, column for column by piece."""
    layout, options = ROUND_TRIPS[name]
    source, target = numbers_tokenizers
    model = marian_ready_model(source, target, **options)
    translator = kt.Translator(model, source, target, jit_compile=False)
    out = tmp_path / layout
    if layout == "marian":
        kt.export.export_marian(translator, out)
        assert sorted(os.listdir(out)) == MARIAN_FILES
        for side, tokenizer in (("source", source), ("target", target)):
            pieces = read_vocabulary(out / f"{side}.vocab.yml")
            assert pieces == load_vocab(str(out / f"{side}.vocab.yml"))
            assert pieces[:2] == ["</s>", "<unk>"] and len(pieces) == tokenizer.vocab_size - 2
    else:
        kt.export.export_hugging_face(translator, out)
        assert sorted(os.listdir(out)) == HUGGING_FACE_FILES
        size = max(source.vocab_size, target.vocab_size) - 2  # Marian's pieces, then fillers
        for file_name in ("vocab.json", "target_vocab.json"):
            vocabulary = json.load(open(out / file_name, encoding="utf-8"))
            assert vocabulary["</s>"] == 0 and vocabulary["<unk>"] == 1
            assert vocabulary["<pad>"] == size == len(vocabulary) - 1
    run_dir = import_marian(out, tmp_path / "run").path
    _, back, source_back, target_back = kt.run.load_run(run_dir)

    corpus = numbers_corpus("val", source_lang="de", target_lang="en", limit=4)
    batches = []
    for (s, t), texts in zip(
        ((source, target), (source_back, target_back)),
        [(corpus.sources, corpus.targets)] * 2,
        strict=True,
    ):
        source_ids, target_ids = s.tokenize(texts[0]), t.tokenize(texts[1])
        assert [[s.pieces[i] for i in row] for row in source_ids.to_list()] == [
            [source.pieces[i] for i in row] for row in source.tokenize(texts[0]).to_list()
        ]
        eos = tf.fill([len(texts[0]), 1], s.eos_id)
        bos = tf.fill([len(texts[1]), 1], t.bos_id)
        batches.append(
            (
                tf.concat([source_ids, eos], 1).to_tensor(),  # (batch, source length)
                tf.concat([bos, target_ids], 1).to_tensor(),  # (batch, target length)
            )
        )
    logits, logits_back = model(batches[0]).numpy(), back(batches[1]).numpy()
    real = batches[0][1].numpy() != source.pad_id  # (batch, target length): not padding
    logits, logits_back = logits[real], logits_back[real]  # (tokens, vocabulary)
    by_piece = {piece: i for i, piece in enumerate(target.pieces)}
    kept = [i for i, piece in enumerate(target_back.pieces[1:-1], 1) if piece in by_piece]
    columns = [by_piece[target_back.pieces[i]] for i in kept]
    assert len(kept) == target.vocab_size - 2  # all but padding and BOS
    np.testing.assert_allclose(logits_back[:, kept], logits[:, columns], atol=1e-4)
    fillers = sorted(set(range(1, len(target_back.pieces) - 1)) - set(kept))
    assert len(fillers) == (source.vocab_size - target.vocab_size if layout != "marian" else 0)
    assert (logits_back[:, fillers] < -1e3).all()  # pieces no text spells: no probability


def test_export_to_marian_refuses_what_marian_cannot_express_in_one_line(
    numbers_tokenizers, imported, tmp_path, capsys
):
    source, target = numbers_tokenizers
    refusals = [
        (dict(start_from_zero_embedding=False), "learned start embedding \\(Marian's"),
        (dict(positions="rotary"), "positions=Rotary"),
        (
            dict(positions=Sinusoidal()),
            "positions=Sinusoidal.*Marian's table is Sinusoidal\\(layout='concatenated'\\)",
        ),
        (dict(activation="gelu"), "activation='gelu'"),
    ]
    for options, message in refusals:
        translator = kt.Translator(
            marian_ready_model(source, target, **options), source, target, jit_compile=False
        )
        with pytest.raises(ArgumentError, match=f"Marian cannot express this model's {message}"):
            kt.export.export_marian(translator, tmp_path / "refused")
    model = marian_ready_model(source, target, positions=Learned(100))
    model.decoder.embedding.position_encoding.embeddings.assign(np.zeros((100, 16), "float32"))
    with pytest.raises(ArgumentError, match="two learned position tables"):
        kt.export.export_marian(kt.Translator(model, source, target), tmp_path / "refused")
    wordpiece = kt.text.WordPieceTokenizer.train(["eins zwei drei"] * 20, vocab_size=60)
    translator = kt.Translator(marian_ready_model(wordpiece, target), wordpiece, target)
    with pytest.raises(ArgumentError, match="the source tokenizer is a WordPieceTokenizer"):
        kt.export.export_marian(translator, tmp_path / "refused")
    for options, message in [
        (dict(norm_first=True), "norm_first"),
        (dict(positions=Learned(100)), "learned positions"),
    ]:
        translator = kt.Translator(marian_ready_model(source, target, **options), source, target)
        with pytest.raises(
            ArgumentError, match=f"Hugging Face's Marian cannot express .*{message}"
        ):
            kt.export.export_hugging_face(translator, tmp_path / "refused")
    assert os.listdir(tmp_path) == []  # nothing half-written, no staging directory

    _, run_dir = imported["post_norm_relu_tied"]
    (tmp_path / "taken").mkdir()
    for extra, message in [
        (["--format", "marian", "--quantization", "int8"], "--quantization, --n-best and"),
        (["--format", "hugging_face", "--n-best", "2"], "are not for --format hugging_face"),
        (["--format", "marian", "--output", str(tmp_path / "taken")], "exists; choose a new"),
    ]:
        args = ["export", "--run-dir", str(run_dir), *extra]
        assert main(args) == 2
        error = capsys.readouterr().err.strip()
        assert message in error and "\n" not in error, error


def refusal_of_import(model_dir, change, tmp_path, capsys):
    """The one line `import` prints for a copy of `model_dir` that `change` damaged,
    checking that it exits with 2 and writes no run directory."""
    copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
    shutil.copytree(model_dir, copy)
    change(copy)
    args = ["import", "--format", "marian", "--model-dir", str(copy)]
    code = main([*args, "--run-dir", str(copy / "run")])
    error = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in error, error
    assert not (copy / "run").exists()
    return error


def truncated(name):
    """A change that cuts the file `name` of a model directory to its first 5,000 bytes."""

    def change(copy):
        (copy / name).write_bytes((copy / name).read_bytes()[:5000])

    return change


def _val_loss(run_dir):
    """Mean -log P per target token of the validation pairs, EOS included."""
    corpus = numbers_corpus("val", source_lang="de", target_lang="en", limit=60)
    scored = kt.run.score_pairs(str(run_dir), corpus.sources, corpus.targets)
    return -sum(s["log_prob"] for s in scored) / sum(s["tokens"] for s in scored)


def test_import_refuses_what_it_cannot_import_in_one_line(imported, tmp_path, capsys):
    model_dir, _ = imported["post_norm_relu_tied"]

    def damaged(change):
        return refusal_of_import(model_dir, change, tmp_path, capsys)

    def with_options(**changes):
        def change(copy):
            path = copy / "opus.model.npz"
            with np.load(path) as archive:
                weights = {k: archive[k] for k in archive.files}
            options = yaml.safe_load(weights["special:model.yml"].tobytes().rstrip(b"\0"))
            options.update(changes)
            weights["special:model.yml"] = np.frombuffer(
                yaml.safe_dump(options).encode() + b"\0", dtype=np.int8
            )
            np.savez(path, **weights)

        return change

    def extra_piece(copy):
        with open(copy / "opus.vocab.yml", "a", encoding="utf-8") as f:
            f.write(f"extra: {len(read_vocabulary(copy / 'opus.vocab.yml'))}\n")

    assert "opus.model.npz is damaged" in damaged(truncated("opus.model.npz"))
    assert "opus.vocab.yml is missing" in damaged(lambda c: os.remove(c / "opus.vocab.yml"))
    assert "'Wemb' has shape" in damaged(extra_piece)
    assert "--transformer-ffn-activation selu" in damaged(
        with_options(**{"transformer-ffn-activation": "selu"})
    )
    assert "--transformer-postprocess-emb nd" in damaged(
        with_options(**{"transformer-postprocess-emb": "nd"})
    )
    assert "--type s2s" in damaged(with_options(type="s2s"))
    assert zipfile.is_zipfile(model_dir / "opus.model.npz")


def test_import_of_hugging_face_files_refuses_what_it_cannot_read_in_one_line(
    hugging_face, tmp_path, capsys
):
    _, hf_dir = hugging_face["tied_float16"]

    def damaged(change):
        return refusal_of_import(hf_dir, change, tmp_path, capsys)

    def as_pytorch_file(copy):
        os.rename(copy / "model.safetensors", copy / "pytorch_model.bin")

    def with_config(**changes):
        def change(copy):
            config = json.load(open(copy / "config.json"))
            json.dump({**config, **changes}, open(copy / "config.json", "w"))

        return change

    def learned_positions(copy):
        tensors = safetensors.numpy.load_file(copy / "model.safetensors")
        tensors["model.decoder.embed_positions.weight"] += np.float16(0.5)
        safetensors.numpy.save_file(tensors, copy / "model.safetensors")

    assert "model.safetensors is damaged" in damaged(truncated("model.safetensors"))
    assert "pytorch_model.bin, which only PyTorch reads" in damaged(as_pytorch_file)
    assert "vocab.json is missing" in damaged(lambda c: os.remove(c / "vocab.json"))
    assert "activation_function 'gelu_new'" in damaged(with_config(activation_function="gelu_new"))
    assert "decoder.embed_positions is not Marian's sinusoidal table" in damaged(learned_positions)
    assert "neither decoder.yml" in damaged(lambda c: os.remove(c / "config.json"))
