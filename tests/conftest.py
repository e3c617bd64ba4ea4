import gc
import os
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# Several pytest-xdist processes share the machine's cores: each process's TensorFlow, and the
# commands it starts, compute an op on one thread, instead of every process spreading each op
# over all the cores and their threads waiting on each other.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")

import keras  # noqa: E402
import main_job_runner  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from made_once import made_once  # noqa: E402

import keras_transformer  # noqa: E402, F401

# What the imports made lives as long as the process: Python's full collections leave it out
# instead of walking it again every time.
gc.collect()
gc.freeze()


@pytest.fixture(autouse=True)
def fresh_keras_state():
    """Every test starts from float32, a fixed seed and a clear session. The session is
    cleared without a full garbage collection of its own (`free_memory=False`): Python's
    collector frees what a test left when enough of it has piled up, where a collection
    after every test walked every living object each time."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A run directory written by keras_transformer 0.1.0, and what it translated then.
RUN_0_1_0 = os.path.join(REPO, "tests", "data", "run_0_1_0")


@pytest.fixture
def run_0_1_0(tmp_path):
    """A copy of `RUN_0_1_0`, so that nothing is written into the repository."""
    import shutil

    copy = tmp_path / "run_0_1_0"
    shutil.copytree(RUN_0_1_0, copy)
    return copy


@pytest.fixture(scope="session")
def multi30k_path():
    """The Multi30k directory ($MULTI30K_DIR, or ../shared/data/multi30k), or None."""
    path = os.environ.get("MULTI30K_DIR", os.path.join(REPO, "..", "shared", "data", "multi30k"))
    return os.path.abspath(path) if os.path.isfile(os.path.join(path, "train.en.gz")) else None


@pytest.fixture(scope="session")
def multi30k_dir(multi30k_path):
    """The Multi30k directory; tests that need it are skipped without it."""
    if multi30k_path is None:
        pytest.skip("Multi30k not found; set MULTI30K_DIR")
    return multi30k_path


def train_tiny_translation(directory, shared=True):
    """Trains a small English-to-German numbers model briefly and saves it in `directory`.

    With `shared`, one SentencePiece vocabulary serves both sides (`tokenizer/`);
    otherwise each side has its own, trained on its own language and of another
    size (`source_tokenizer/`, 100 pieces, and `target_tokenizer/`, 120), so that
    an id read with the wrong side's model is a different piece.
    """
    import keras_transformer as kt
    from keras_transformer.datasets import numbers_corpus
    from keras_transformer.text import SentencePieceTokenizer, make_batches

    keras.utils.set_random_seed(0)
    corpus = numbers_corpus("train", limit=3000)
    if shared:
        source = target = SentencePieceTokenizer.train(
            corpus.sources + corpus.targets, vocab_size=120
        )
    else:
        source = SentencePieceTokenizer.train(corpus.sources, vocab_size=100)
        target = SentencePieceTokenizer.train(corpus.targets, vocab_size=120)
    batches = make_batches(corpus, source, target, tokens_per_batch=2048, seed=0)
    model = kt.Transformer(2, 64, 4, 128, source.vocab_size, target.vocab_size)
    model.compile(
        optimizer=kt.transformer_optimizer(64, warmup_steps=200),
        loss=kt.MaskedSparseCategoricalCrossentropy(),
    )
    model.fit(batches.dataset, epochs=5, verbose=0, shuffle=False)  # the pipeline shuffles
    model.save(directory / "model.keras")
    if shared:
        source.save(str(directory / "tokenizer"))
    else:
        source.save(str(directory / "source_tokenizer"))
        target.save(str(directory / "target_tokenizer"))
    keras.backend.clear_session()
    return directory


@pytest.fixture(scope="session")
def tiny_translation(tmp_path_factory):
    """A small English-to-German numbers model with one shared vocabulary, trained briefly.

    Returns the directory holding `model.keras` and `tokenizer/`. A test that
    changes what it loads loads its own copy (`load_tiny_translation`); a module
    whose tests only read the model, or a translator of it, loads one in a
    module-scoped fixture (a translator outlives the session that each test
    clears).
    """
    return made_once(tmp_path_factory, "tiny_translation", train_tiny_translation)


@pytest.fixture(scope="session")
def tiny_two_vocabularies(tmp_path_factory):
    """The `tiny_translation` model trained with a vocabulary for each side (see
    `train_tiny_translation`); `tiny_translator` loads it."""

    def train(directory):
        train_tiny_translation(directory, shared=False)

    return made_once(tmp_path_factory, "tiny_two_vocabularies", train)


def load_tiny_translation(directory):
    """`(model, tokenizer)` from the `tiny_translation` directory."""
    from keras_transformer.text import load_tokenizer

    model = keras.models.load_model(directory / "model.keras")
    return model, load_tokenizer(str(directory / "tokenizer"))


def tiny_translator(directory, **options):
    """A `Translator` of a `train_tiny_translation` directory of either layout."""
    import keras_transformer as kt
    from keras_transformer.text import load_tokenizer

    model = keras.models.load_model(directory / "model.keras")
    if (directory / "tokenizer").is_dir():
        source = target = load_tokenizer(str(directory / "tokenizer"))
    else:
        source = load_tokenizer(str(directory / "source_tokenizer"))
        target = load_tokenizer(str(directory / "target_tokenizer"))
    return kt.Translator(model, source, target, **options)


def renumbered(model, tokenizer, swaps):
    """`(model, tokenizer, permutation)`: the same model and SentencePiece vocabulary with
    the ids of each pair in `swaps` exchanged (in the pieces, the special ids, and the
    rows of every embedding and output weight); `permutation[old id]` is the new id."""
    from sentencepiece import sentencepiece_model_pb2

    from keras_transformer.text import SentencePieceTokenizer

    vocab = tokenizer.vocab_size
    permutation = np.arange(vocab)
    for a, b in swaps:
        permutation[[a, b]] = permutation[[b, a]]
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(tokenizer.model_proto)
    pieces = [sentencepiece_model_pb2.ModelProto.SentencePiece() for _ in range(vocab)]
    for old, new in enumerate(permutation):
        pieces[new].CopyFrom(proto.pieces[old])
    del proto.pieces[:]
    proto.pieces.extend(pieces)
    spec = proto.trainer_spec
    spec.unk_id, spec.bos_id, spec.eos_id = (
        int(permutation[i]) for i in (spec.unk_id, spec.bos_id, spec.eos_id)
    )
    renumbered_tokenizer = SentencePieceTokenizer(proto.SerializeToString())
    inverse = np.argsort(permutation)  # new id -> old id
    copy = model.__class__.from_config(model.get_config())
    ids = np.full((1, 4), 4, "int32")
    copy((ids, ids))  # builds the weights, in the original's order
    weights = []
    for value in model.get_weights():
        for axis in [axis for axis, size in enumerate(value.shape) if size == vocab]:
            value = np.take(value, inverse, axis=axis)
        weights.append(value)
    copy.set_weights(weights)
    return copy, renumbered_tokenizer, permutation


def reads_main_job(item):
    """Whether a test reads the README main job's run (its `main_job` fixture, or the
    `main_job` mark of a test that asks for the fixture while it runs)."""
    return "main_job" in getattr(item, "fixturenames", ()) or bool(
        item.get_closest_marker("main_job")
    )


def pytest_collection_modifyitems(config, items):
    """The tests that read the README main job's run go last, and the main job starts
    in the background as soon as they are collected: the other tests run while it
    trains, instead of a process waiting for it. Its directory is made once
    (`made_once`), by whichever process starts first; the `main_job` fixture waits
    for it."""
    items.sort(key=reads_main_job)  # stable: each part keeps its order
    if not items or not reads_main_job(items[-1]) or config.option.collectonly:
        return
    factory = config._tmp_path_factory  # the `tmp_path_factory` fixture's, made at start-up
    threading.Thread(target=make_main_job, args=(factory,), daemon=True).start()


def make_main_job(tmp_path_factory):
    """Makes the README main job's directory, once per test run; a failure is left to
    the `main_job` fixture to report (`made_once` records it)."""
    try:
        made_once(tmp_path_factory, "main_job", main_job_runner.main)
    except Exception:
        pass


@pytest.fixture(scope="session")
def main_job(tmp_path_factory):
    """The README's main job, run once per test run: `(directory, [train, evaluate,
    export, translate])`.

    The directory holds `runs/numbers_de_en` and `saved_models/numbers_de_en/1`, which
    tests read and never change; the outputs are the commands' `CompletedProcess`es.
    """
    directory = made_once(tmp_path_factory, "main_job", main_job_runner.main)
    outputs = main_job_runner.outputs(directory)
    assert [o.args.split()[1] for o in outputs] == ["train", "evaluate", "export", "translate"]
    return directory, outputs


def saved_functions(path):
    """Every function of a SavedModel's graphs, as `FunctionDef`s, and the graphs' own nodes."""
    from tensorflow.core.protobuf import saved_model_pb2

    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved = saved_model_pb2.SavedModel.FromString(f.read())
    graphs = [meta.graph_def for meta in saved.meta_graphs]
    functions = [f for graph in graphs for f in graph.library.function]
    nodes = [n for graph in graphs for n in graph.node]
    return functions, nodes


def saved_model_ops(path):
    """The op types a SavedModel runs, but calls of its own functions."""
    functions, nodes = saved_functions(path)
    used = {n.op for n in nodes} | {n.op for f in functions for n in f.node_def}
    return used - {f.signature.name for f in functions}


def tf_serving_ops():
    """The ops the latest stock TF Serving registers: TensorFlow's and TensorFlow Text's
    2.12.1 (an op it lacks fails the whole model with "Op type not registered")."""
    allowed = set()
    for name in ["tensorflow_2.12.1_ops.txt", "tensorflow_text_2.12.1_ops.txt"]:
        with open(os.path.join(REPO, "tests", "data", name)) as f:
            allowed |= set(f.read().split())
    return allowed


def randomize_position_tables(model, seed=0):
    """Gives a built model's learned position tables (if it has any) N(0, 1) rows, as large
    as its scaled token embeddings, so that a row read at the wrong position changes the
    outputs."""
    rng = np.random.default_rng(seed)
    for stack in (model.encoder, model.decoder):
        if stack.embedding.positions.name != "learned":
            continue
        table = stack.embedding.position_encoding.embeddings  # (max_positions, D)
        table.assign(rng.normal(size=table.shape).astype("float32"))
