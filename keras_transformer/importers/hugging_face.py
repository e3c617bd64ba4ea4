"""OPUS-MT models in Hugging Face's layout (`Helsinki-NLP/opus-mt-*`), read without PyTorch.

Hugging Face's copy of an OPUS-MT model holds

    config.json                 `MarianConfig`: sizes, activation, special ids
    model.safetensors           the weights, in PyTorch's names and layout, or
    tf_model.h5                 the weights of its TensorFlow copy (Keras 2's HDF5), which
                                many of the Hub's older OPUS-MT repositories hold alone
    vocab.json                  the vocabulary, Marian's plus "<pad>" as its last id
    target_vocab.json           the target side's, where the two are separate
    source.spm, target.spm      the SentencePiece models of each side

`read_hugging_face` turns it back into the `MarianModel` that Marian's own
layout gives (`marian.read_marian`): Marian's weight names, `(in, out)`
matrices, the vocabulary without "<pad>", whose embedding row is the zero
vector a Marian decoder starts from. Two things differ from Marian's network
and are kept: Hugging Face's layer norms add 1e-5 (Marian's 1e-6), and its
"gelu" is the exact one. `tf_model.h5` is read with `h5py`, which TensorFlow
brings, and its tensors are given PyTorch's names and layout first.
`pytorch_model.bin` needs PyTorch to read and is refused with what to do instead.
"""

import json
import os

import numpy as np

from keras_transformer.errors import ArgumentError, DamagedFileError, MissingDependencyError
from keras_transformer.importers.marian import MarianModel, decoding_of, existing_file
from keras_transformer.layers.positional_encoding import positional_encoding

ACTIVATIONS = {  # -> the package's
    "relu": "relu",
    "swish": "silu",
    "silu": "silu",
    "gelu": "gelu",
    "quick_gelu": "gelu_sigmoid",
}
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's, which Hugging Face's Marian uses
PAD_PIECE = "<pad>"
# transformers' defaults of the generation settings a config may leave out.
GENERATION_DEFAULTS = {"beam_size": 1, "alpha": 1.0}
# Where a Keras 2 weight path of Hugging Face's TF Marian starts its PyTorch name,
# and Keras' names of the weights PyTorch calls `weight` and `bias`.
TF_ROOTS = ("encoder", "decoder", "shared", "model.shared", "final_logits_bias")
KERAS_SUFFIXES = {"kernel": "weight", "gamma": "weight", "beta": "bias", "embeddings": "weight"}


def _layer_names():
    """A layer's tensors: Hugging Face's suffix -> (Marian's suffix, whether PyTorch's
    `(out, in)` matrix must be transposed)."""
    names = {}
    for hf, marian in (("self_attn", "self"), ("encoder_attn", "context")):
        for part, letter in (("q", "q"), ("k", "k"), ("v", "v"), ("out", "o")):
            names[f"{hf}.{part}_proj.weight"] = (f"{marian}_W{letter}", True)
            names[f"{hf}.{part}_proj.bias"] = (f"{marian}_b{letter}", False)
        names[f"{hf}_layer_norm.weight"] = (f"{marian}_Wo_ln_scale", False)
        names[f"{hf}_layer_norm.bias"] = (f"{marian}_Wo_ln_bias", False)
    for n in (1, 2):
        names[f"fc{n}.weight"] = (f"ffn_W{n}", True)
        names[f"fc{n}.bias"] = (f"ffn_b{n}", False)
    names["final_layer_norm.weight"] = ("ffn_ffn_ln_scale", False)
    names["final_layer_norm.bias"] = ("ffn_ffn_ln_bias", False)
    return names


LAYER_NAMES = _layer_names()


