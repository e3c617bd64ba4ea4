import logging
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import load_tiny_translation, saved_functions, saved_model_ops, tf_serving_ops
from markdown import block_after
from serving import fresh_process, serving_request

import keras_transformer as kt
from keras_transformer.errors import ArgumentError, MissingDependencyError
from keras_transformer.export import export_translator
from keras_transformer.export.saved_model import WARMUP_FILE, write_warmup_requests
from keras_transformer.export.saved_model_runtime import SavedModelTranslator
from keras_transformer.inference import Translator, translations_of

pytestmark = pytest.mark.xdist_group("export")

MIXED = [
    "twenty-one",
    "",
    "   ",
    "six hundred and twelve thousand, eight hundred and seventy-four",
    "one " * 2500,  # 10,000 characters
    b"seven \xff\xfe hundred",  # invalid UTF-8
    "\u2603 zwei",  # characters never seen in training
]


def tiny_translator(tiny_translation, **options):
    model, tokenizer = load_tiny_translation(tiny_translation)
    return Translator(model, tokenizer, tokenizer, max_length=40, beam_size=2, **options)


@pytest.fixture(scope="module")
def translator(tiny_translation):
    """The reference of every export: the translator's search without XLA, which is the
    search an export holds (`test_xla_translates_as_the_search_an_export_holds` checks
    that compiling it changes nothing), so that no test waits for an XLA compilation.
    One for the module's tests, which only read it."""
    return tiny_translator(tiny_translation, jit_compile=False)


@pytest.fixture(scope="module")
def exported(tiny_translation, tmp_path_factory):
    """One export of a translator as a user makes it (with XLA, the default), of
    `translator`'s model and options, read by the tests that only read it (each export
    traces every signature's search: seconds each)."""
    base = tmp_path_factory.mktemp("saved_models")
    return export_translator(tiny_translator(tiny_translation), "numbers_de_en", str(base))


def test_xla_translates_as_the_search_an_export_holds(translator):
    """A `Translator` compiles its search with XLA by default; an export holds the search
    without XLA. Both give the same outputs and scores, in one batch each: strings of any
    kind, n-best lists with prefixes, and constraints."""
    compiled = translator.copy(jit_compile=True)
    assert compiled.jit_compile and not translator.jit_compile
    np.testing.assert_array_equal(
        compiled(tf.constant(MIXED)).numpy(), translator(tf.constant(MIXED)).numpy()
    )
    sentences = ["twenty-one", "", "seven hundred and three", "   "]
    prefixes = ["", "neun", "sieben", ""]
    expected = translator.copy(n_best=2).translate(sentences, prefixes)
    got = compiled.copy(n_best=2).translate(sentences, prefixes)
    assert got.translations.tolist() == expected.translations.tolist()
    np.testing.assert_allclose(got.scores, expected.scores, atol=1e-5)
    phrases = [["eight", ""], ["", ""], ["seven", "hundred"], ["", ""]]
    np.testing.assert_array_equal(
        compiled(sentences, constraints=phrases).numpy(),
        translator(sentences, constraints=phrases).numpy(),
    )


def test_translator_returns_one_string_per_input_of_any_kind(translator):
    outputs = translator(tf.constant(MIXED)).numpy()
    assert outputs.shape == (len(MIXED),) and outputs.dtype == object
    greedy = translator.copy(beam_size=1)
    greedy_outputs = greedy(tf.constant(MIXED)).numpy()
    assert greedy_outputs.shape == (len(MIXED),)
    for empty in (1, 2):  # "" and whitespace
        assert outputs[empty] == greedy_outputs[empty] == b""
    assert greedy(tf.constant([""])).numpy().tolist() == [b""]


def test_translator_rejects_a_tokenizer_larger_than_the_model(translator):
    model = translator.model
    tokenizer = translator.source_tokenizer
    model.target_vocab_size, real = tokenizer.vocab_size - 1, model.target_vocab_size
    try:
        with pytest.raises(ValueError, match=r"target tokenizer does not fit the model"):
            Translator(model, tokenizer, tokenizer)
    finally:
        model.target_vocab_size = real


