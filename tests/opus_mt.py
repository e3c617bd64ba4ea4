"""A tiny OPUS-MT model directory, written as Marian writes one, its copy in Hugging Face's
layout, written as Hugging Face's conversion script does, and Marian's forward pass in NumPy:
the independent reference of the importer's tests.

The weights are random; the SentencePiece models are trained on numbers written out in
German and English, with a few pieces YAML would misread unquoted (`yes`, `null`, `'`,
`"`, `a: b`), so that the vocabulary file needs Marian's quoting.
"""

import io
import json
import math
import os
import shutil

import numpy as np
import safetensors.numpy
import sentencepiece
import yaml

from keras_transformer.datasets import numbers_corpus

AWKWARD_PIECES = ["yes", "null", "~", "'", '"', "a: b", "#x", "\\"]


def sentencepiece_model(texts, vocab_size, **options):
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_writer=model,
        vocab_size=vocab_size,
        user_defined_symbols=AWKWARD_PIECES,
        hard_vocab_limit=False,
        minloglevel=2,
        **options,
    )
    return model.getvalue()


def vocabulary_lines(pieces):
    """Marian's `.yml` vocabulary: plain pieces where YAML reads them back as they are,
    quoted otherwise (double quotes, or single for every other one), and one long piece
    as a complex key."""
    lines = []
    for index, piece in enumerate(pieces):
        if _reads_back(piece):
            key = piece
        elif index % 2:
            key = "'" + piece.replace("'", "''") + "'"
        else:
            key = json.dumps(piece, ensure_ascii=False)
        if len(piece) >= 6 and key == piece:
            lines += [f"? {key}", f": {index}"]
        else:
            lines.append(f"{key}: {index}")
    return "\n".join(lines) + "\n"


def _reads_back(piece):
    try:
        return yaml.safe_load(f"{piece}: 0") == {piece: 0} and not piece.startswith("?")
    except yaml.YAMLError:
        return False


def marian_options(pre_norm, activation, tying, depths, d_model, heads, dff, max_length=None):
    return {
        "type": "transformer",
        "dim-emb": d_model,
        "enc-depth": depths[0],
        "dec-depth": depths[1],
        "transformer-heads": heads,
        "transformer-dim-ffn": dff,
        "transformer-ffn-depth": 2,
        "transformer-ffn-activation": activation,
        "transformer-preprocess": "n" if pre_norm else "",
        "transformer-postprocess": "da" if pre_norm else "dan",
        "transformer-postprocess-top": "n" if pre_norm else "",
        "transformer-postprocess-emb": "d",
        "transformer-decoder-autoreg": "self-attention",
        "transformer-no-projection": False,
        "transformer-guided-alignment-layer": "last",
        "transformer-train-position-embeddings": max_length is not None,
        "max-length": max_length or 100,
        "transformer-tied-layers": [],
        "transformer-dropout": 0.1,
        "tied-embeddings-all": tying == "all",
        "tied-embeddings": tying == "output",
        "right-left": False,
    }


