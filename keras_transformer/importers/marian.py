"""Reading OPUS-MT (Marian) models: a Marian model directory as a `Transformer`.

An OPUS-MT directory holds

    decoder.yml            the model file and the two vocabularies to use
    *.npz                  the weights, with Marian's options as `special:model.yml`
    *.vocab.yml            the vocabulary (one file for both sides in OPUS-MT), or
    *.spm                  a SentencePiece model as the vocabulary, numbered by its ids
    source.spm, target.spm the SentencePiece models of each side

`read_marian` reads them and refuses what the importer cannot reproduce
exactly, naming the Marian option; `marian_transformer` builds the model with
their weights. `keras_transformer.run.import_marian` writes the run directory.
"""

import os
import zipfile
from typing import NamedTuple

import numpy as np
import yaml

from keras_transformer.errors import ArgumentError, DamagedFileError
from keras_transformer.inference.options import OPTION_RULES
from keras_transformer.layers.positions import Learned, Sinusoidal
from keras_transformer.models import Transformer
from keras_transformer.text.marian_tokenizer import (
    read_sentencepiece_vocabulary,
    read_vocabulary,
)

MARIAN_ACTIVATIONS = {"relu": "relu", "swish": "silu", "gelu": "gelu_sigmoid"}  # -> the package's
LAYER_NORM_EPSILON = 1e-6  # Marian's transformer layer norms
NO_PROBABILITY = -1e4  # output bias of the rows Marian's vocabulary lacks: padding, start
OPTIONS_KEY = "special:model.yml"


class MarianModel(NamedTuple):
    """What an OPUS-MT directory holds, read and checked."""

    options: dict  # Marian's options (`special:model.yml`), or those a layout gives
    weights: dict  # Marian's name -> np.ndarray
    vocabularies: tuple  # (source pieces, target pieces), in Marian's id order
    sentencepiece: tuple  # (source model bytes, target model bytes)
    files: dict  # the files read: "model", "vocabularies", "sentencepiece"
    layout: str = "marian"  # "marian", or "hugging-face" (`hugging_face.py`)
    activation: str = "silu"  # the feed-forward's, by its Keras name
    layer_norm_epsilon: float = LAYER_NORM_EPSILON
    # How its publisher's decoder searches, as `DecodeOptions` fields (`decoding_of`).
    decoding: dict = {}


def read_marian(model_dir):
    """Reads and checks the OPUS-MT directory `model_dir`.

    Args:
        model_dir: the directory with `decoder.yml`, the `.npz` and `.yml`
            files it names, `source.spm` and `target.spm`.

    Returns:
        A `MarianModel`.

    Raises:
        FileNotFoundError: if a file is missing.
        DamagedFileError: if a file cannot be read as what it should hold.
        ArgumentError: on a Marian option the importer does not support.
    """
    model_dir = os.fspath(model_dir)
    decoder_path = existing_file(model_dir, "decoder.yml")
    try:
        with open(decoder_path, encoding="utf-8") as f:
            decoder = yaml.safe_load(f)
        model_name, vocab_names = decoder["models"][0], list(decoder["vocabs"])
    except (yaml.YAMLError, UnicodeDecodeError, TypeError, KeyError, IndexError) as error:
        raise DamagedFileError(
            f"{decoder_path} does not name a model and its vocabularies "
            f"(`models:` and `vocabs:` lists): {error}",
            decoder_path,
        ) from None
    if len(vocab_names) != 2:
        raise ArgumentError(f"{decoder_path} names {len(vocab_names)} vocabularies; expected 2.")
    model_path = existing_file(model_dir, model_name)
    vocab_paths = [existing_file(model_dir, name) for name in vocab_names]
    spm_paths = [existing_file(model_dir, name) for name in ("source.spm", "target.spm")]
    vocabularies = tuple(_read_vocabulary(path) for path in vocab_paths)
    weights = _read_weights(model_path)
    options = _read_options(weights.pop(OPTIONS_KEY, None), model_path)
    check_options(options, model_path)
    spm = []
    for path in spm_paths:
        with open(path, "rb") as f:
            spm.append(f.read())
    return MarianModel(
        options=options,
        weights=weights,
        vocabularies=vocabularies,
        sentencepiece=tuple(spm),
        files={"model": model_path, "vocabularies": vocab_paths, "sentencepiece": spm_paths},
        activation=MARIAN_ACTIVATIONS[options.get("transformer-ffn-activation", "swish")],
        decoding=decoding_of(decoder, DECODER_NAMES, decoder_path),
    )