def test_versions_are_numbered_and_never_overwritten(translator, exported, tmp_path):
    assert exported.endswith(os.path.join("numbers_de_en", "1"))  # the module's export
    base = tmp_path / "saved_models"  # a copy: the other tests read the newest version
    shutil.copytree(os.path.dirname(os.path.dirname(exported)), base)
    second = export_translator(translator, "numbers_de_en", base_dir=base, text=False, warmup=False)
    assert second.endswith(os.path.join("numbers_de_en", "2"))
    with pytest.raises(FileExistsError, match="never overwritten"):
        export_translator(translator, "numbers_de_en", base_dir=base, version=1)
    for name in ("../escape", tmp_path / "de_en", None):  # a path as `name`, not a crash
        with pytest.raises(ValueError, match=r"`name` must be a plain directory name"):
            export_translator(translator, name, base_dir=str(tmp_path))


def test_exports_load_in_a_fresh_process_with_only_tensorflow_and_text(
    translator, exported, tmp_path, monkeypatch, caplog
):
    """A text export loads and translates with only `tensorflow` and `tensorflow_text`
    (and in a TensorFlow 1 session, as TF Serving loads it); a token-id export with only
    `tensorflow`. Also: without `tensorflow-serving-api` (the `serving` extra) the export is
    made with a logged warning and no warm-up requests, and asking for them is an error
    naming the package. Was two tests (`..._with_only_tensorflow_and_text` and
    `test_token_id_export_loads_without_tensorflow_text`), each with new processes of its
    own; both exports now load in one."""
    for module in ("tensorflow_serving", "tensorflow_serving.apis"):
        monkeypatch.setitem(sys.modules, module, None)  # `import` raises ImportError
    with pytest.raises(MissingDependencyError, match="tensorflow-serving-api"):
        write_warmup_requests(str(tmp_path), "numbers_ids", [])
    logger = logging.getLogger("keras_transformer.export.saved_model")
    logger.addHandler(caplog.handler)  # the CLI's tests may have stopped propagation
    try:
        ids_path = export_translator(translator, "numbers_ids", base_dir=str(tmp_path), text=False)
    finally:
        logger.removeHandler(caplog.handler)
    assert "no warm-up requests" in caplog.text
    assert not os.path.exists(os.path.join(ids_path, "assets.extra", WARMUP_FILE))
    monkeypatch.undo()

    texts = [s for s in MIXED if isinstance(s, str)]  # what a TF 1 session is fed here
    source_ids = translator.source_ids(tf.constant(MIXED)).numpy()
    text_requests = [
        ("serving_default", {"inputs": MIXED}),
        ("translate_ids", {"source_ids": [[5, 6, 3]]}),
    ]
    text_export, ids_export = fresh_process(
        [
            serving_request(exported, text_requests, sentences=texts),
            serving_request(
                ids_path, [("serving_default", {"source_ids": source_ids})], text=False
            ),
        ]
    )
    expected = translator(tf.constant(MIXED)).numpy()
    assert [o.encode() for o in text_export["signatures"][0]["outputs"]] == list(expected)
    assert expected[1] == expected[2] == b""  # empty and whitespace-only inputs
    assert np.shape(text_export["signatures"][1]["target_ids"]) == (1, 40)
    assert text_export["session"] == [t.decode() for t in translator(tf.constant(texts)).numpy()]
    np.testing.assert_array_equal(
        ids_export["signatures"][0]["target_ids"], translator.translate_ids(source_ids).numpy()
    )


def test_saved_model_cli_lists_every_signature(translator, exported):
    path = exported
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run(
        [cli, "show", "--dir", path, "--all"], capture_output=True, text=True, timeout=300
    ).stdout
    serving = shown[shown.index("signature_def['serving_default']") :]
    ids = shown[shown.index("signature_def['translate_ids']") :]
    assert re.search(r"inputs\['inputs'\].*?dtype: DT_STRING.*?shape: \(-1\)", serving, re.S)
    assert re.search(r"outputs\['outputs'\].*?dtype: DT_STRING.*?shape: \(-1\)", serving, re.S)
    assert re.search(r"inputs\['source_ids'\].*?dtype: DT_INT32.*?shape: \(-1, -1\)", ids, re.S)
    assert re.search(r"outputs\['target_ids'\].*?dtype: DT_INT32.*?shape: \(-1, 40\)", ids, re.S)
    n_best = shown[shown.index("signature_def['translate_n_best']") :]
    pattern = r"outputs\['translations'\].*?dtype: DT_STRING.*?shape: \(-1, 2\)"
    assert re.search(pattern, n_best, re.S)  # N is the beam size by default
    prefix = shown[shown.index("signature_def['translate_with_prefix']") :]
    assert re.search(r"inputs\['prefixes'\].*?dtype: DT_STRING.*?shape: \(-1\)", prefix, re.S)
    constrained = shown[shown.index("signature_def['translate_constrained']") :]
    pattern = r"inputs\['constraints'\].*?dtype: DT_STRING.*?shape: \(-1, -1\)"
    assert re.search(pattern, constrained, re.S)


