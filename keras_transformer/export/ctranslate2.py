"""Writing a `Translator` as a CTranslate2 model (`ctranslate2_runtime` translates with it).

CTranslate2 (https://github.com/OpenNMT/CTranslate2) is the C++ inference
engine many NMT systems deploy on CPU, with int8 and bfloat16 weights. Its
`TransformerSpec` describes the same post-LN (or pre-LN) encoder-decoder as
`keras_transformer.Transformer`, so the weights map one to one:

    package                                  CTranslate2 spec
    embedding (V, D), scaled by sqrt(D)      embeddings.weight, scale_embeddings
    sinusoidal table (interleaved or not)    position_encodings.encodings (P, D)
    Rotary (halves paired)                   self_attention rotary_dim 0, no interleave
    ShawRelative keys, values (2k + 1, K)    self_attention.relative_position_keys, _values
    T5Bias per bucket and head (32, H)       self_attention.relative_attention_bias
    ALiBi                                    none: CTranslate2's encoder has no ALiBi
    query/key/value kernels (D, D) each      self_attention.linear[0] (3D, D), fused
    cross-attention query; key and value     attention.linear[0]; linear[1] (2D, D)
    output kernel                            linear[-1]
    the sublayer's layer norm                <sublayer>.layer_norm
    feed-forward inner, outer                ffn.linear_0, ffn.linear_1
    output projection (or tied embedding)    decoder.projection

Keras kernels are `(in, out)`, CTranslate2 weights `(out, in)`. The source
gets EOS appended (`add_source_eos`) as the package's pipeline does, and the
decoder starts from BOS. CTranslate2's beam search divides by
`length ** length_penalty`, the package's `length_penalty="average"`; with
its default GNMT penalty, `ctranslate2_runtime` ranks CTranslate2's
hypotheses as the package does.

Requires the optional `ctranslate2` package (`pip install
"keras-transformer-nmt[ctranslate2]"`).
"""

import os
import shutil
import tempfile

import keras
import numpy as np

from keras_transformer.constants import SPECIAL_IDS
from keras_transformer.errors import ArgumentError
from keras_transformer.export.ctranslate2_layout import (
    DECODE_FILE,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    import_ctranslate2,
)
from keras_transformer.export.options import write_options
from keras_transformer.inference.translator import Translator
from keras_transformer.layers.activations import serialize_activation
from keras_transformer.layers.decoder import DecoderLayer
from keras_transformer.layers.positional_encoding import positional_encoding
from keras_transformer.layers.positions import Learned, Rotary, ShawRelative, Sinusoidal, T5Bias

QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16")
POSITIONS = 1024
_ACTIVATIONS = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_sigmoid": "GELUSigmoid",
    "silu": "SWISH",
    "tanh": "Tanh",
}


