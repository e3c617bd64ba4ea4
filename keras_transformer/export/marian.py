"""Writing a `Translator` as an OPUS-MT (Marian) model directory, the layout Marian,
CTranslate2's `OpusMTConverter` and `keras-transformer import --format marian` read:

    decoder.yml            the model file, the vocabularies and the search
    model.npz              the weights, Marian's options as `special:model.yml`
    vocab.yml              one vocabulary for both sides, or
    source.vocab.yml,      one per side
    target.vocab.yml
    source.spm, target.spm the SentencePiece models of each side

It is the importer (`importers/marian.py`) read backwards. Marian's vocabulary
numbers `</s>` 0 and `<unk>` 1 and has no padding or start piece: the decoder
starts from a zero vector. So the pieces keep their order, with EOS and UNK
moved first and padding and BOS left out, and only a model that starts from a
zero embedding (`start_from_zero_embedding=True`) can be written. What Marian
cannot express is refused by name, before anything is written:

    package                                     Marian
    Sinusoidal(layout="concatenated")           the default sinusoidal table
    Learned(n), one table for both stacks       Wpos, --transformer-train-position-embeddings
    relu, silu, gelu_sigmoid                    relu, swish, gelu
    norm_first                                  --transformer-preprocess n (and top n)
    shared_embeddings "all", "output", None     tied-embeddings-all, tied-embeddings, none

Marian's layer norms add 1e-6, Hugging Face's 1e-5; a model trained with
another epsilon is written with its weights as they are, as Hugging Face's
own conversion of OPUS-MT does.
"""

import os
import shutil
import tempfile

import numpy as np
import yaml

from keras_transformer.errors import ArgumentError
from keras_transformer.export.ctranslate2 import float32_array
from keras_transformer.importers.marian import OPTIONS_KEY, MarianModel
from keras_transformer.inference.translator import Translator
from keras_transformer.layers.activations import serialize_activation
from keras_transformer.layers.positions import Learned, Sinusoidal
from keras_transformer.models import Transformer
from keras_transformer.text.sentencepiece_tokenizer import SentencePieceModel

MODEL_FILE, SHARED_VOCABULARY = "model.npz", "vocab.yml"
VOCABULARIES = ("source.vocab.yml", "target.vocab.yml")
SENTENCEPIECE_FILES = ("source.spm", "target.spm")
EOS_PIECE, UNK_PIECE = "</s>", "<unk>"  # the pieces Marian and CTranslate2 look for
_ACTIVATIONS = {"relu": "relu", "silu": "swish", "gelu_sigmoid": "gelu"}  # package -> Marian's


def marian_vocabulary(tokenizer):
    """The ids of `tokenizer` in Marian's order: EOS, UNK, then every other piece but
    padding and BOS, in the tokenizer's order. `marian_vocabulary(t)[i]` is the
    tokenizer's id of Marian's id i.

    Examples:
        ```python
        ids = marian_vocabulary(tokenizer)  # [3, 1, 4, 5, ...] for the package's
        [tokenizer.pieces[i] for i in ids][:2]  # ['</s>', '<unk>']
        ```
    """
    for role, piece in (("EOS", EOS_PIECE), ("UNK", UNK_PIECE)):
        found = tokenizer.pieces[getattr(tokenizer, f"{role.lower()}_id")]
        if found != piece:
            raise ArgumentError(
                f"Marian and CTranslate2 read {piece!r} as {role}; this tokenizer spells "
                f"it {found!r}, so the model cannot be written as a Marian model."
            )
    first = [tokenizer.eos_id, tokenizer.unk_id]
    left_out = {*first, tokenizer.pad_id, tokenizer.bos_id}
    return first + [i for i in range(len(tokenizer.pieces)) if i not in left_out]


