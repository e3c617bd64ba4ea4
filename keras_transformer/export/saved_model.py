"""Writing a `Translator` as a SavedModel in TF Serving's layout."""

import logging
import os
import re
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from keras_transformer.errors import ArgumentError, MissingDependencyError
from keras_transformer.export.options import write_options
from keras_transformer.export.saved_model_layout import (
    CONSTRAINED_SIGNATURE,
    EXTRA_DIR,
    IDS_SIGNATURE,
    N_BEST_SIGNATURE,
    OPTIONS_FILE,
    PREFIX_SIGNATURE,
    SERVING_SIGNATURE,
    TRUNCATED_FUNCTION,
    WARMUP_FILE,
)
from keras_transformer.inference.translator import Translator
from keras_transformer.validation import check_positive_int

SAVED_MODELS_DIR = "saved_models"
"""The default parent directory of exported models."""


def next_version(model_dir):
    """1 + the largest integer version directory in `model_dir` (1 if none)."""
    if not os.path.isdir(model_dir):
        return 1
    versions = [int(d) for d in os.listdir(model_dir) if re.fullmatch(r"\d+", d)]
    return max(versions, default=0) + 1


def export_translator(
    translator: Translator,
    name: str,
    base_dir: str = SAVED_MODELS_DIR,
    version: int | None = None,
    text: bool = True,
    xla: bool = False,
    warmup: bool | None = None,
    n_best: int | None = None,
) -> str:
    """Saves `translator` to `{base_dir}/{name}/{version}/`, ready for TF Serving.

    The SavedModel has these signatures:

    - `serving_default`: `inputs` tf.string `(None,)` -> `outputs` tf.string
      `(None,)`; tokenizers run in the graph, so the server needs the
      TensorFlow Text ops (`import tensorflow_text` in Python; in TF Serving
      they are linked in, from the TF-Text release the server was built
      with, and this export uses only ops that TF-Text 2.12.1 has).
    - `translate_ids`: `source_ids` int32 `(None, None)`, 0-padded and ending
      in EOS -> `target_ids` int32 `(None, max_length)`, 0 after EOS. Ids
      outside the source vocabulary are an `InvalidArgumentError`.
    - `translate_n_best`: `inputs` tf.string `(None,)` -> `translations`
      tf.string `(None, N)` and `scores` float32 `(None, N)`, best first
      (`Translator.translate` with `n_best=N`).
    - `translate_with_prefix`: `inputs` and `prefixes`, tf.string `(None,)`
      each -> `outputs` tf.string `(None,)`: each translation starts with its
      prefix (an empty one leaves the sentence free). A prefix over
      `max_length` tokens, or a number of prefixes other than of inputs, is
      an `InvalidArgumentError`.
    - `translate_constrained`: `inputs` tf.string `(None,)` and `constraints`
      tf.string `(None, C)`, empty strings for none -> `outputs` tf.string
      `(None,)`: each translation contains its row's phrases
      (`inference.constraints`). Phrases that cannot fit in `max_length`
      tokens with EOS are an `InvalidArgumentError`.

    Beside them, `assets.extra/keras_transformer.json` holds the decoding
    options and a `truncated` function (not a signature) says which sources
    are cut: `export.SavedModelTranslator` opens the export as an engine.

    The model's variables and the tokenizers' models are saved with it; the
    SavedModel loads with `tf.saved_model.load` and needs neither Keras nor
    this package. By default nothing in it needs XLA: stock
    `tensorflow_model_server` disables XLA JIT compilation unless started
    with `--xla_cpu_compilation_enabled=true`, and a function that must be
    compiled fails on its first request there. `xla=True` keeps the
    XLA-compiled search, faster on a CPU, for servers started with
    that flag.

    The version is written into a temporary directory beside its final
    place and renamed into place when complete, so a server polling
    `{base_dir}/{name}/` never loads a half-written version. With warm-up
    requests, `assets.extra/tf_serving_warmup_requests` holds requests that TF Serving
    replays when it loads the version, one for each source-length bucket,
    so that a user's first request is not the slow one.

    For servers without the TensorFlow Text ops export with `text=False`:
    the SavedModel then holds the model alone, and its `serving_default` is
    the token-id signature (there are no string signatures then).

    Every decoding option (beam size, length penalty, the length and
    repetition options) is the translator's, fixed at export.

    Args:
        translator: a `keras_transformer.inference.Translator`.
        name: the model's name, the directory TF Serving's `--model_name` serves.
        base_dir: TF Serving's `--model_base_path` parent. Defaults to
            "saved_models".
        version: integer version; defaults to one more than the largest there.
        text: whether to include the tokenizers and the string signature.
        xla: whether to compile the search with XLA.
        warmup: whether to write TF Serving warm-up requests, which need the
            `tensorflow-serving-api` package (the `serving` extra). None
            writes them when it is installed, and logs a warning when not.
        n_best: N of `translate_n_best`; defaults to the translator's beam
            size (its `n_best` when it samples).

    Returns:
        The path of the written version directory.

    Raises:
        FileExistsError: if `version` is given and its directory exists;
            versions are never overwritten.
        ValueError: if `name` is not a plain directory name (a path, such as a
            `pathlib.Path`, included) or `version` is not a positive integer.

    Examples:
        ```python
        path = export_translator(translator, "de_en")  # saved_models/de_en/1
        ```
    """
    if (
        not isinstance(name, str)
        or not re.fullmatch(r"[A-Za-z0-9_.-]+", name)
        or name in (".", "..")
    ):
        raise ArgumentError(
            "`name` must be a plain directory name (a string of letters, digits, _ . -); "
            "`base_dir` is the directory it goes in. "
            f"Received: name={name!r}"
        )
    model_dir = os.path.join(base_dir, name)
    if version is None:
        version = next_version(model_dir)
    check_positive_int("version", version)
    path = os.path.join(model_dir, str(version))
    if os.path.exists(path):
        raise FileExistsError(
            f"{path} exists; export versions are never overwritten. "
            "Choose another version or leave `version` unset for the next one."
        )
    translator = translator.copy(jit_compile=xla)

    # The saved object holds the model's variables and the tokenizers, not the Keras model
    # (Keras would add a signature of its own) nor the functions: each signature is traced
    # once, here, and stored once; a function attached to the object would be traced again
    # inside `tf.saved_model.save` and stored twice, doubling the time to save and to load.
    # TF Serving (C++'s `LoadSavedModel`, and TensorFlow 1's loader) restores variables
    # through the MetaGraph's saver, which finds a Keras 3 variable only by the
    # `tf.Variable` that backs it: tracking the Keras variables themselves loads in
    # `tf.saved_model.load` but fails in a server with "Could not find variable".
    root = tf.Module()
    root.model_variables = [variable.value for variable in translator.model.variables]

    @tf.function(
        input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")], autograph=False
    )
    def serve_ids(source_ids):
        return {"target_ids": translator.translate_ids(source_ids)}

    signatures = {IDS_SIGNATURE: serve_ids.get_concrete_function()}
    if text:
        root.source_tokenizer = translator.source_tokenizer
        root.target_tokenizer = translator.target_tokenizer
        strings = tf.TensorSpec([None], tf.string, name="inputs")
        truncated = tf.function(translator.truncated, input_signature=[strings], autograph=False)
        setattr(root, TRUNCATED_FUNCTION, truncated)  # for SavedModelTranslator, not a signature

        @tf.function(input_signature=[strings], autograph=False)
        def serve(inputs):
            return {"outputs": translator(inputs)}

        signatures[SERVING_SIGNATURE] = serve.get_concrete_function()
        for signature, function in string_signatures(translator, n_best).items():
            signatures[signature] = function.get_concrete_function()
    else:
        signatures[SERVING_SIGNATURE] = signatures[IDS_SIGNATURE]
    os.makedirs(model_dir, exist_ok=True)
    partial = tempfile.mkdtemp(prefix=f".partial-{version}-", dir=model_dir)
    try:
        tf.saved_model.save(root, partial, signatures=signatures)
        if writes_warmup(warmup):
            write_warmup_requests(partial, name, warmup_requests(translator, text))
        if text:
            os.makedirs(os.path.join(partial, EXTRA_DIR), exist_ok=True)
            options = {**translator.options.to_dict(), "n_best": n_best_of(translator, n_best)}
            write_options(os.path.join(partial, EXTRA_DIR), OPTIONS_FILE, options)
        os.chmod(partial, 0o755)  # mkdtemp makes it private; a server may run as another user
        os.rename(partial, path)  # atomic: a version is complete or absent
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return path