def ctranslate2_spec(model, source_pieces, target_pieces, positions=POSITIONS, special_ids=None):
    """The CTranslate2 `TransformerSpec` holding the weights of `model`.

    Args:
        model: a built `keras_transformer.Transformer`.
        source_pieces: the source vocabulary, `source_pieces[i]` the piece of id
            `i`.
        target_pieces: the target vocabulary, likewise.
        positions: rows of the sinusoidal table, the longest sequence the
            CTranslate2 model can read or write (a learned table keeps its
            own `max_positions` rows).
        special_ids: the target vocabulary's `Tokenizer.special_ids`
            (`{"pad": 0, "unk": 1, "bos": 2, "eos": 3}`); None for the
            package's (`constants.SPECIAL_IDS`). CTranslate2 ends each source
            with the target's EOS piece, which the source must spell the same.

    Returns:
        A `ctranslate2.specs.TransformerSpec`, ready for a converter.

    Raises:
        ValueError: on an activation or a way of adding positions
            CTranslate2 does not have, or a vocabulary larger than the
            model's.

    Examples:
        ```python
        spec = ctranslate2_spec(model, tokenizer.pieces, tokenizer.pieces)
        ```
    """
    ct2 = import_ctranslate2()
    specs = ct2.specs
    scheme = model.positions
    if type(scheme) not in _POSITION_OPTIONS:
        raise ArgumentError(
            f"CTranslate2's encoder-decoder has no {type(scheme).__name__} positions "
            f"(positions={scheme!r}); it has {sorted(c.__name__ for c in _POSITION_OPTIONS)}."
        )
    if scheme.placement != "input":
        raise ArgumentError(
            "CTranslate2's Transformer adds a position table to the embeddings only; this "
            f"model adds it elsewhere (placement={scheme.placement!r})."
        )
    activation = serialize_activation(model.activation)
    if activation not in _ACTIVATIONS:
        raise ArgumentError(
            f"CTranslate2 has no activation {activation!r}; it has {sorted(_ACTIVATIONS)}."
        )
    stack_options = dict(
        pre_norm=model.norm_first,
        activation=getattr(specs.Activation, _ACTIVATIONS[activation]),
        **_POSITION_OPTIONS[type(scheme)](scheme),
    )
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(model.encoder.num_layers, model.num_heads, **stack_options),
        specs.TransformerDecoderSpec(model.decoder.num_layers, model.num_heads, **stack_options),
    )
    if isinstance(scheme, Rotary):  # the encoder's spec keeps a table unless told
        del spec.encoder.position_encodings
    encoder, decoder = model.encoder, model.decoder
    _set_inputs(spec.encoder, encoder.embedding, scheme, positions)
    _set_inputs(spec.decoder, decoder.embedding, scheme, positions)
    for stack_spec, stack in ((spec.encoder, encoder), (spec.decoder, decoder)):
        if stack.final_norm is not None:
            _set_norm(stack_spec.layer_norm, stack.final_norm)
        for layer_spec, block in zip(stack_spec.layer, stack.blocks, strict=True):
            _set_self_attention(layer_spec.self_attention, block.self_attention, scheme)
            _set_norm(layer_spec.self_attention.layer_norm, block.self_attention_norm)
            if isinstance(block, DecoderLayer):
                _set_cross_attention(layer_spec.attention, block.cross_attention)
                _set_norm(layer_spec.attention.layer_norm, block.cross_attention_norm)
            _set_linear(layer_spec.ffn.linear_0, block.feed_forward.inner)
            _set_linear(layer_spec.ffn.linear_1, block.feed_forward.outer)
            _set_norm(layer_spec.ffn.layer_norm, block.feed_forward_norm)
    if model.final_layer is not None:
        _set_linear(spec.decoder.projection, model.final_layer)
    else:  # tied to the target embedding
        spec.decoder.projection.weight = spec.decoder.embeddings.weight
        spec.decoder.projection.bias = float32_array(model.output_bias)

    spec.decoder.start_from_zero_embedding = model.start_from_zero_embedding
    spec.config.layer_norm_epsilon = model.layer_norm_epsilon
    spec.config.add_source_eos = True
    spec.register_source_vocabulary(_vocabulary(source_pieces, model.input_vocab_size, "source"))
    target = _vocabulary(target_pieces, model.target_vocab_size, "target")
    spec.register_target_vocabulary(target)
    special_ids = SPECIAL_IDS if special_ids is None else special_ids
    spec.config.unk_token = target[special_ids["unk"]]
    spec.config.bos_token = spec.config.decoder_start_token = target[special_ids["bos"]]
    spec.config.eos_token = target[special_ids["eos"]]
    if spec.config.eos_token not in source_pieces:
        raise ArgumentError(
            f"CTranslate2 ends each source with the target's EOS piece "
            f"{spec.config.eos_token!r}, which the source vocabulary does not have."
        )
    return spec


def _vocabulary(pieces, model_vocab_size, side):
    """`pieces`, filled up to the model's vocabulary with pieces no text spells."""
    pieces = list(pieces)
    if len(pieces) > model_vocab_size:
        raise ArgumentError(
            f"The {side} vocabulary has {len(pieces)} pieces, the model only "
            f"{model_vocab_size} ids."
        )
    return pieces + [f"<unused_{i}>" for i in range(len(pieces), model_vocab_size)]