def marian_weights(options, vocab_size, tying, seed, eos_bias=4.0):
    """Random weights under Marian's names; layer norms near 1, and `eos_bias` added to
    EOS's output bias (4: outputs end after a few tokens; very negative: never).
    `vocab_size` is one size for both sides or a `(source, target)` pair."""
    rng = np.random.default_rng(seed)
    d, dff = options["dim-emb"], options["transformer-dim-ffn"]
    pre = "_pre" if options["transformer-preprocess"] == "n" else ""

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype("float32")

    weights = {}

    def norm(name, suffix=pre):
        weights[f"{name}_ln_scale{suffix}"] = 1 + normal(1, d, scale=0.1)
        weights[f"{name}_ln_bias{suffix}"] = normal(1, d, scale=0.1)

    def attention(prefix):
        for letter in "qkvo":
            weights[f"{prefix}_W{letter}"] = normal(d, d, scale=d**-0.5)
            weights[f"{prefix}_b{letter}"] = normal(1, d, scale=0.1)
        norm(f"{prefix}_Wo")

    source_size, vocab_size = vocab_size if isinstance(vocab_size, tuple) else (vocab_size,) * 2
    if tying == "all":
        weights["Wemb"] = normal(vocab_size, d, scale=0.5)
    else:
        weights["encoder_Wemb"] = normal(source_size, d, scale=0.5)
        weights["decoder_Wemb"] = normal(vocab_size, d, scale=0.5)
    for scope, depth in (("encoder", options["enc-depth"]), ("decoder", options["dec-depth"])):
        for layer in range(1, depth + 1):
            prefix = f"{scope}_l{layer}"
            attention(f"{prefix}_self")
            if scope == "decoder":
                attention(f"{prefix}_context")
            weights[f"{prefix}_ffn_W1"] = normal(d, dff, scale=d**-0.5)
            weights[f"{prefix}_ffn_b1"] = normal(1, dff, scale=0.1)
            weights[f"{prefix}_ffn_W2"] = normal(dff, d, scale=dff**-0.5)
            weights[f"{prefix}_ffn_b2"] = normal(1, d, scale=0.1)
            norm(f"{prefix}_ffn_ffn")
        if pre:
            norm(f"{scope}_top", suffix="")
    if tying is None:
        weights["decoder_ff_logit_out_W"] = normal(d, vocab_size, scale=0.5)
    if options["transformer-train-position-embeddings"]:
        weights["Wpos"] = normal(options["max-length"], d, scale=0.5)
    bias = normal(1, vocab_size, scale=0.5)
    bias[0, 0] += eos_bias  # </s>
    weights["decoder_ff_logit_out_b"] = bias
    return weights


def marian_vocabulary(models, size=None, languages=()):
    """Marian's vocabulary of SentencePiece models: `</s>`, `<unk>`, the target-language
    tokens of `languages` (`>>por<<`), then each model's pieces once, filled up to `size`
    with pieces no text spells."""
    pieces = ["</s>", "<unk>", *(f">>{code}<<" for code in languages)]
    for model in models:
        processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if not (processor.is_control(i) or processor.is_unknown(i)) and piece not in pieces:
                pieces.append(piece)
    return pieces + [f"<filler_{i}>" for i in range(len(pieces), size or 0)]


