"""Writing a `Translator` in Hugging Face's layout of OPUS-MT models, the one
`transformers`' `MarianMTModel` and `MarianTokenizer` and `import --format marian` read:

    config.json                 `MarianConfig`: sizes, activation, special ids
    generation_config.json      the search: num_beams, length_penalty
    model.safetensors           the weights, in PyTorch's names and `(out, in)` layout
    vocab.json                  Marian's vocabulary and "<pad>" as its last id
    target_vocab.json           the target side's, where the two are separate
    tokenizer_config.json       whether they are
    source.spm, target.spm      the SentencePiece models of each side

It is Hugging Face's conversion of a Marian directory applied to what
`export.marian.marian_model` gives: "<pad>" (the decoder's start, embedded as
zeros) is appended to each vocabulary, separate vocabularies are filled to one
size with pieces no text spells (`<unused_0>`, ...) that never get a
probability, and a tied table is stored once. Hugging Face's Marian is a
post-norm Transformer with the concatenated sinusoidal table; a pre-norm model
or learned positions are refused by name.

Requires the `safetensors` package (`pip install "keras-transformer-nmt[opus-mt]"`).
"""

import json
import os

import numpy as np

from keras_transformer.errors import ArgumentError, MissingDependencyError
from keras_transformer.export.marian import (
    check_new_directory,
    marian_model,
    write_sentencepiece,
    write_staged,
)
from keras_transformer.importers.hugging_face import LAYER_NAMES, PAD_PIECE
from keras_transformer.inference.translator import Translator
from keras_transformer.layers.positional_encoding import positional_encoding

# The package's activation -> `config.json`'s `activation_function`.
ACTIVATIONS = {"relu": "relu", "silu": "swish", "gelu": "gelu", "gelu_sigmoid": "quick_gelu"}
MAX_POSITIONS = 512  # `max_position_embeddings` of Hugging Face's OPUS-MT models
NO_PROBABILITY = -1e4  # output bias of a filler piece
# Marian's name of a layer's tensor (after `{side}_l{n}_`) -> (PyTorch's, whether transposed).
PYTORCH_NAMES = {marian: (hf, transposed) for hf, (marian, transposed) in LAYER_NAMES.items()}


def hugging_face_tensors(marian, size):
    """The tensors of `marian` (a post-norm `MarianModel` from `marian_model`) under
    PyTorch's names, every vocabulary filled to `size` pieces and "<pad>" appended."""
    weights, tensors = dict(marian.weights), {}

    def rows(table, fill=0.0):  # (V, D) -> (size + 1, D): fillers, then "<pad>" as zeros
        filled = np.full((size - len(table), table.shape[1]), fill, np.float32)
        return np.concatenate([table, filled, np.zeros((1, table.shape[1]), np.float32)])

    if "Wemb" in weights:
        tensors["model.shared.weight"] = rows(weights.pop("Wemb"))
    else:
        for side in ("encoder", "decoder"):
            tensors[f"model.{side}.embed_tokens.weight"] = rows(weights.pop(f"{side}_Wemb"))
    if "decoder_ff_logit_out_W" in weights:
        tensors["lm_head.weight"] = rows(weights.pop("decoder_ff_logit_out_W").T)
    bias = rows(weights.pop("decoder_ff_logit_out_b").T, NO_PROBABILITY).T  # (1, size + 1)
    tensors["final_logits_bias"] = bias
    table = positional_encoding(MAX_POSITIONS, marian.options["dim-emb"], layout="concatenated")
    for side in ("encoder", "decoder"):
        tensors[f"model.{side}.embed_positions.weight"] = np.asarray(table, np.float32)
    for name, value in weights.items():
        side, layer, suffix = name.split("_", 2)
        hf, transposed = PYTORCH_NAMES[suffix]
        value = np.reshape(value, value.shape[-1:]) if value.shape[0] == 1 else value
        tensors[f"model.{side}.layers.{int(layer[1:]) - 1}.{hf}"] = value.T if transposed else value
    return {name: np.ascontiguousarray(value, np.float32) for name, value in tensors.items()}