def vocabulary_text(pieces):
    """Marian's `.yml` vocabulary of `pieces`: a `piece: id` line each, the piece plain
    where YAML reads it back as itself, single-quoted otherwise (`'yes': 7`)."""
    lines = []
    for index, piece in enumerate(pieces):
        if any(ord(c) < 32 for c in piece):
            raise ArgumentError(
                f"The piece {piece!r} holds a control character Marian's vocabulary cannot write."
            )
        lines.append(f"{_key(piece)}: {index}")
    return "\n".join(lines) + "\n"


def _key(piece):
    try:
        plain = yaml.safe_load(f"{piece}: 0") == {piece: 0} and piece[:1] not in "?'\""
    except yaml.YAMLError:
        plain = False
    return piece if plain else "'" + piece.replace("'", "''") + "'"


def marian_options(model, activations=None, layout="Marian"):
    """Marian's options (`special:model.yml`) of `model`, or an `ArgumentError` naming
    the first thing `layout` cannot express.

    Args:
        model: a built `Transformer`.
        activations: the package's activation -> the layout's name of it; None for
            Marian's (relu, swish, gelu).
        layout: the layout's name in a refusal.
    """
    activations = _ACTIVATIONS if activations is None else activations
    scheme = model.positions
    activation = serialize_activation(model.activation)
    refusals = [
        (
            not model.start_from_zero_embedding,
            "learned start embedding (Marian's decoder starts from a zero vector: train "
            "with model.start_from_zero_embedding: true)",
        ),
        (
            not isinstance(scheme, Sinusoidal | Learned) or scheme.placement != "input",
            f"positions={scheme!r} (Marian has Sinusoidal(layout='concatenated') and Learned "
            "tables added to the embeddings)",
        ),
        (
            isinstance(scheme, Sinusoidal)
            and (scheme.layout, scheme.max_wavelength) != ("concatenated", 10000),
            f"positions={scheme!r} (Marian's table is Sinusoidal(layout='concatenated'))",
        ),
        (
            activation not in activations,
            f"activation={activation!r} ({layout} has {sorted(activations)})",
        ),
        (
            (model.encoder.final_norm is not None) != model.norm_first,
            "final layer norm, which only pre-norm stacks have in Marian",
        ),
    ]
    for refused, what in refusals:
        if refused:
            raise ArgumentError(f"{layout} cannot express this model's {what}.")
    encoder_layers, decoder_layers = model.encoder.num_layers, model.decoder.num_layers
    return {
        "type": "transformer",
        "dim-emb": model.d_model,
        "enc-depth": encoder_layers,
        "dec-depth": decoder_layers,
        "transformer-heads": model.num_heads,
        "transformer-dim-ffn": model.dff,
        "transformer-ffn-depth": 2,
        "transformer-ffn-activation": activations[activation],
        "transformer-preprocess": "n" if model.norm_first else "",
        "transformer-postprocess": "da" if model.norm_first else "dan",
        "transformer-postprocess-top": "n" if model.norm_first else "",
        "transformer-postprocess-emb": "d",
        "transformer-decoder-autoreg": "self-attention",
        "transformer-no-projection": False,
        "transformer-guided-alignment-layer": "last",
        "transformer-train-position-embeddings": isinstance(scheme, Learned),
        "max-length": scheme.max_positions if isinstance(scheme, Learned) else 1000,
        "transformer-tied-layers": [],
        "transformer-dropout": float(model.dropout_rate),
        "transformer-dropout-attention": float(model.attention_dropout_rate),
        "tied-embeddings-all": model.shared_embeddings == "all",
        "tied-embeddings": model.shared_embeddings == "output",
        "right-left": False,
    }