# Marian's vocabulary files, by how their names end: a `.yml` of `piece: id` lines, or a
# SentencePiece model numbered by its own ids.
VOCABULARY_READERS = {
    ".yml": read_vocabulary,
    ".yaml": read_vocabulary,
    ".spm": read_sentencepiece_vocabulary,
}


def _read_vocabulary(path):
    """The pieces of the Marian vocabulary at `path`, in the order of Marian's ids."""
    for ending, read in VOCABULARY_READERS.items():
        if path.endswith(ending):
            return read(path)
    raise ArgumentError(
        f"{path}: a Marian vocabulary is a `.yml` file or a SentencePiece model (`.spm`); "
        "other kinds (a `.json` or factored `.fsv` vocabulary) are not supported."
    )


# `decoder.yml`'s names of decoding options, and Marian's defaults of those it leaves out.
DECODER_NAMES = {"beam_size": "beam-size", "alpha": "normalize"}
MARIAN_DECODING = {"beam_size": 12, "alpha": 0.0}


def decoding_of(settings, names, path, defaults=MARIAN_DECODING):
    """The decoding a publisher gives its model, as `DecodeOptions` fields: the beam
    and the strength of a length normalization that divides log P by |Y| ** alpha
    (`length_penalty: average`), as Marian's `--normalize` and Hugging Face's
    `length_penalty` do, and Marian's stopping rule, which ends a sentence once
    `beam_size` of its hypotheses have ended (`patience` 1).

    Args:
        settings: the publisher's settings (`decoder.yml`, Hugging Face's config).
        names: `DecodeOptions` field -> its name in `settings`.
        path: the file `settings` come from, for errors.
        defaults: the values of the settings left out.
    """
    decoding = {"length_penalty": "average", "patience": 1.0}
    for field, name in names.items():
        value = settings.get(name, defaults[field])
        problem = OPTION_RULES[field].problem(value)
        if problem is not None:
            raise DamagedFileError(f"{path}: `{name}` must be {problem}. Received: {value!r}", path)
        decoding[field] = OPTION_RULES[field].kind(value)
    return decoding


def existing_file(directory, name, holder="an OPUS-MT model directory"):
    """The path of the file `name` in `directory`; a missing one is named, with what
    `holder` it belongs in."""
    path = os.path.join(directory, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} is missing: {holder} holds it.")
    return path