def write_opus_mt(
    directory,
    pre_norm=False,
    activation="relu",
    tying="all",
    seed=0,
    sizes=((2, 1), 16, 2, 32),
    vocab_size=None,
    corpus=None,
    eos_bias=4.0,
    trained_positions=None,
    separate_vocabularies=False,
    spm_vocabulary=False,
    languages=(),
):
    """Writes an OPUS-MT-shaped model directory and returns its path.

    Args:
        directory: where to write (created).
        pre_norm: Marian's pre-norm layout instead of post-norm.
        activation: `"relu"`, `"swish"` or `"gelu"` (Marian's, with a sigmoid).
        tying: `"all"` (one matrix for both embeddings and the output), `"output"`
            (the target embedding is the output matrix) or None (three matrices).
        seed: seed of the weights.
        sizes: `((encoder layers, decoder layers), d_model, heads, dff)`.
        vocab_size: pieces of the vocabulary, filled up with pieces no text spells;
            None keeps the SentencePiece models' own.
        corpus: the `ParallelCorpus` (German to English) the SentencePiece models are
            trained on; 600 pairs of the numbers corpus by default, with 70 pieces each.
        eos_bias: added to the output bias of EOS: 4 ends outputs after a few tokens; a
            very negative one makes every output run to the search's longest.
        trained_positions: rows of a trained position table (`Wpos`, Marian's
            `--transformer-train-position-embeddings` with `--max-length`); None for
            the sinusoidal one.
        separate_vocabularies: a Marian vocabulary per side, each of its SentencePiece
            model's pieces (`opus.src.vocab.yml`, `opus.trg.vocab.yml`), instead of one
            for both; needs `tying` None.
        spm_vocabulary: one SentencePiece model of both sides, trained with Marian's ids
            (`</s>` 0, `<unk>` 1, no BOS or padding), as the vocabulary Marian numbers by
            its ids (`opus.spm` in `decoder.yml`) and as `source.spm` and `target.spm`.
        languages: codes of target-language tokens the vocabulary holds (a
            multi-target model's `>>por<<`).
    """
    os.makedirs(directory, exist_ok=True)
    pieces_each = 70 if corpus is None else 8000
    corpus = corpus or numbers_corpus("train", source_lang="de", target_lang="en", limit=600)
    models = [sentencepiece_model(texts, pieces_each) for texts in (corpus.sources, corpus.targets)]
    assert not (separate_vocabularies and tying), "separate vocabularies need three matrices"
    if spm_vocabulary:
        texts = list(corpus.sources) + list(corpus.targets)
        joint = sentencepiece_model(texts, 120, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1)
        models = [joint, joint]
        processor = sentencepiece.SentencePieceProcessor(model_proto=joint)
        vocabularies = [[processor.id_to_piece(i) for i in range(processor.get_piece_size())]]
    elif separate_vocabularies:
        vocabularies = [marian_vocabulary([model], vocab_size) for model in models]
    else:
        vocabularies = [marian_vocabulary(models, vocab_size, languages)]
    for name, model in zip(("source.spm", "target.spm"), models, strict=True):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(model)
    names = ["opus.src.vocab.yml", "opus.trg.vocab.yml"] if separate_vocabularies else []
    if spm_vocabulary:
        names = ["opus.spm", "opus.spm"]
        with open(os.path.join(directory, "opus.spm"), "wb") as f:
            f.write(joint)
    else:
        for name, pieces in zip(names or ["opus.vocab.yml"], vocabularies, strict=True):
            with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
                f.write(vocabulary_lines(pieces))
    options = marian_options(pre_norm, activation, tying, *sizes, max_length=trained_positions)
    sizes_of = tuple(len(pieces) for pieces in vocabularies)
    sizes_of = sizes_of if separate_vocabularies else sizes_of[0]
    weights = marian_weights(options, sizes_of, tying, seed, eos_bias)
    text = yaml.safe_dump(options).encode("utf-8") + b"\0"
    weights["special:model.yml"] = np.frombuffer(text, dtype=np.int8)
    np.savez(os.path.join(directory, "opus.model.npz"), **weights)
    decoder = {
        "models": ["opus.model.npz"],
        "vocabs": names or ["opus.vocab.yml", "opus.vocab.yml"],
        "beam-size": 4,
        "normalize": 0.6,
        "relative-paths": True,
    }
    with open(os.path.join(directory, "decoder.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(decoder, f)
    return directory


# Hugging Face's names of a layer's Marian tensors (its conversion script's table).
HUGGING_FACE_NAMES = {
    **{
        f"{marian}_{kind}{letter}": f"{hf}.{part}_proj.{'weight' if kind == 'W' else 'bias'}"
        for marian, hf in (("self", "self_attn"), ("context", "encoder_attn"))
        for letter, part in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "out"))
        for kind in ("W", "b")
    },
    **{
        f"{marian}_ln_{kind}": f"{hf}.{'weight' if kind == 'scale' else 'bias'}"
        for marian, hf in (
            ("self_Wo", "self_attn_layer_norm"),
            ("context_Wo", "encoder_attn_layer_norm"),
            ("ffn_ffn", "final_layer_norm"),
        )
        for kind in ("scale", "bias")
    },
    **{f"ffn_{k}{n}": f"fc{n}.{'weight' if k == 'W' else 'bias'}" for n in (1, 2) for k in "Wb"},
}


