"""A LiteRT (formerly TensorFlow Lite) translator for devices, with its search inside.

`export_litert` converts a `Translator`'s whole search, greedy or beam, into one
`.tflite` model: the encoder, the cached decoder step and the search loop (a
LiteRT `WHILE` over the step) run inside it, source ids in, target ids out, with
LiteRT's built-in ops only (no select-TensorFlow ops, no custom ops). Shapes are
fixed, which LiteRT's memory planner and delegates need: `(batch_size,
max_source_length)` source ids in, `(batch_size, max_length)` target ids and the
outputs' scores `(batch_size,)` out. One sentence a call (`batch_size=1`, the
default) is how a device translates; `batch_size=None` leaves the batch dimension
free, so that a server or a corpus job translates many sentences a call (the
interpreter is resized to each call's batch). A fixed source length costs a padded
encoder pass, so it is chosen at export (64 pieces by default, EOS included).

Tokenization stays outside the model: TensorFlow Text's LiteRT kernels
(`tflite_registrar`) must be registered with the interpreter, and
`ai-edge-litert`'s has no way to register them, so the SentencePiece models
travel beside the `.tflite` file and `LiteRTTranslator` runs them with the
`sentencepiece` library, which gives the ids TensorFlow Text gives (mapped through
`id_maps.npz` for a `MarianTokenizer`'s vocabulary). Requires
`ai-edge-litert` (`pip install "keras-transformer-nmt[litert]"`).
"""

import os

import numpy as np
import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.export.litert_layout import (
    ID_MAPS,
    LITERT_FILE,
    OPTIONS_FILE,
    SOURCE_MODEL,
    TARGET_MODEL,
)
from keras_transformer.export.options import write_options
from keras_transformer.inference.translator import Translator
from keras_transformer.text import MarianTokenizer
from keras_transformer.text.sentencepiece_tokenizer import SentencePieceModel
from keras_transformer.validation import check_choice, check_positive_int

QUANTIZATIONS = ("float16", "dynamic_int8")
MAX_SOURCE_LENGTH = 64


def export_litert(
    translator: Translator,
    directory: str,
    quantization: str | None = None,
    max_source_length: int = MAX_SOURCE_LENGTH,
    batch_size: int | None = 1,
) -> str:
    """Writes `translator`'s search as a LiteRT model, with its tokenizers, to `directory`.

    The search is the translator's (greedy for `beam_size=1`, else beam
    search) with every decoding option fixed at export; sampling and n-best
    lists are not exported.

    Args:
        translator: a `keras_transformer.inference.Translator` whose tokenizers
            are `SentencePieceTokenizer`s.
        directory: where to write `translator.tflite`, `litert.json` and the
            two SentencePiece models (created if missing).
        quantization: None (float32 weights), `"float16"` (weights stored in
            float16, computed in float32) or `"dynamic_int8"` (int8 weights,
            activations quantized on the fly in the matrix products).
        max_source_length: the model's fixed source length in pieces, EOS
            included; longer sources are cut to it, as `Translator` cuts them.
            A model with a learned position table reads at most its
            `max_positions`.
        batch_size: sentences a call of the model: 1 (a device's case), another
            fixed number (`LiteRTTranslator` pads a short last batch with
            empty sources), or None for any number (the interpreter is resized
            to each call's; a tenth or so slower for one sentence than a file of
            `batch_size=1`).

    Returns:
        `directory`, which `LiteRTTranslator` reads.

    Examples:
        ```python
        export_litert(translator, "litert/numbers_de_en", quantization="dynamic_int8")
        LiteRTTranslator("litert/numbers_de_en")(["siebzehn"])  # ['seventeen']
        export_litert(translator, "litert/numbers_de_en-batches", batch_size=None)
        ```
    """
    if quantization is not None:
        check_choice("quantization", quantization, set(QUANTIZATIONS))
    check_positive_int("max_source_length", max_source_length)
    if batch_size is not None:
        check_positive_int("batch_size", batch_size)
    if translator.sample or translator.n_best > 1:
        raise ArgumentError(
            "The LiteRT export holds one search with one output a sentence; sampling and "
            f"n-best lists are not exported. Received: sample={translator.sample}, "
            f"n_best={translator.n_best}"
        )
    if translator.shortlist is not None:
        raise ArgumentError(
            "The LiteRT export decodes over the whole target vocabulary; give a translator "
            "without a shortlist (decode.shortlist: 0)."
        )
    for side in ("source", "target"):
        tokenizer = getattr(translator, f"{side}_tokenizer")
        if not isinstance(tokenizer, SentencePieceModel):
            raise ArgumentError(
                f"The LiteRT export runs SentencePiece beside the model; the {side} tokenizer "
                f"is a {type(tokenizer).__name__}."
            )
    if translator.model.compute_dtype != "float32":
        raise ArgumentError(
            "The LiteRT export converts a float32 graph; the model computes in "
            f"{translator.model.compute_dtype} (dtype policy {translator.model.dtype_policy.name}"
            "). Give the translator `model.float32_copy()`."
        )
    plain = translator.copy(jit_compile=False, max_source_length=max_source_length)
    max_source_length = plain.max_source_length  # at most a learned position table's rows

    @tf.function(
        input_signature=[tf.TensorSpec([batch_size, max_source_length], tf.int32, "source_ids")],
        autograph=False,
    )
    def search(source_ids):  # (B, S) -> (B, max_length), (B,)
        result = plain.search(source_ids, static_shapes=True)  # a static loop for LiteRT
        return {"target_ids": result.token_ids[:, 0], "scores": result.scores[:, 0]}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [search.get_concrete_function()], plain
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantization is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantization == "float16":
        converter.target_spec.supported_types = [tf.float16]
    flatbuffer = converter.convert()

    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, LITERT_FILE), "wb") as f:
        f.write(flatbuffer)
    for name, tokenizer in [
        (SOURCE_MODEL, plain.source_tokenizer),
        (TARGET_MODEL, plain.target_tokenizer),
    ]:
        tokenizer.write_asset(os.path.join(directory, name))
    if isinstance(plain.source_tokenizer, MarianTokenizer):  # then the target's is one too
        np.savez(
            os.path.join(directory, ID_MAPS),
            source=plain.source_tokenizer.sentencepiece_to_ids,
            target=plain.target_tokenizer.ids_to_sentencepiece,
        )
    options = {
        **plain.options.to_dict(),
        "quantization": quantization,
        "batch_size": batch_size,
        "eos_id": plain.target_tokenizer.eos_id,
        "source_eos_id": plain.source_tokenizer.eos_id,
        "source_prefix_ids": list(plain.source_policy.prefix),
    }
    write_options(directory, OPTIONS_FILE, options)
    return directory


def __getattr__(name):
    """`LiteRTTranslator`, imported from here before it had a module of its own."""
    if name == "LiteRTTranslator":
        from keras_transformer.export.litert_runtime import LiteRTTranslator

        return LiteRTTranslator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