def read_hugging_face(model_dir):
    """Reads and checks the Hugging Face layout of an OPUS-MT model in `model_dir`.

    Args:
        model_dir: the directory with `config.json`, `model.safetensors` (or
            `tf_model.h5`), `vocab.json` (and `target_vocab.json` for separate vocabularies),
            `source.spm` and `target.spm`.

    Returns:
        A `MarianModel` with Marian's weight names.

    Raises:
        FileNotFoundError: if a file is missing.
        DamagedFileError: if a file cannot be read as what it should hold.
        ArgumentError: on a configuration the importer does not support.
        MissingDependencyError: if the `safetensors` package is not installed
            (for `model.safetensors`).

    Examples:
        ```python
        marian = read_hugging_face("opus-mt-de-en")  # a snapshot of Helsinki-NLP/opus-mt-de-en
        marian.options["enc-depth"]  # 6
        ```
    """
    model_dir = os.fspath(model_dir)
    config_path = _existing(model_dir, "config.json")
    config = _read_json(config_path, dict)
    options = _options(config, config_path)
    weights_path = _weights_file(model_dir)
    shared = config.get("share_encoder_decoder_embeddings", True)
    vocab_paths = [_existing(model_dir, "vocab.json")]
    vocab_paths.append(vocab_paths[0] if shared else _existing(model_dir, "target_vocab.json"))
    vocabularies = tuple(_read_vocabulary(path, config, config_path) for path in vocab_paths)
    spm_paths = [_existing(model_dir, name) for name in ("source.spm", "target.spm")]
    spm = []
    for path in spm_paths:
        with open(path, "rb") as f:
            spm.append(f.read())
    tensors = WEIGHT_READERS[os.path.basename(weights_path)](weights_path)
    weights = _marian_weights(tensors, config, weights_path)
    return MarianModel(
        options=options,
        weights=weights,
        vocabularies=vocabularies,
        sentencepiece=tuple(spm),
        files={"model": weights_path, "vocabularies": vocab_paths, "sentencepiece": spm_paths},
        layout="hugging-face",
        activation=ACTIVATIONS[config["activation_function"]],
        layer_norm_epsilon=LAYER_NORM_EPSILON,
        decoding=_decoding(model_dir, config, config_path),
    )


def _decoding(model_dir, config, config_path):
    """The beam and length penalty of `generation_config.json`, where there is one, else
    of `config.json` (`importers.marian.decoding_of`)."""
    generation_path = os.path.join(model_dir, "generation_config.json")
    if os.path.isfile(generation_path):
        config, config_path = _read_json(generation_path, dict), generation_path
    names = {"beam_size": "num_beams", "alpha": "length_penalty"}
    return decoding_of(config, names, config_path, GENERATION_DEFAULTS)


def _weights_file(model_dir):
    """The path of `model.safetensors`, or else of `tf_model.h5`; refuses PyTorch's file."""
    for name in WEIGHT_READERS:
        if os.path.isfile(os.path.join(model_dir, name)):
            return os.path.join(model_dir, name)
    if os.path.isfile(os.path.join(model_dir, "pytorch_model.bin")):
        raise ArgumentError(
            f"{model_dir} holds pytorch_model.bin, which only PyTorch reads; the "
            "importer reads model.safetensors or tf_model.h5 (the Hub's OPUS-MT models "
            "have one of them) or Marian's own .npz."
        )
    return _existing(model_dir, next(iter(WEIGHT_READERS)))


def _existing(directory, name):
    return existing_file(directory, name, "an OPUS-MT model in Hugging Face's layout")


def _read_json(path, kind):
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DamagedFileError(f"{path} is not JSON: {error}", path) from None
    if not isinstance(value, kind):
        raise DamagedFileError(f"{path} does not hold a JSON {kind.__name__}.", path)
    return value