def marian_weights(model, source_ids, target_ids):
    """Marian's arrays of `model`, by Marian's names: the importer's `_MarianWeights`
    backwards, embeddings and output rows taken at `source_ids` and `target_ids`
    (`marian_vocabulary`)."""
    weights = {}
    encoder, decoder = model.encoder, model.decoder

    def embedding(stack, ids):
        return float32_array(stack.embedding.token_embedding.embeddings)[ids]  # (V, D)

    if model.shared_embeddings == "all":
        weights["Wemb"] = embedding(encoder, source_ids)
    else:
        weights["encoder_Wemb"] = embedding(encoder, source_ids)
        weights["decoder_Wemb"] = embedding(decoder, target_ids)
    if isinstance(model.positions, Learned):
        tables = [
            float32_array(s.embedding.position_encoding.embeddings) for s in (encoder, decoder)
        ]
        if not np.array_equal(*tables):
            raise ArgumentError(
                "Marian cannot express this model's two learned position tables: Marian "
                "has one (Wpos) for both stacks."
            )
        weights["Wpos"] = tables[0]
    suffix = "_pre" if model.norm_first else ""

    def norm(layer, name, suffix=suffix):
        weights[f"{name}_ln_scale{suffix}"] = float32_array(layer.gamma)[None]  # (1, D)
        weights[f"{name}_ln_bias{suffix}"] = float32_array(layer.beta)[None]

    def attention(layer, layer_norm, scope):
        for letter, part in (("q", "query"), ("k", "key"), ("v", "value"), ("o", "output")):
            weights[f"{scope}_W{letter}"] = float32_array(
                getattr(layer, f"{part}_kernel")
            )  # (D, D)
            weights[f"{scope}_b{letter}"] = float32_array(getattr(layer, f"{part}_bias"))[None]
        norm(layer_norm, f"{scope}_Wo")

    for stack, scope in ((encoder, "encoder"), (decoder, "decoder")):
        if stack.final_norm is not None:
            norm(stack.final_norm, f"{scope}_top", suffix="")
        for index, block in enumerate(stack.blocks, 1):
            prefix = f"{scope}_l{index}"
            attention(block.self_attention, block.self_attention_norm, f"{prefix}_self")
            if scope == "decoder":
                attention(block.cross_attention, block.cross_attention_norm, f"{prefix}_context")
            for number, dense in (("1", block.feed_forward.inner), ("2", block.feed_forward.outer)):
                weights[f"{prefix}_ffn_W{number}"] = float32_array(dense.kernel)  # (in, out)
                weights[f"{prefix}_ffn_b{number}"] = float32_array(dense.bias)[None]
            norm(block.feed_forward_norm, f"{prefix}_ffn_ffn")
    if model.final_layer is None:  # tied to the target embedding
        bias = float32_array(model.output_bias)
    else:
        bias = float32_array(model.final_layer.bias)
        weights["decoder_ff_logit_out_W"] = float32_array(model.final_layer.kernel)[:, target_ids]
    weights["decoder_ff_logit_out_b"] = bias[target_ids][None]  # (1, V)
    return weights


def marian_model(translator, activations=None, layout="Marian"):
    """The `MarianModel` of `translator`: Marian's options, arrays and vocabularies, and
    its search as `DecodeOptions` fields (`normalize` 1 for a GNMT penalty, which Marian
    lacks). `activations` and `layout` as for `marian_options`.

    Raises:
        ArgumentError: naming what `layout` cannot express.
    """
    model = translator.model
    if not isinstance(model, Transformer):
        raise ArgumentError(
            f"{layout}'s layout holds one Transformer; this translator's model is a "
            f"{type(model).__name__} (export one run of an ensemble at a time)."
        )
    tokenizers = (translator.source_tokenizer, translator.target_tokenizer)
    for side, tokenizer in zip(("source", "target"), tokenizers, strict=True):
        if not isinstance(tokenizer, SentencePieceModel):
            raise ArgumentError(
                f"{layout}'s layout holds SentencePiece models; the {side} tokenizer is a "
                f"{type(tokenizer).__name__}."
            )
    options = marian_options(model, activations, layout)
    ids = [marian_vocabulary(t) for t in tokenizers]
    vocabularies = tuple([t.pieces[i] for i in row] for t, row in zip(tokenizers, ids, strict=True))
    if model.shared_embeddings == "all" and vocabularies[0] != vocabularies[1]:
        raise ArgumentError(f"{layout}'s one embedding for both sides needs one vocabulary.")
    options["dim-vocabs"] = [len(v) for v in vocabularies]
    search = translator.options
    return MarianModel(
        options=options,
        weights=marian_weights(model, *ids),
        vocabularies=vocabularies,
        sentencepiece=tuple(t.model_proto for t in tokenizers),
        files={},
        activation=serialize_activation(model.activation),
        layer_norm_epsilon=model.layer_norm_epsilon,
        decoding={
            "beam_size": search.beam_size,
            "alpha": float(search.alpha) if search.length_penalty == "average" else 1.0,
        },
    )


