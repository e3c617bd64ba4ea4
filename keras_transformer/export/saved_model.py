"""Writing a `Translator` as a SavedModel in TF Serving's layout."""

import os
import re

import tensorflow as tf

from keras_transformer.validation import check_positive_int

SERVING_SIGNATURE = "serving_default"
IDS_SIGNATURE = "translate_ids"


def next_version(model_dir):
    """1 + the largest integer version directory in `model_dir` (1 if none)."""
    if not os.path.isdir(model_dir):
        return 1
    versions = [int(d) for d in os.listdir(model_dir) if re.fullmatch(r"\d+", d)]
    return max(versions, default=0) + 1


def export_translator(translator, name, base_dir="saved_models", version=None, text=True):
    """Saves `translator` to `{base_dir}/{name}/{version}/`, ready for TF Serving.

    The SavedModel has two signatures:

    - `serving_default`: `inputs` tf.string `(None,)` -> `outputs` tf.string
      `(None,)`; tokenizers run in the graph, so the server needs the
      TensorFlow Text ops (`import tensorflow_text` in Python, or a TF Serving
      build that links them).
    - `translate_ids`: `source_ids` int32 `(None, None)`, 0-padded and ending
      in EOS -> `target_ids` int32 `(None, max_length)`, 0 after EOS.

    The model's variables and the tokenizers' models are saved with it; the
    SavedModel loads with `tf.saved_model.load` and needs neither Keras nor
    this package.

    A SavedModel that holds the tokenizers cannot be loaded at all where the
    TensorFlow Text ops are missing. For such servers export with
    `text=False`: the SavedModel then holds the model alone, and its
    `serving_default` is the token-id signature.

    Args:
        translator: a `keras_transformer.inference.Translator`.
        name: the model's name, the directory TF Serving's `--model_name` serves.
        base_dir: TF Serving's `--model_base_path` parent. Defaults to
            "saved_models".
        version: integer version; defaults to one more than the largest there.
        text: whether to include the tokenizers and the string signature.

    Returns:
        The path of the written version directory.

    Raises:
        FileExistsError: if `version` is given and its directory exists;
            versions are never overwritten.
        ValueError: if `name` is not a plain directory name or `version` is
            not a positive integer.

    Example:
    ```python
    path = export_translator(translator, "de_en")  # saved_models/de_en/1
    ```
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name or "") or name in (".", ".."):
        raise ValueError(
            "`name` must be a plain directory name (letters, digits, _ . -). "
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

    # The Keras model is not an attribute of the saved object, only its
    # variables: Keras would otherwise add a signature of its own.
    root = tf.Module()
    root.model_variables = list(translator.model.variables)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")])
    def serve_ids(source_ids):
        return {"target_ids": translator.translate_ids(source_ids)}

    root.serve_ids = serve_ids
    signatures = {IDS_SIGNATURE: serve_ids.get_concrete_function()}
    if text:
        root.source_tokenizer = translator.source_tokenizer
        root.target_tokenizer = translator.target_tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def serve(inputs):
            return {"outputs": translator(inputs)}

        root.serve = serve
        signatures[SERVING_SIGNATURE] = serve.get_concrete_function()
    else:
        signatures[SERVING_SIGNATURE] = signatures[IDS_SIGNATURE]
    os.makedirs(model_dir, exist_ok=True)
    tf.saved_model.save(root, path, signatures=signatures)
    return path