def _options(config, path):
    """Marian's options for the model `config` describes; refuses what the importer
    cannot reproduce, naming the key of `config.json`."""
    required = ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads")
    missing = [key for key in (*required, "encoder_ffn_dim", "vocab_size") if key not in config]
    if missing:
        raise DamagedFileError(f"{path} has no {', '.join(missing)}: not a Marian config.", path)
    refusals = [
        (config.get("model_type") != "marian", f"model_type {config.get('model_type')!r}"),
        (
            config.get("activation_function") not in ACTIVATIONS,
            f"activation_function {config.get('activation_function')!r} "
            f"(supported: {', '.join(ACTIVATIONS)})",
        ),
        (not config.get("scale_embedding", False), "scale_embedding false"),
        (
            config.get("decoder_attention_heads", config["encoder_attention_heads"])
            != config["encoder_attention_heads"],
            "decoder_attention_heads other than encoder_attention_heads",
        ),
        (
            config.get("decoder_ffn_dim", config["encoder_ffn_dim"]) != config["encoder_ffn_dim"],
            "decoder_ffn_dim other than encoder_ffn_dim",
        ),
        (
            config.get("share_encoder_decoder_embeddings", True)
            and not config.get("tie_word_embeddings", True),
            "share_encoder_decoder_embeddings with tie_word_embeddings false",
        ),
        (
            config.get("decoder_start_token_id") != config.get("pad_token_id"),
            "a decoder_start_token_id other than pad_token_id",
        ),
        (config.get("eos_token_id", 0) != 0, f"eos_token_id {config.get('eos_token_id')}"),
    ]
    for refused, option in refusals:
        if refused:
            raise ArgumentError(f"{path}: {option} is not supported.")
    return {
        "type": "transformer",
        "enc-depth": config["encoder_layers"],
        "dec-depth": config["decoder_layers"],
        "dim-emb": config["d_model"],
        "transformer-heads": config["encoder_attention_heads"],
        "transformer-dim-ffn": config["encoder_ffn_dim"],
        "transformer-dropout": config.get("dropout", 0.1),
        "transformer-dropout-attention": config.get("attention_dropout", 0.0),
    }


def _read_vocabulary(path, config, config_path):
    """Marian's pieces from a `vocab.json` ({piece: id}, "<pad>" at `pad_token_id`, last)."""
    by_piece = _read_json(path, dict)
    by_id = {}
    for piece, index in by_piece.items():
        if not isinstance(index, int) or index in by_id:
            raise DamagedFileError(
                f"{path}: the id {index!r} of {piece!r} is not a new number.", path
            )
        by_id[index] = piece
    if sorted(by_id) != list(range(len(by_id))):
        raise DamagedFileError(f"{path}: its ids are not 0 to {len(by_id) - 1}.", path)
    pad = config.get("pad_token_id")
    if pad != len(by_id) - 1 or by_id[pad] != PAD_PIECE:
        raise ArgumentError(
            f"{path} and {config_path}: {PAD_PIECE!r} must be the last id, pad_token_id "
            f"({pad}), as Hugging Face's conversion of OPUS-MT writes it."
        )
    return [by_id[i] for i in range(pad)]


def _read_safetensors(path):
    try:
        from safetensors import SafetensorError
        from safetensors.numpy import load_file
    except ImportError as error:
        raise MissingDependencyError(
            "Reading model.safetensors needs the `safetensors` package: "
            'pip install "keras-transformer-nmt[opus-mt]"'
        ) from error
    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as error:
        raise DamagedFileError(
            f"{path} is damaged or not a safetensors file: {error}", path
        ) from None


def _read_tf_h5(path):
    """The tensors of a `tf_model.h5` under PyTorch's names and in its layout.

    Keras 2 stores each weight under its layer's path, `.../encoder/layers.0/fc1/kernel:0`:
    the path from the stack (`encoder`, `decoder`) or the shared table on, with `/` as `.`,
    is PyTorch's name, and Keras' `kernel`, `gamma` and `beta` are PyTorch's `weight`
    (an `(in, out)` matrix, transposed here), `weight` and `bias`.
    """
    import h5py

    tensors = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset):
            renamed = _pytorch_name(name)
            value = np.asarray(item)
            tensors[renamed] = value.T if name.endswith("kernel:0") else value

    try:
        with h5py.File(path, "r") as f:
            f.visititems(visit)
    except OSError as error:
        raise DamagedFileError(f"{path} is damaged or not an HDF5 file: {error}", path) from None
    return tensors