def n_best_of(translator, n_best=None):
    """N of the `translate_n_best` signature: `n_best`, or else the translator's beam size
    (its `n_best` when it samples)."""
    if n_best is None:
        n_best = translator.n_best if translator.sample else translator.beam_size
    check_positive_int("n_best", n_best)
    return n_best


def string_signatures(translator, n_best=None):
    """`{signature name: tf.function}` of `translator`'s signatures beyond
    `serving_default`: n-best lists, prefixes and constraints."""
    several = translator.copy(n_best=n_best_of(translator, n_best))
    strings = tf.TensorSpec([None], tf.string, name="inputs")

    @tf.function(input_signature=[strings], autograph=False)
    def serve_n_best(inputs):
        inputs = tf.ensure_shape(inputs, [None], name="inputs_must_be_a_vector")
        result = several.translate_tensors(inputs)
        return {"translations": result["translations"], "scores": result["scores"]}

    @tf.function(
        input_signature=[strings, tf.TensorSpec([None], tf.string, name="prefixes")],
        autograph=False,
    )
    def serve_with_prefix(inputs, prefixes):
        inputs = tf.ensure_shape(inputs, [None], name="inputs_must_be_a_vector")
        prefixes = tf.ensure_shape(prefixes, [None], name="prefixes_must_be_a_vector")
        return {"outputs": translator.translate_tensors(inputs, prefixes)["translations"][:, 0]}

    @tf.function(
        input_signature=[strings, tf.TensorSpec([None, None], tf.string, "constraints")],
        autograph=False,
    )
    def serve_constrained(inputs, constraints):
        inputs = tf.ensure_shape(inputs, [None], name="inputs_must_be_a_vector")
        result = translator.translate_tensors(inputs, constraints=constraints)
        return {"outputs": result["translations"][:, 0]}

    return {
        N_BEST_SIGNATURE: serve_n_best,
        PREFIX_SIGNATURE: serve_with_prefix,
        CONSTRAINED_SIGNATURE: serve_constrained,
    }