def check_new_directory(directory):
    """A `FileExistsError` if `directory` exists: an export writes a new one only."""
    if os.path.exists(directory):
        raise FileExistsError(f"{os.fspath(directory)!r} exists; choose a new directory.")


def write_staged(directory, write):
    """Calls `write(staging)` on a new directory beside `directory`, then moves it into
    place: a refused or interrupted export leaves nothing behind.

    Raises:
        FileExistsError: if `directory` exists.
    """
    directory = os.fspath(directory)
    check_new_directory(directory)  # again: another process may have made it meanwhile
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(directory)}-", dir=parent)
    try:
        write(staging)
        os.rename(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def export_marian(translator: Translator, directory: str) -> str:
    """Writes `translator` as an OPUS-MT (Marian) model directory.

    `decoder.yml` gives Marian's search the translator's beam size and, with
    `length_penalty: "average"`, its alpha as `normalize` (Marian's length
    normalization; a GNMT penalty has none, so `normalize: 1` is written then).
    The directory is written beside `directory` and moved into place, so a
    refused or interrupted export leaves nothing behind.

    Args:
        translator: a `keras_transformer.Translator` of one model (not an
            ensemble) whose tokenizers are SentencePiece models.
        directory: where to write; must not exist yet.

    Returns:
        `directory`.

    Raises:
        FileExistsError: if `directory` exists.
        ArgumentError: naming what Marian cannot express.

    Examples:
        ```python
        export_marian(translator, "opus-mt-de-en-mine")
        # keras-transformer import --format marian --model-dir opus-mt-de-en-mine ...
        ```
    """
    check_new_directory(directory)  # before the conversion, which takes seconds
    marian = marian_model(translator)
    weights = dict(marian.weights)
    weights[OPTIONS_KEY] = np.frombuffer(
        yaml.safe_dump(marian.options, sort_keys=False).encode("utf-8") + b"\0", np.int8
    )
    shared = marian.vocabularies[0] == marian.vocabularies[1]
    vocab_files = [SHARED_VOCABULARY] * 2 if shared else list(VOCABULARIES)
    decoder = {
        "relative-paths": True,
        "models": [MODEL_FILE],
        "vocabs": vocab_files,
        "beam-size": marian.decoding["beam_size"],
        "normalize": marian.decoding["alpha"],
        "word-penalty": 0,
    }

    def write(staging):
        np.savez(os.path.join(staging, MODEL_FILE), **weights)
        for name, pieces in zip(vocab_files, marian.vocabularies, strict=True):
            with open(os.path.join(staging, name), "w", encoding="utf-8") as f:
                f.write(vocabulary_text(pieces))
        write_sentencepiece(staging, marian)
        with open(os.path.join(staging, "decoder.yml"), "w", encoding="utf-8") as f:
            yaml.safe_dump(decoder, f, sort_keys=False)

    return write_staged(directory, write)


def write_sentencepiece(directory, marian):
    """`source.spm` and `target.spm` of `marian` (a `MarianModel`) into `directory`."""
    for name, proto in zip(SENTENCEPIECE_FILES, marian.sentencepiece, strict=True):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(proto)