def _pytorch_name(name):
    """PyTorch's name of a Keras 2 weight path of Hugging Face's TF Marian (see `_read_tf_h5`)."""
    parts = name.removesuffix(":0").split("/")
    starts = [i for i, part in enumerate(parts) if part in TF_ROOTS]
    if not starts:
        return name
    parts = parts[starts[-1] :]
    parts[-1] = KERAS_SUFFIXES.get(parts[-1], parts[-1])
    return ".".join(part.removeprefix("model.") for part in parts)


# The weight files read, in this order of preference.
WEIGHT_READERS = {"model.safetensors": _read_safetensors, "tf_model.h5": _read_tf_h5}


def _marian_weights(tensors, config, path):
    """Hugging Face's tensors under Marian's names and in its layout: `(in, out)`
    matrices, no "<pad>" row or bias. A tensor it does not know keeps its name, so
    that the importer names it when no variable takes it."""
    tensors = {name.removeprefix("model."): value for name, value in tensors.items()}
    shared = config.get("share_encoder_decoder_embeddings", True)
    tied = config.get("tie_word_embeddings", True)
    output = ["lm_head.weight"] if tied else []
    weights = {}
    if shared:
        names = ["shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight"]
        weights["Wemb"] = _embedding(tensors, names + output, path, starts=True)
    else:
        weights["encoder_Wemb"] = _embedding(tensors, ["encoder.embed_tokens.weight"], path)
        weights["decoder_Wemb"] = _embedding(
            tensors, ["decoder.embed_tokens.weight", *output], path, starts=True
        )
    for side in ("encoder", "decoder"):
        positions = tensors.pop(f"{side}.embed_positions.weight", None)
        if positions is not None:
            _check_sinusoidal(positions, path, side)
    if not tied:
        weights["decoder_ff_logit_out_W"] = _embedding(tensors, ["lm_head.weight"], path).T
    bias = tensors.pop("final_logits_bias", None)
    if bias is not None:
        weights["decoder_ff_logit_out_b"] = np.reshape(bias, (1, -1))[:, :-1]
    for name, value in tensors.items():
        weights.update([_layer_weight(name, value)])
    return weights


def _embedding(tensors, names, path, starts=False):
    """The table stored under `names` (one tied table: safetensors stores it under one
    of them, PyTorch's files under each), without its "<pad>" row, which must be zero
    where the decoder `starts` from it."""
    present = [name for name in names if name in tensors]
    if not present:
        raise ArgumentError(f"{path} has none of {names}, which config.json needs.")
    table = tensors.pop(present[0])
    for name in present[1:]:
        if not np.array_equal(tensors.pop(name), table):
            raise ArgumentError(
                f"{path}: {present[0]} and {name} differ, but config.json ties them."
            )
    if starts and np.any(table[-1] != 0):
        raise ArgumentError(
            f"{path}: the embedding of '<pad>' (the decoder's start) is not zero, as "
            "Hugging Face's conversion of OPUS-MT writes it; such a model is not supported."
        )
    return table[:-1]


def _check_sinusoidal(table, path, side):
    """A stored position table must be the sinusoidal one Marian adds, sines then cosines."""
    length, d_model = table.shape
    expected = np.asarray(positional_encoding(length, d_model, layout="concatenated"))
    if not np.allclose(table, expected, atol=2e-3):  # float16 files round to 1e-3
        raise ArgumentError(
            f"{path}: {side}.embed_positions is not Marian's sinusoidal table; trained "
            "positions are not supported."
        )


def _layer_weight(name, value):
    """(Marian's name, value) of a layer's tensor: `encoder.layers.0.fc1.weight` is
    `encoder_l1_ffn_W1`, transposed."""
    side, layers, index, suffix = (name.split(".", 3) + ["", "", ""])[:4]
    if layers != "layers" or not index.isdigit() or suffix not in LAYER_NAMES:
        return name, value
    marian, transposed = LAYER_NAMES[suffix]
    return f"{side}_l{int(index) + 1}_{marian}", value.T if transposed else value