def write_hugging_face(marian_dir, directory, activation=None, float16=False, positions=64):
    """Writes the post-norm OPUS-MT directory `marian_dir` in Hugging Face's layout, as
    its conversion script does: "<pad>" appended to the vocabulary with a zero
    embedding and bias, PyTorch's `(out, in)` matrices, `final_logits_bias`, and a
    tied table stored once (under `model.shared.weight`).

    Args:
        marian_dir: a directory `write_opus_mt` wrote (post-norm).
        directory: where to write (created).
        activation: `config.json`'s `activation_function`; None keeps Marian's.
        float16: store float16 tensors, as the conversion script does.
        positions: rows of the stored sinusoidal position tables (0: none stored).
    """
    os.makedirs(directory, exist_ok=True)
    weights = dict(np.load(os.path.join(marian_dir, "opus.model.npz")))
    options = yaml.safe_load(weights.pop("special:model.yml").tobytes().rstrip(b"\0"))
    with open(os.path.join(marian_dir, "opus.vocab.yml"), encoding="utf-8") as f:
        vocab = {piece: int(i) for piece, i in yaml.load(f, Loader=yaml.BaseLoader).items()}
    pad = vocab["<pad>"] = len(vocab)
    shared, tied = "Wemb" in weights, "decoder_ff_logit_out_W" not in weights

    def with_pad(table):  # (V, D) -> (V + 1, D)
        return np.concatenate([table, np.zeros((1, table.shape[1]), table.dtype)])

    tensors = {}
    if shared:
        tensors["model.shared.weight"] = with_pad(weights.pop("Wemb"))
    else:
        for side in ("encoder", "decoder"):
            tensors[f"model.{side}.embed_tokens.weight"] = with_pad(weights.pop(f"{side}_Wemb"))
    if not tied:
        tensors["lm_head.weight"] = with_pad(weights.pop("decoder_ff_logit_out_W").T)
    tensors["final_logits_bias"] = with_pad(weights.pop("decoder_ff_logit_out_b").T).T
    for name, value in weights.items():
        side, layer, suffix = name.split("_", 2)
        hf = f"model.{side}.layers.{int(layer[1:]) - 1}.{HUGGING_FACE_NAMES[suffix]}"
        tensors[hf] = value.T.squeeze()
    if positions:
        d = options["dim-emb"]
        angles = np.array(
            [[p / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for p in range(positions)]
        )
        table = np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], 1)
        for side in ("encoder", "decoder"):
            tensors[f"model.{side}.embed_positions.weight"] = table.astype("float32")
    dtype = "float16" if float16 else "float32"
    tensors = {name: np.ascontiguousarray(value, dtype) for name, value in tensors.items()}
    safetensors.numpy.save_file(tensors, os.path.join(directory, "model.safetensors"))
    config = {
        "model_type": "marian",
        "d_model": options["dim-emb"],
        "encoder_layers": options["enc-depth"],
        "decoder_layers": options["dec-depth"],
        "encoder_attention_heads": options["transformer-heads"],
        "decoder_attention_heads": options["transformer-heads"],
        "encoder_ffn_dim": options["transformer-dim-ffn"],
        "decoder_ffn_dim": options["transformer-dim-ffn"],
        "activation_function": activation or options["transformer-ffn-activation"],
        "vocab_size": pad + 1,
        "decoder_vocab_size": pad + 1,
        "pad_token_id": pad,
        "decoder_start_token_id": pad,
        "eos_token_id": 0,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": shared,
        "tie_word_embeddings": tied,
        "max_position_embeddings": 512,
        "static_position_embeddings": True,
    }
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    for name in ["vocab.json"] + ([] if shared else ["target_vocab.json"]):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
    for name in ("source.spm", "target.spm"):
        shutil.copy(os.path.join(marian_dir, name), os.path.join(directory, name))
    return directory


# Marian's forward pass, written from its description (Junczys-Dowmunt et al., 2018) and
# the paper, for one sentence: every sum, scale and norm spelled out.


def _layer_norm(x, weights, name, pre, epsilon=1e-6):
    scale = weights.get(f"{name}_ln_scale_pre" if pre else f"{name}_ln_scale")
    bias = weights.get(f"{name}_ln_bias_pre" if pre else f"{name}_ln_bias")
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * scale[0] + bias[0]