def float32_array(variable):
    """A weight's values as a float32 NumPy array (a bfloat16 or float16 weight widened),
    as CTranslate2's and Marian's files hold them."""
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype=np.float32)


# Each position scheme CTranslate2 has -> the stack options that say so.
_POSITION_OPTIONS = {
    Sinusoidal: lambda scheme: {},
    Learned: lambda scheme: {},
    Rotary: lambda scheme: dict(  # every head's features, first half paired with second
        rotary_dim=0, rotary_interleave=False, rotary_base=float(scheme.max_wavelength)
    ),
    ShawRelative: lambda scheme: dict(relative_position=True),
    T5Bias: lambda scheme: dict(relative_attention_bias=True),
}


def _set_inputs(stack_spec, embedding, scheme, positions):
    """Token embedding (V, D) and the position table: the learned one
    (max_positions, D), or the sinusoidal one computed for `positions` rows."""
    embeddings = stack_spec.embeddings  # the encoder's is a list, one per source feature
    embeddings = embeddings[0] if isinstance(embeddings, list) else embeddings
    embeddings.weight = float32_array(embedding.token_embedding.embeddings)
    stack_spec.scale_embeddings = True  # Embedding(ids) * sqrt(D)
    if isinstance(scheme, Learned):
        table = embedding.position_encoding.embeddings  # (max_positions, D)
    elif isinstance(scheme, Sinusoidal):
        table = positional_encoding(
            positions,
            embedding.d_model,
            layout=scheme.layout,
            max_wavelength=scheme.max_wavelength,
        )  # (positions, D)
    else:
        return  # no table: positions are in the self-attention specs
    stack_spec.position_encodings.encodings = float32_array(table)


def _set_norm(norm_spec, norm):
    norm_spec.gamma = float32_array(norm.gamma)
    norm_spec.beta = float32_array(norm.beta)


def _set_linear(linear_spec, dense):
    linear_spec.weight = float32_array(dense.kernel).T  # (out, in)
    linear_spec.bias = float32_array(dense.bias)


def _projections(attention, names):
    """The named projections of `attention`, stacked into one `(out, in)` weight."""
    weight = np.concatenate([float32_array(getattr(attention, f"{n}_kernel")).T for n in names])
    bias = np.concatenate([float32_array(getattr(attention, f"{n}_bias")) for n in names])
    return weight, bias


def _set_self_attention(attention_spec, attention, scheme):
    qkv, output = attention_spec.linear[0], attention_spec.linear[-1]
    qkv.weight, qkv.bias = _projections(attention, ("query", "key", "value"))
    output.weight, output.bias = _projections(attention, ("output",))
    if isinstance(scheme, ShawRelative):
        keys, values = (float32_array(w) for w in attention.position_weights)  # (2k + 1, K) each
        attention_spec.relative_position_keys = keys
        attention_spec.relative_position_values = values
    elif isinstance(scheme, T5Bias):
        (bias,) = attention.position_weights  # (buckets, H)
        attention_spec.relative_attention_bias = float32_array(bias)
        attention_spec.relative_attention_max_distance = np.int32(scheme.max_distance)


def _set_cross_attention(attention_spec, attention):
    query, kv, output = attention_spec.linear
    query.weight, query.bias = _projections(attention, ("query",))
    kv.weight, kv.bias = _projections(attention, ("key", "value"))
    output.weight, output.bias = _projections(attention, ("output",))


def vmap_lines(shortlist, source_tokenizer, target_tokenizer):
    """An `inference.Shortlist` as CTranslate2's vocabulary map: one line per source
    piece, `piece<TAB>candidates`, and a first line with no piece for every batch's."""
    source_pieces, target_pieces = source_tokenizer.pieces, target_tokenizer.pieces
    lines = ["\t" + " ".join(target_pieces[i] for i in shortlist.always_ids)]
    for piece, row in enumerate(shortlist.candidates[: len(source_pieces)]):
        listed = [target_pieces[i] for i in row if i != target_tokenizer.pad_id]
        if listed and piece not in (source_tokenizer.pad_id, source_tokenizer.bos_id):
            lines.append(f"{source_pieces[piece]}\t{' '.join(listed)}")
    return lines