def hugging_face_config(marian, size, shared, tied):
    """`config.json` and `generation_config.json` of `marian` with vocabularies of
    `size` pieces and "<pad>" (id `size`)."""
    options = marian.options
    config = {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "d_model": options["dim-emb"],
        "encoder_layers": options["enc-depth"],
        "decoder_layers": options["dec-depth"],
        "encoder_attention_heads": options["transformer-heads"],
        "decoder_attention_heads": options["transformer-heads"],
        "encoder_ffn_dim": options["transformer-dim-ffn"],
        "decoder_ffn_dim": options["transformer-dim-ffn"],
        "activation_function": options["transformer-ffn-activation"],
        "dropout": options["transformer-dropout"],
        "attention_dropout": options["transformer-dropout-attention"],
        "activation_dropout": 0.0,
        "vocab_size": size + 1,
        "decoder_vocab_size": size + 1,
        "pad_token_id": size,
        "decoder_start_token_id": size,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": shared,
        "tie_word_embeddings": tied,
        "max_position_embeddings": MAX_POSITIONS,
        "static_position_embeddings": True,
        "is_encoder_decoder": True,
    }
    generation = {
        "num_beams": marian.decoding["beam_size"],
        "length_penalty": marian.decoding["alpha"],
        "max_length": MAX_POSITIONS,
        "bad_words_ids": [[size]],
        "decoder_start_token_id": size,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
        "pad_token_id": size,
    }
    return config, generation


def export_hugging_face(translator: Translator, directory: str) -> str:
    """Writes `translator` in Hugging Face's layout of OPUS-MT models (see the module).

    `generation_config.json` gives the translator's beam size and, with
    `length_penalty: "average"`, its alpha as `length_penalty` (1 for a GNMT
    penalty, which `transformers` lacks).

    Args:
        translator: a `keras_transformer.Translator` of one post-norm model with
            the concatenated sinusoidal table, whose decoder starts from a zero
            embedding and whose tokenizers are SentencePiece models.
        directory: where to write; must not exist yet.

    Returns:
        `directory`.

    Raises:
        FileExistsError: if `directory` exists.
        ArgumentError: naming what Hugging Face's Marian cannot express.
        MissingDependencyError: without the `safetensors` package.

    Examples:
        ```python
        export_hugging_face(translator, "opus-mt-de-en-mine-hf")
        # MarianMTModel.from_pretrained("opus-mt-de-en-mine-hf") in transformers
        ```
    """
    try:
        from safetensors.numpy import save_file
    except ImportError as error:
        raise MissingDependencyError(
            'Writing model.safetensors needs the `safetensors` package: pip install "keras-'
            'transformer-nmt[opus-mt]"'
        ) from error
    check_new_directory(directory)  # before the conversion, which takes seconds
    layout = "Hugging Face's Marian"
    marian = marian_model(translator, ACTIVATIONS, layout)
    options = marian.options
    if options["transformer-preprocess"] or options["transformer-train-position-embeddings"]:
        what = "norm_first" if options["transformer-preprocess"] else "learned positions"
        raise ArgumentError(
            f"{layout} cannot express this model's {what} (it is post-norm, with the "
            "concatenated sinusoidal table)."
        )
    shared = "Wemb" in marian.weights  # one table: one vocabulary, and the output tied
    tied = "decoder_ff_logit_out_W" not in marian.weights
    size = max(len(v) for v in marian.vocabularies)
    vocabularies = [
        pieces + [f"<unused_{i}>" for i in range(size - len(pieces))] + [PAD_PIECE]
        for pieces in marian.vocabularies
    ]
    tensors = hugging_face_tensors(marian, size)
    config, generation = hugging_face_config(marian, size, shared, tied)
    files = {
        "config.json": config,
        "generation_config.json": generation,
        "tokenizer_config.json": {"separate_vocabs": not shared},
        "vocab.json": {piece: i for i, piece in enumerate(vocabularies[0])},
    }
    if not shared:
        files["target_vocab.json"] = {piece: i for i, piece in enumerate(vocabularies[1])}

    def write(staging):
        save_file(tensors, os.path.join(staging, "model.safetensors"), {"format": "pt"})
        for name, value in files.items():
            with open(os.path.join(staging, name), "w", encoding="utf-8") as f:
                json.dump(value, f, ensure_ascii=False, indent=2)
        write_sentencepiece(staging, marian)

    return write_staged(directory, write)