def test_n_best_prefix_and_constrained_signatures_translate_as_the_translator_does(
    translator, exported
):
    path = exported  # n_best: the beam size, 2
    loaded = tf.saved_model.load(path)
    n_best = loaded.signatures["translate_n_best"]
    with_prefix = loaded.signatures["translate_with_prefix"]
    sentences = ["twenty-one", "", "seven hundred and three", "   "]
    prefixes = ["", "neun", "sieben", ""]
    expected = translator.copy(n_best=2).translate(sentences)
    model_dir = os.path.dirname(path)  # TF Serving's: the newest version opens
    newest = max(int(name) for name in os.listdir(model_dir) if name.isdigit())
    engine = kt.run.open_engine(model_dir)  # versions of one translator's options
    assert isinstance(engine, SavedModelTranslator)
    assert engine.directory == os.path.join(model_dir, str(newest))
    for rows in [slice(0, 4), slice(0, 1), slice(1, 2)]:  # a batch of one and an empty input
        got = n_best(inputs=tf.constant(sentences[rows]))
        texts = translations_of(got["translations"])
        np.testing.assert_array_equal(texts, expected.translations[rows])
        np.testing.assert_allclose(got["scores"], expected.scores[rows], atol=1e-5)
        as_engine = engine.translate(sentences[rows])
        assert as_engine.translations.tolist() == expected.translations[rows].tolist()
        np.testing.assert_allclose(as_engine.scores, expected.scores[rows], atol=1e-5)
        assert as_engine.truncated.tolist() == expected.truncated[rows].tolist()
        assert engine(sentences[rows]) == translator(sentences[rows]).numpy().astype(str).tolist()
        started = with_prefix(
            inputs=tf.constant(sentences[rows]), prefixes=tf.constant(prefixes[rows])
        )["outputs"].numpy()
        reference = translator.translate(sentences[rows], prefixes[rows])
        assert translations_of(started).tolist() == reference.best
    assert expected.translations[1, 0] == ""
    assert engine.truncated(["eins " * 300, "eins"]).tolist() == [True, False]
    with pytest.raises(ArgumentError, match="does not take `prefixes`"):
        engine.translate(sentences, prefixes=prefixes)
    assert started[0].startswith(b"neun")  # an empty source with a prefix: the prefix alone
    with pytest.raises(tf.errors.InvalidArgumentError, match="Give one prefix per sentence"):
        with_prefix(inputs=tf.constant(sentences), prefixes=tf.constant(prefixes[:2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="more tokens than max_length=40"):
        with_prefix(inputs=tf.constant(["eins"]), prefixes=tf.constant(["one " * 50]))

    constrained = loaded.signatures["translate_constrained"]
    phrases = [["eight", ""], ["", ""], ["seven", "hundred"], ["", ""]]
    expected = translator(sentences, constraints=phrases).numpy()
    for rows in [slice(0, 4), slice(0, 1), slice(1, 2)]:
        got = constrained(
            inputs=tf.constant(sentences[rows]), constraints=tf.constant(phrases[rows])
        )
        np.testing.assert_array_equal(got["outputs"], expected[rows])
    assert b"eight" in expected[0] and expected[1] == b""
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraints of a sentence need"):
        constrained(inputs=tf.constant(["eins"]), constraints=tf.constant([["one " * 50]]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="one row of constraints per sen"):
        constrained(inputs=tf.constant(["eins", "zwei"]), constraints=tf.constant([["one"]]))


def test_documented_grpc_request_fits_the_exported_signature(translator, exported):
    pytest.importorskip("tensorflow_serving")
    path = exported
    namespace = {}
    exec(block_after("docs/guides/serving.md", "gRPC, with"), namespace)
    request = namespace["request"]
    assert request.model_spec.name == os.path.basename(os.path.dirname(path))

    loaded = tf.saved_model.load(path)
    signature = loaded.signatures[request.model_spec.signature_name]
    assert set(request.inputs) == set(signature.structured_input_signature[1])
    feed = {name: tf.constant(tf.make_ndarray(proto)) for name, proto in request.inputs.items()}
    outputs = signature(**feed)
    expected = translator(feed["inputs"]).numpy()
    np.testing.assert_array_equal(outputs["outputs"].numpy(), expected)


def test_the_default_export_needs_no_xla(translator, exported, tmp_path):
    # Stock tensorflow_model_server disables XLA JIT: a function that must be
    # compiled fails on the first request there.
    def must_compile(path):
        functions, _ = saved_functions(path)
        return [f.signature.name for f in functions if f.attr["_XlaMustCompile"].b]

    assert must_compile(exported) == []  # exported from a translator that compiles
    assert must_compile(export_translator(translator, "numbers", str(tmp_path), xla=True))


def test_every_op_of_the_export_is_in_tf_serving_with_tf_text_2_12_1(translator, exported):
    # The latest stock TF Serving links TensorFlow Text 2.12.1; an op it does
    # not register fails the whole model with "Op type not registered".
    used = saved_model_ops(exported)
    assert "SentencepieceTokenizeOp" in used and "SentencepieceDetokenizeOp" in used
    assert used - tf_serving_ops() == set()


def test_bad_ids_and_inputs_of_the_wrong_rank_are_refused(translator, exported):
    loaded = tf.saved_model.load(exported)
    translate_ids = loaded.signatures["translate_ids"]
    vocab = translator.model.input_vocab_size
    for bad in [-5, vocab, 10**6]:
        with pytest.raises(tf.errors.InvalidArgumentError, match="source_ids must be token ids"):
            translate_ids(source_ids=tf.constant([[bad, 3]]))
    # A server feeds tensors unchecked; call the graph as it does, past
    # Python's own check of the signature.
    serve = loaded.signatures["serving_default"]
    for bad in [tf.constant("einundzwanzig"), tf.constant([["eins", "zwei"]])]:
        with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible with expected"):
            serve._call_flat([bad], serve.captured_inputs)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not compatible with expected"):
        translate_ids._call_flat([tf.constant([5, 6, 3])], translate_ids.captured_inputs)


def test_warmup_requests_cover_every_source_bucket_and_run(translator, exported):
    from tensorflow_serving.apis import prediction_log_pb2

    path = exported
    loaded = tf.saved_model.load(path)
    records = tf.data.TFRecordDataset(os.path.join(path, "assets.extra", WARMUP_FILE))
    lengths = []
    for record in records:
        request = prediction_log_pb2.PredictionLog.FromString(record.numpy()).predict_log.request
        assert request.model_spec.name == "numbers_de_en"
        inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
        outputs = loaded.signatures[request.model_spec.signature_name](**inputs)
        assert all(o.shape[0] == 1 for o in outputs.values())
        if "source_ids" in inputs:
            lengths.append(inputs["source_ids"].shape[1])
    assert lengths == [8, 16, 32, 64, 128, 256]  # up to max_source_length, 256


def test_an_export_killed_midway_leaves_no_version_behind(translator, tmp_path, monkeypatch):
    """An export is written under a `.partial-` name and renamed into its version when
    complete, so a kill at any moment before the rename (SIGKILL, a lost machine) leaves no
    version a server would load; a partial left by a killed export takes no version number.
    Was a test that killed an exporting process after `tf.saved_model.save`: the directory
    just before the rename is what that kill left, at the latest moment one can."""
    model_dir = tmp_path / "numbers"
    left_by_a_kill = model_dir / ".partial-1-abc123"
    left_by_a_kill.mkdir(parents=True)
    (left_by_a_kill / "saved_model.pb").write_bytes(b"cut short")
    before_rename = []
    rename = os.rename

    def observed_rename(source, destination):
        if os.path.dirname(str(destination)) == str(model_dir):
            before_rename.append((sorted(os.listdir(model_dir)), sorted(os.listdir(source))))
        rename(source, destination)

    monkeypatch.setattr(os, "rename", observed_rename)
    assert export_translator(translator, "numbers", str(tmp_path)).endswith(os.sep + "1")
    ((entries, written),) = before_rename
    assert all(name.startswith(".partial-") for name in entries) and len(entries) == 2
    assert {"saved_model.pb", "variables", "assets.extra"} <= set(written)  # complete
    assert sorted(os.listdir(model_dir)) == sorted(["1", left_by_a_kill.name])