def write_spec(spec, directory, quantization=None, vmap=None):
    """Writes a filled spec with CTranslate2's converter, which validates and quantizes it.

    Args:
        spec: e.g. from `ctranslate2_spec`.
        directory: the model directory to write (overwritten if it exists).
        quantization: None (float32) or one of `QUANTIZATIONS`.
        vmap: optional path of a vocabulary map (`vmap_lines`),
            copied into the model for `translate_batch(use_vmap=True)`.

    Returns:
        `directory`.
    """
    ct2 = import_ctranslate2()

    class SpecConverter(ct2.converters.Converter):
        def _load(self):
            return spec

    return SpecConverter().convert(
        os.fspath(directory), vmap=vmap, quantization=quantization, force=True
    )


def export_ctranslate2(
    translator: Translator, directory: str, quantization: str | None = None
) -> str:
    """Writes `translator` as a CTranslate2 model directory, tokenizers included.

    The directory holds CTranslate2's `model.bin`, `config.json` and
    vocabularies, the package's tokenizers (`source_tokenizer/`,
    `target_tokenizer/`, the SentencePiece model for other tools too) and the
    translator's decoding options (`keras_transformer.json`). It is written
    to a temporary directory and moved into place, so an interrupted export
    leaves nothing behind.

    Args:
        translator: a `keras_transformer.Translator`.
        directory: where to write; must not exist yet.
        quantization: None (float32 weights) or one of `QUANTIZATIONS`, e.g.
            `"int8"`. CTranslate2 can also quantize at load time
            (`compute_type`).

    Returns:
        `directory`.

    Raises:
        FileExistsError: if `directory` exists.
        ValueError: on an unknown quantization.

    Examples:
        ```python
        export_ctranslate2(translator, "ct2_model", quantization="int8")
        CTranslate2Translator("ct2_model")(["ein Hund läuft."])  # ['a dog runs.']
        ```
    """
    directory = os.fspath(directory)
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ArgumentError(
            f"Unknown quantization {quantization!r}; expected one of {QUANTIZATIONS} or None."
        )
    if os.path.exists(directory):
        raise FileExistsError(f"{directory!r} exists; choose a new directory.")
    spec = ctranslate2_spec(
        translator.model,
        translator.source_tokenizer.pieces,
        translator.target_tokenizer.pieces,
        positions=max(POSITIONS, translator.max_source_length, translator.max_length + 1),
        special_ids=translator.target_tokenizer.special_ids,
    )
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".ctranslate2-", dir=parent)
    vmap = os.path.join(
        parent, f".{os.path.basename(staging)}.vmap"
    )  # the converter empties staging
    try:
        if translator.shortlist is not None:
            lines = vmap_lines(
                translator.shortlist, translator.source_tokenizer, translator.target_tokenizer
            )
            with open(vmap, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        write_spec(spec, staging, quantization, vmap if translator.shortlist else None)
        translator.source_tokenizer.save(os.path.join(staging, SOURCE_TOKENIZER))
        translator.target_tokenizer.save(os.path.join(staging, TARGET_TOKENIZER))
        options = {
            **translator.options.to_dict(),
            "quantization": quantization,
            "shortlist": translator.shortlist is not None,
        }
        write_options(staging, DECODE_FILE, options)
        os.rename(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if os.path.exists(vmap):
            os.remove(vmap)
    return directory


def __getattr__(name):
    """`CTranslate2Translator`, imported from here before it had a module of its own."""
    if name == "CTranslate2Translator":
        from keras_transformer.export.ctranslate2_runtime import CTranslate2Translator

        return CTranslate2Translator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