def _attention(query, memory, weights, prefix, heads, causal):
    def project(x, letter):
        return x @ weights[f"{prefix}_W{letter}"] + weights[f"{prefix}_b{letter}"][0]

    q, k, v = project(query, "q"), project(memory, "k"), project(memory, "v")
    d = q.shape[-1]
    depth = d // heads
    out = []
    for h in range(heads):
        part = slice(h * depth, (h + 1) * depth)
        logits = q[:, part] @ k[:, part].T / np.sqrt(depth)  # (T, S)
        if causal:
            logits = np.where(np.tril(np.ones_like(logits)) > 0, logits, -np.inf)
        p = np.exp(logits - logits.max(-1, keepdims=True))
        out.append((p / p.sum(-1, keepdims=True)) @ v[:, part])
    return np.concatenate(out, -1) @ weights[f"{prefix}_Wo"] + weights[f"{prefix}_bo"][0]


def _sublayer(x, function, weights, norm_name, pre_norm, epsilon):
    if pre_norm:
        return x + function(_layer_norm(x, weights, norm_name, True, epsilon))
    return _layer_norm(x + function(x), weights, norm_name, False, epsilon)


def _sinusoids(length, d):
    """Marian's table: the sines of every frequency, then their cosines."""
    frequency = 10000.0 ** (-2 * np.arange(d // 2) / d)
    angles = np.arange(length)[:, None] * frequency[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], -1)


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "swish": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: x / (1 + np.exp(-1.702 * x)),  # Marian's
    "exact_gelu": np.vectorize(lambda x: x * (1 + math.erf(x / math.sqrt(2))) / 2),
}


def marian_log_probs(options, weights, source_ids, target_ids, epsilon=1e-6, activation=None):
    """log P(y_t | y_<t, x) over Marian's vocabulary for every position of `target_ids`
    (then EOS), given Marian ids; `source_ids` end with EOS (0). `epsilon` is the layer
    norms' (Hugging Face's copy adds 1e-5); `activation` replaces Marian's option."""
    d, heads = options["dim-emb"], options["transformer-heads"]
    pre = options["transformer-preprocess"] == "n"
    act = ACTIVATIONS[activation or options["transformer-ffn-activation"]]
    source_table = weights.get("Wemb", weights.get("encoder_Wemb"))
    target_table = weights.get("Wemb", weights.get("decoder_Wemb"))

    def ffn(prefix):
        def apply(x):
            inner = act(x @ weights[f"{prefix}_W1"] + weights[f"{prefix}_b1"][0])
            return inner @ weights[f"{prefix}_W2"] + weights[f"{prefix}_b2"][0]

        return apply

    def positions(length):
        return weights["Wpos"][:length] if "Wpos" in weights else _sinusoids(length, d)

    x = source_table[source_ids] * np.sqrt(d) + positions(len(source_ids))
    for layer in range(1, options["enc-depth"] + 1):
        p = f"encoder_l{layer}"
        x = _sublayer(
            x,
            lambda y, p=p: _attention(y, y, weights, f"{p}_self", heads, False),
            weights,
            f"{p}_self_Wo",
            pre,
            epsilon,
        )
        x = _sublayer(x, ffn(f"{p}_ffn"), weights, f"{p}_ffn_ffn", pre, epsilon)
    memory = _layer_norm(x, weights, "encoder_top", False, epsilon) if pre else x

    embedded = target_table[target_ids] * np.sqrt(d)
    y = np.concatenate([np.zeros((1, d)), embedded])  # the zero start, then y_1..y_T
    y = y + positions(len(y))
    for layer in range(1, options["dec-depth"] + 1):
        p = f"decoder_l{layer}"
        y = _sublayer(
            y,
            lambda z, p=p: _attention(z, z, weights, f"{p}_self", heads, True),
            weights,
            f"{p}_self_Wo",
            pre,
            epsilon,
        )
        y = _sublayer(
            y,
            lambda z, p=p: _attention(z, memory, weights, f"{p}_context", heads, False),
            weights,
            f"{p}_context_Wo",
            pre,
            epsilon,
        )
        y = _sublayer(y, ffn(f"{p}_ffn"), weights, f"{p}_ffn_ffn", pre, epsilon)
    if pre:
        y = _layer_norm(y, weights, "decoder_top", False, epsilon)
    output = weights.get("decoder_ff_logit_out_W", target_table.T)
    logits = y @ output + weights["decoder_ff_logit_out_b"][0]
    logits = logits - logits.max(-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))  # (T + 1, V)
