"""A LiteRT (formerly TensorFlow Lite) translator for devices, with its search inside.

`export_litert` converts a `Translator`'s whole search, greedy or beam, into one
`.tflite` model: the encoder, the cached decoder step and the search loop (a
LiteRT `WHILE` over the step) run inside it, source ids in, target ids out, with
LiteRT's built-in ops only (no select-TensorFlow ops, no custom ops). Shapes are
fixed, which LiteRT's memory planner and delegates need: one sentence
`(1, max_source_length)` in, `(1, max_length)` out. One sentence a call is how a
device translates; a fixed source length costs a padded encoder pass, so it is
chosen at export (64 pieces by default, EOS included).

Tokenization stays outside the model: TensorFlow Text's LiteRT kernels
(`tflite_registrar`) must be registered with the interpreter, and
`ai-edge-litert`'s has no way to register them, so the SentencePiece models
travel beside the `.tflite` file and `LiteRTTranslator` runs them with the
`sentencepiece` library, which gives the ids TensorFlow Text gives. Requires
`ai-edge-litert` (`pip install "keras-transformer-nmt[litert]"`).
"""

import os

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BOS_ID, PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.export.options import read_options, write_options
from keras_transformer.inference.checks import refuse_one_string
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.text import SentencePieceTokenizer, SourcePolicy
from keras_transformer.validation import check_choice, check_positive_int

LITERT_FILE = "translator.tflite"
OPTIONS_FILE = "litert.json"
SOURCE_MODEL = "source.model"
TARGET_MODEL = "target.model"
QUANTIZATIONS = ("float16", "dynamic_int8")
MAX_SOURCE_LENGTH = 64
# What `litert.json` holds beside the `DecodeOptions` of the exported search.
EXPORT_KEYS = ("quantization", "eos_id", "source_eos_id")


def export_litert(translator, directory, quantization=None, max_source_length=MAX_SOURCE_LENGTH):
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

    Returns:
        `directory`, which `LiteRTTranslator` reads.

    Examples:
        ```python
        export_litert(translator, "litert/numbers_de_en", quantization="dynamic_int8")
        LiteRTTranslator("litert/numbers_de_en")(["siebzehn"])  # ['seventeen']
        ```
    """
    if quantization is not None:
        check_choice("quantization", quantization, set(QUANTIZATIONS))
    check_positive_int("max_source_length", max_source_length)
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
        if not isinstance(tokenizer, SentencePieceTokenizer):
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

    @tf.function(input_signature=[tf.TensorSpec([1, max_source_length], tf.int32, "source_ids")])
    def search(source_ids):  # (1, S) -> (1, max_length)
        return {"target_ids": plain.search(source_ids).token_ids[:, 0]}

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
    options = {
        **plain.options.to_dict(),
        "quantization": quantization,
        "eos_id": plain.target_tokenizer.eos_id,
        "source_eos_id": plain.source_tokenizer.eos_id,
    }
    write_options(directory, OPTIONS_FILE, options)
    return directory


def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError as error:
        raise ImportError(
            "The LiteRT translator needs the `ai-edge-litert` package: "
            'pip install "keras-transformer-nmt[litert]"'
        ) from error
    return Interpreter


class LiteRTTranslator:
    """Translates strings with a model written by `export_litert`, one sentence a call.

    Runs on the `ai-edge-litert` interpreter (not TensorFlow's deprecated
    `tf.lite.Interpreter`), with SentencePiece in Python around it. An empty
    or whitespace-only sentence is the source `[EOS]`, which the search ends
    at once: it translates to "", as everywhere in the package. A source
    longer than the export's `max_source_length` is cut to it (`truncated`
    says which).

    Args:
        directory: a directory written by `export_litert`.
        num_threads: interpreter threads; None lets LiteRT choose.

    Examples:
        ```python
        translate = LiteRTTranslator("litert/numbers_de_en")
        translate(["dreihunderteinundzwanzig", ""])  # ['three hundred and twenty-one', '']
        ```
    """

    def __init__(self, directory, num_threads=None):
        import sentencepiece

        self.options = read_options(directory, OPTIONS_FILE, "LiteRT")
        self.decode_options = DecodeOptions.from_dict(self.options, others=EXPORT_KEYS)
        self.max_source_length = self.decode_options.max_source_length
        self.max_length = self.decode_options.max_length
        self.source_policy = SourcePolicy(self.max_source_length, self.options["source_eos_id"])
        self.source = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(directory, SOURCE_MODEL)
        )
        self.target = sentencepiece.SentencePieceProcessor(
            model_file=os.path.join(directory, TARGET_MODEL)
        )
        interpreter = _interpreter_class()(
            model_path=os.path.join(directory, LITERT_FILE), num_threads=num_threads
        )
        interpreter.allocate_tensors()
        self._interpreter = interpreter
        self._input = interpreter.get_input_details()[0]["index"]
        self._output = interpreter.get_output_details()[0]["index"]

    def source_ids(self, sentence):
        """A sentence's ids, cut to `max_source_length` with EOS: int32 `(1, S)`, 0-padded."""
        kept = self.source_policy.ids(self.source.encode(sentence))
        ids = np.full((1, self.max_source_length), PAD_ID, np.int32)
        ids[0, : len(kept)] = kept
        return ids

    def translate_ids(self, source_ids):
        """Target ids `(1, max_length)` of source ids `(1, max_source_length)`, 0 after EOS."""
        source_ids = np.asarray(source_ids)
        if source_ids.shape != (1, self.max_source_length) or source_ids.dtype.kind not in "iu":
            raise ArgumentError(
                f"`source_ids` must be integer ids of shape (1, {self.max_source_length}). "
                f"Received: shape {source_ids.shape}, dtype {source_ids.dtype}"
            )
        self._interpreter.set_tensor(self._input, source_ids.astype(np.int32))
        self._interpreter.invoke()
        return self._interpreter.get_tensor(self._output)

    def truncated(self, sentences):
        """Which sentences are longer than `max_source_length` pieces with EOS: list of bool."""
        return [self.source_policy.truncated(len(self.source.encode(s))) for s in sentences]

    def __call__(self, sentences):
        """Translations of a list of strings, one call of the model each."""
        refuse_one_string(sentences)
        others = [s for s in sentences if not isinstance(s, str)]
        if others:
            raise ArgumentError(
                f"`sentences` must be a list of strings (B,). Received: an item {others[0]!r:.80}"
            )
        return [self._translate_one(sentence) for sentence in sentences]

    def _translate_one(self, sentence):
        target_ids = self.translate_ids(self.source_ids(sentence))[0]  # (max_length,)
        ended = np.flatnonzero(target_ids == self.options["eos_id"])
        ids = target_ids[: ended[0] if len(ended) else len(target_ids)]
        return self.target.decode([int(i) for i in ids if i not in (PAD_ID, BOS_ID)])