def warmup_requests(translator, text):
    """`(signature_name, {input name: array})` pairs: one source of each length bucket.

    The sources repeat the lowest id that is no special piece 7, 15, 31, ...
    times, then EOS, up to `max_source_length` tokens; the strings are
    their detokenized text.
    """
    special = set(translator.source_tokenizer.special_ids.values())
    eos, piece = translator.source_tokenizer.eos_id, min(set(range(len(special) + 1)) - special)
    requests = []
    length = 8
    while length // 2 < translator.max_source_length:
        ids = np.array([[piece] * (min(length, translator.max_source_length) - 1) + [eos]])
        requests.append((IDS_SIGNATURE, {"source_ids": ids.astype("int32")}))
        if text:
            sentence = translator.source_tokenizer.detokenize(ids[:, :-1]).numpy()
            requests.append((SERVING_SIGNATURE, {"inputs": sentence}))
            requests.append((N_BEST_SIGNATURE, {"inputs": sentence}))
            requests.append((PREFIX_SIGNATURE, {"inputs": sentence, "prefixes": np.array([b""])}))
            requests.append(
                (CONSTRAINED_SIGNATURE, {"inputs": sentence, "constraints": np.array([[b""]])})
            )
        length *= 2
    return requests


def serving_apis():
    """TF Serving's request protocol buffers (`tensorflow_serving.apis`), or a
    `MissingDependencyError` that says how to install them."""
    try:
        from tensorflow_serving import apis
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2  # noqa: F401
    except ImportError as error:
        raise MissingDependencyError(
            "TF Serving's warm-up requests need the `tensorflow-serving-api` package: "
            'pip install "keras-transformer-nmt[serving]", or export with warmup=False.'
        ) from error
    return apis


def writes_warmup(warmup):
    """Whether an export writes warm-up requests: `warmup` when it is given, else whether
    `tensorflow-serving-api` is installed (logging a warning when it is not)."""
    if warmup is not None:
        return bool(warmup)
    try:
        serving_apis()
    except MissingDependencyError as error:
        logging.getLogger(__name__).warning("%s The export has no warm-up requests.", error)
        return False
    return True


def write_warmup_requests(version_dir, name, requests):
    """Writes `assets.extra/tf_serving_warmup_requests`, TF Serving's PredictionLog records."""
    apis = serving_apis()
    model_pb2, predict_pb2 = apis.model_pb2, apis.predict_pb2
    prediction_log_pb2 = apis.prediction_log_pb2
    directory = os.path.join(version_dir, EXTRA_DIR)
    os.makedirs(directory, exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(directory, WARMUP_FILE)) as writer:
        for signature, inputs in requests:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=name, signature_name=signature)
            )
            for key, value in inputs.items():
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value))
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())