def _read_weights(path):
    """Every array of the `.npz` at `path`, read now, so a damaged file fails here."""
    try:
        with np.load(path) as archive:
            return {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise DamagedFileError(
            f"{path} is damaged or not a Marian model (.npz): {error}", path
        ) from None


def _read_options(raw, path):
    if raw is None:
        raise DamagedFileError(
            f"{path} has no `{OPTIONS_KEY}`: it is not a Marian model, or was saved "
            "without its options.",
            path,
        )
    try:
        options = yaml.safe_load(raw.tobytes().rstrip(b"\0").decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise DamagedFileError(f"{path}: `{OPTIONS_KEY}` is damaged: {error}", path) from None
    if not isinstance(options, dict):
        raise DamagedFileError(f"{path}: `{OPTIONS_KEY}` is not a mapping of options.", path)
    return options


def check_options(options, path):
    """An `ArgumentError` naming the first Marian option the importer does not support.

    Supported: `--type transformer` with self-attention decoders, relu, swish or
    gelu feed-forward networks of depth 2, sinusoidal or trained positions, post-norm
    (`--transformer-preprocess '' --transformer-postprocess dan`) or pre-norm
    (`n`, `da` and `--transformer-postprocess-top n`), and no layer norm on the
    embeddings.
    """
    pre_norm = "n" in options.get("transformer-preprocess", "")
    layouts = {
        True: ("n", "da", "n"),  # pre-norm: preprocess, postprocess, postprocess-top
        False: ("", "dan", ""),
    }
    found = tuple(
        options.get(name, "")
        for name in (
            "transformer-preprocess",
            "transformer-postprocess",
            "transformer-postprocess-top",
        )
    )
    refusals = [
        (options.get("type") != "transformer", f"--type {options.get('type')}"),
        (
            options.get("transformer-decoder-autoreg", "self-attention") != "self-attention",
            f"--transformer-decoder-autoreg {options.get('transformer-decoder-autoreg')}",
        ),
        (options.get("transformer-no-projection", False), "--transformer-no-projection"),
        (
            options.get("transformer-ffn-activation", "swish") not in MARIAN_ACTIVATIONS,
            f"--transformer-ffn-activation {options.get('transformer-ffn-activation')} "
            f"(supported: {', '.join(MARIAN_ACTIVATIONS)})",
        ),
        (
            options.get("transformer-ffn-depth", 2) != 2
            or options.get("transformer-decoder-ffn-depth", 0) not in (0, 2),
            "a --transformer-ffn-depth other than 2",
        ),
        (
            options.get("transformer-decoder-dim-ffn", 0)
            not in (0, options.get("transformer-dim-ffn")),
            "--transformer-decoder-dim-ffn other than --transformer-dim-ffn",
        ),
        (
            "n" in options.get("transformer-postprocess-emb", "d"),
            f"--transformer-postprocess-emb {options.get('transformer-postprocess-emb')} "
            "(a layer norm on the embeddings)",
        ),
        (bool(options.get("transformer-tied-layers")), "--transformer-tied-layers"),
        (options.get("right-left", False), "--right-left"),
        (
            found != layouts[pre_norm],
            "--transformer-preprocess {!r} --transformer-postprocess {!r} "
            "--transformer-postprocess-top {!r} (supported: '' dan '' and n da n)".format(*found),
        ),
    ]
    for refused, option in refusals:
        if refused:
            raise ArgumentError(f"{path}: the Marian option {option} is not supported.")


def marian_transformer(marian):
    """The built `Transformer` of `marian` (a `MarianModel`), holding its weights.

    The model numbers the Marian vocabulary from 1: id 0 is padding and the last
    id is the decoder's start (`MarianTokenizer`); both embed as zeros and get
    an output bias of -10^4, so no probability.

    Raises:
        ArgumentError: if a weight is missing, has another shape than the
            options and vocabulary give it, or is one the importer does not
            know.
    """
    options, weights = marian.options, dict(marian.weights)
    source_vocab, target_vocab = marian.vocabularies
    has = set(weights)
    shared = "Wemb" in has
    separate_output = "decoder_ff_logit_out_W" in has
    if shared and separate_output:
        raise ArgumentError(
            f"{marian.files['model']}: the Marian option --tied-embeddings-src (one source "
            "and target embedding, a separate output matrix) is not supported."
        )
    positions = weights.get("Wpos")  # (max-length, D) with --transformer-train-position-embeddings
    model = Transformer(
        num_layers=(options["enc-depth"], options["dec-depth"]),
        d_model=options["dim-emb"],
        num_heads=options["transformer-heads"],
        dff=options["transformer-dim-ffn"],
        input_vocab_size=len(source_vocab) + 2,
        target_vocab_size=len(target_vocab) + 2,
        dropout_rate=float(options.get("transformer-dropout", 0.1)),
        attention_dropout_rate=float(options.get("transformer-dropout-attention", 0.0)),
        norm_first=options.get("transformer-preprocess", "") == "n",
        layer_norm_epsilon=marian.layer_norm_epsilon,
        activation=marian.activation,
        positions=Sinusoidal(layout="concatenated")
        if positions is None
        else Learned(len(positions)),
        shared_embeddings="all" if shared else (None if separate_output else "output"),
        start_from_zero_embedding=True,
    )
    one = np.ones((1, 2), "int32")
    model((one, one))  # build the weights
    _MarianWeights(weights, marian.files["model"]).assign(model)
    return model


class _MarianWeights:
    """Takes Marian's arrays by name into a model's variables, checking each shape,
    and refuses an array no variable took."""

    def __init__(self, weights, path):
        self.weights, self.path = weights, path

    def take(self, name, optional=False):
        if name not in self.weights:
            if optional:
                return None
            raise ArgumentError(f"{self.path} has no weight {name!r}, which the options need.")
        return self.weights.pop(name)

    def put(self, variable, value, name):
        value = np.asarray(value, "float32")
        if value.size == np.prod(variable.shape) and value.ndim != len(variable.shape):
            value = value.reshape(variable.shape)  # Marian's (1, D) biases and scales
        if tuple(value.shape) != tuple(variable.shape):
            raise ArgumentError(
                f"{self.path}: {name!r} has shape {tuple(value.shape)} but the options and "
                f"vocabulary give it {tuple(variable.shape)}."
            )
        variable.assign(value)

    def assign(self, model):
        encoder, decoder = model.encoder, model.decoder
        if model.shared_embeddings == "all":
            self.embedding(encoder.embedding, "Wemb")
        else:
            self.embedding(encoder.embedding, "encoder_Wemb")
            self.embedding(decoder.embedding, "decoder_Wemb")
        if isinstance(model.positions, Learned):  # one Marian table, Wpos, for both stacks
            table = self.take("Wpos")
            for stack in (encoder, decoder):
                self.put(stack.embedding.position_encoding.embeddings, table, "Wpos")
        for stack, scope in ((encoder, "encoder"), (decoder, "decoder")):
            if stack.final_norm is not None:
                self.norm(stack.final_norm, f"{scope}_top")
            for index, block in enumerate(stack.blocks, 1):
                prefix = f"{scope}_l{index}"
                self.attention(block.self_attention, block.self_attention_norm, f"{prefix}_self")
                if scope == "decoder":
                    self.attention(
                        block.cross_attention, block.cross_attention_norm, f"{prefix}_context"
                    )
                self.feed_forward(block, f"{prefix}_ffn")
        self.output(model)
        if self.weights:
            raise ArgumentError(
                f"{self.path} holds weights the importer does not know: "
                f"{sorted(self.weights)[:5]} (a Marian option it does not support)."
            )

    def embedding(self, embedding, name):
        table = self.take(name)  # (V, D)
        zero = np.zeros((1, table.shape[1]), "float32")
        self.put(embedding.token_embedding.embeddings, np.concatenate([zero, table, zero]), name)

    def norm(self, norm, scope):
        for suffix, variable in (("scale", norm.gamma), ("bias", norm.beta)):
            name = f"{scope}_ln_{suffix}"
            pre = self.take(f"{name}_pre", optional=True)
            self.put(variable, self.take(name) if pre is None else pre, name)

    def attention(self, attention, norm, scope):
        for letter, part in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "output")):
            for kind in ("kernel", "bias"):
                name = f"{scope}_{'W' if kind == 'kernel' else 'b'}{letter}"
                self.put(getattr(attention, f"{part}_{kind}"), self.take(name), name)
        self.norm(norm, f"{scope}_Wo")

    def feed_forward(self, block, scope):
        for number, dense in (("1", block.feed_forward.inner), ("2", block.feed_forward.outer)):
            self.put(dense.kernel, self.take(f"{scope}_W{number}"), f"{scope}_W{number}")
            self.put(dense.bias, self.take(f"{scope}_b{number}"), f"{scope}_b{number}")
        self.norm(block.feed_forward_norm, f"{scope}_ffn")

    def output(self, model):
        bias = self.take("decoder_ff_logit_out_b", optional=True)
        size = model.target_vocab_size - 2
        bias = np.zeros(size, "float32") if bias is None else np.reshape(bias, -1)
        bias = np.concatenate([[NO_PROBABILITY], bias, [NO_PROBABILITY]])
        if model.final_layer is None:  # tied to the target embedding
            self.put(model.output_bias, bias, "decoder_ff_logit_out_b")
            return
        kernel = self.take("decoder_ff_logit_out_W")  # (D, V)
        zero = np.zeros((kernel.shape[0], 1), "float32")
        kernel = np.concatenate([zero, kernel, zero], axis=1)
        self.put(model.final_layer.kernel, kernel, "decoder_ff_logit_out_W")
        self.put(model.final_layer.bias, bias, "decoder_ff_logit_out_b")
