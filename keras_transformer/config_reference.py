"""The configuration reference: every key of the run configuration with its default,
the values it takes and what it does, as a Markdown page or as a commented YAML file.

Both are written from the schema (`config.DEFAULTS`, `config.RULES`) and the
descriptions of `HELP` and of the docstrings of `Transformer` and `DecodeOptions`
(the `model` and decoding keys), so they cannot drift from it: `docs/configuration.md` is
`keras-transformer config --markdown`.

Examples:
    ```python
    from keras_transformer.config import load_config
    print(yaml_template(load_config(overrides=["train.epochs=3"])))
    ```
"""

import inspect
import re
import textwrap

import yaml

from keras_transformer.config import DECODE_OPTIONS, DEFAULTS, NONE, RULES
from keras_transformer.inference import DecodeOptions
from keras_transformer.models import Transformer

# What each key does. The `model` keys are `Transformer`'s arguments and the decoding
# options `DecodeOptions`' fields: their docstrings describe them.
HELP = {
    "data": {
        "corpus": "Where the sentence pairs come from: `numbers` (built in: German number "
        "words and their English), `files` (`{split}.{lang}` or `.gz`, or shards "
        "`{split}-*.{lang}[.gz]`, in `data.directory`; the training split streams from "
        "disk), `tsv` (`source<TAB>target` lines of `data.path`, split 96/2/2 by a fixed "
        "shuffle) or `tfds` (the TensorFlow Datasets set `data.name`); null for none, as "
        "in an imported model's run until you fine-tune it on data of your own.",
        "directory": "The directory of a `files` corpus; environment variables in it "
        "(`${MULTI30K_DIR}`) are expanded.",
        "path": "The file of a `tsv` corpus, plain or `.gz`.",
        "name": "The TensorFlow Datasets name of a `tfds` corpus (downloaded by TFDS, "
        "which needs the `tfds` extra and a network).",
        "source_lang": "The source language's code, as in the file names (`train.de`).",
        "target_lang": "The target language's code.",
        "train_split": "The name of the split that trains the model and its tokenizers.",
        "val_split": "The split of validation loss, early stopping and the best checkpoint.",
        "test_split": "The split `evaluate` decodes unless told another.",
        "train_limit": "Train on the first N training pairs only (quick runs); null: all.",
        "max_length": "The longest source, and target, in tokens; longer training pairs "
        "are dropped or cut (`data.overflow`). Decoding is not limited by it.",
        "tokens_per_batch": "Tokens in a training batch: sentences of similar length are "
        "bucketed, and a batch padded to length L holds `tokens_per_batch // L` pairs. "
        "At least `data.max_length`.",
        "overflow": "What happens to a training pair longer than `data.max_length`: "
        "`drop` it, or `truncate` it (the source keeps its end-of-sentence token).",
    },
    "tokenizer": {
        "type": "`sentencepiece` (a unigram model; lossless) or `wordpiece` (WordPiece on "
        "words split at whitespace and punctuation, as in the TensorFlow tutorial; "
        "detokenized text has single spaces between words and punctuation). Both run in "
        "the graph (TensorFlow Text).",
        "vocab_size": "Pieces in each vocabulary, special tokens included.",
        "shared": 'One vocabulary for both languages (needed by `model.shared_embeddings: "all"`).',
        "sample_size": "Sentences drawn from the training split to train the tokenizers on.",
        "sampling_alpha": "Subword regularization (SentencePiece only): null tokenizes the "
        "training pairs once, with the best segmentation; a number samples a new "
        "segmentation of each sentence every epoch with this alpha (unigram: smoothing, "
        "0.1-0.5). Validation, evaluation and decoding always use the best segmentation.",
        "sampling_nbest_size": "With `tokenizer.sampling_alpha`, sample among the N best "
        "segmentations (-1: all).",
    },
    "train": {
        "epochs": "Passes over the training split. A larger value given to a finished "
        "run's `train` trains it on.",
        "warmup_steps": "Steps of the learning rate's linear warm-up, after which it "
        "decays with the inverse square root of the step (the paper's schedule, §5.3).",
        "learning_rate_scale": "A factor on the paper's learning rate "
        "`d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`.",
        "micro_batches": "Cut each training batch of N * `data.tokens_per_batch` tokens "
        "into N slices that run forward and backward one at a time, for one update: a "
        "larger batch in the same memory. Works with every strategy.",
        "label_smoothing": "The label smoothing of the loss (the paper's 0.1; 0: off).",
        "r_drop": "R-Drop's alpha (0: off): each batch runs twice with different dropout, "
        "and alpha/2 times the symmetric KL divergence of the two predictions joins the "
        "loss; a step costs 2 to 2.5 times as much.",
        "cooldown_epochs": "Bring the learning rate down linearly to 0 over the last N "
        "epochs (0: the paper's schedule to the end). At most `train.epochs`.",
        "patience": "Stop when the validation loss has not improved for N epochs "
        "(Keras' `EarlyStopping`).",
        "backup_every_steps": "Also back up the training state every N optimizer steps "
        "(0: at the end of each epoch only); a killed run then loses at most N steps.",
        "keep_checkpoints": "The newest N epoch checkpoints are kept (for `average`); the "
        "model of lowest validation loss is saved apart, whichever its epoch.",
        "mixed_precision": "`false`, `bfloat16` (`true` stands for it) or `float16`, "
        "with float32 variables. float16 scales the loss dynamically "
        "(`keras.optimizers.LossScaleOptimizer`) and skips the updates whose gradients "
        "overflow. bfloat16 is slow on CPUs without AVX-512 bfloat16 instructions.",
        "jit_compile": "XLA for the training step: `auto` (Keras' choice: on with an "
        "accelerator and no `tf.distribute` strategy, off on CPUs), `true` or `false`.",
        "strategy": "`auto`, `one_device`, `mirrored` (`train.devices` local replicas) or "
        "`multi_worker` (the cluster in `TF_CONFIG`); `auto` picks `multi_worker` when "
        "`TF_CONFIG` names more than one task.",
        "devices": "Local replicas of the `mirrored` strategy.",
        "seed": "The seed of weights, dropout and shuffling.",
    },
    "decode": {
        "batch_size": "Sentences decoded together by `evaluate`.",
        "shortlist": "A lexical shortlist (0: off): each batch decodes over this many "
        "target pieces, the union of its source pieces' `decode.shortlist_per_source` "
        "most frequent companions in the training pairs and the `decode.shortlist_frequent` "
        "most frequent target pieces (counted once from the training split and kept in "
        "the run directory).",
        "shortlist_per_source": "Target pieces each source piece brings into a shortlist.",
        "shortlist_frequent": "The most frequent target pieces every shortlist holds.",
    },
    "model": {  # the keys that are not `Transformer` arguments, or differ from them
        "num_layers": "Layers N of the encoder and of the decoder, unless the next two "
        "keys set a side's own.",
        "num_encoder_layers": "Encoder layers, if not `num_layers`.",
        "num_decoder_layers": "Decoder layers, if not `num_layers`. A deep encoder with a "
        "shallow decoder decodes faster for the same size (Kasai et al., 2021): the encoder "
        "runs once per sentence, the decoder once per output token.",
        "positions": "How the model tells where a token is (`keras_transformer.layers."
        "positions`): `sinusoidal` (the paper's fixed table), `learned` (a trained table of "
        "`max_positions` rows per side), `rotary` (the queries and keys of every "
        "self-attention rotated by their positions), `relative` (Shaw et al.'s learned "
        "vectors per distance, clipped at `max_relative_position`, added to the keys and "
        "values of every self-attention), `relative_bias` (T5's learned scalar per head and "
        "distance bucket, added to the logits) or `alibi` (a fixed slope per head times the "
        "distance, added to the logits; Press et al., 2022).",
        "positional_encoding_layout": '`"interleaved"` (paper) or `"concatenated"` (TF '
        "tutorial, Marian): how the sinusoidal table orders its sines and cosines.",
        "max_positions": "Rows of the learned table, the longest source or target the model "
        "reads; required with `positions: learned`.",
        "add_positions": "Where a table of positions enters each stack: `input` (the "
        "embeddings), `every_layer` (every layer's input too) or `queries_and_keys` (the "
        "query and key inputs of every self-attention, never the values); `input` for the "
        "schemes without a table.",
        "max_relative_position": "The distance k beyond which relative positions are clipped "
        "(2k + 1 vectors of keys and of values per layer); required with `positions: "
        "relative`.",
    },
}

SECTIONS = {
    "data": "The parallel corpus and how training batches are cut from it.",
    "tokenizer": "The subword tokenizers, trained on the training split when a run starts.",
    "model": "The arguments of `keras_transformer.Transformer`.",
    "train": "The optimizer, its schedule, the loss and how a run is kept.",
    "decode": "The decoding defaults of `evaluate`, `translate` and `export`; their "
    "command-line options override them for one call.",
}
TYPE_NAMES = {bool: "true/false", int: "integer", float: "number", str: "text", NONE: "null"}


def argument_help(function):
    """`{name: description}` of the arguments a Google-style docstring's `Args:`
    section describes; an entry for several names (`a, b: ...`) describes each."""
    lines = inspect.getdoc(function).splitlines()
    start = lines.index("Args:") + 1
    entries = {}
    names = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the next section
        entry = re.match(r"^ {4}(\*{0,2}\w[\w, ]*): ?(.*)$", line)
        if entry:
            names = [name.strip() for name in entry.group(1).split(",")]
            for name in names:
                entries[name] = entry.group(2)
        else:
            for name in names:
                entries[name] += " " + line.strip()
    return {name: " ".join(text.split()) for name, text in entries.items()}


def as_key_help(text):
    """An argument's description as a key's: a capital first letter, and no "Defaults
    to ..." sentence (the reference gives the configuration's default)."""
    text = re.sub(r" ?Defaults to [^.]*(\.[^ .][^.]*)*\.", "", text).strip()
    return text[:1].upper() + text[1:]


def key_help():
    """`{section: {key: description}}` for every key of the configuration."""
    described = {section: dict(keys) for section, keys in HELP.items()}
    model_help = argument_help(Transformer)
    described["model"] = {
        key: described["model"].get(key) or as_key_help(model_help[key]) for key in RULES["model"]
    }
    decode_help = argument_help(DecodeOptions)
    described["decode"].update({key: as_key_help(decode_help[key]) for key in DECODE_OPTIONS})
    return {
        section: {key: described[section].get(key) for key in RULES[section]} for section in RULES
    }


def missing_help():
    """The keys (`"section.key"`) that have no description."""
    return [
        f"{section}.{key}"
        for section, keys in key_help().items()
        for key, text in keys.items()
        if not text
    ]


def yaml_value(value):
    """`value` as YAML writes it on one line (`null`, `true`, `0.1`, `de`)."""
    return yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()


def allowed_values(rule):
    """What a key takes, as a phrase: `"a positive integer or null"`."""
    text = rule.description
    if NONE in rule.types and "null" not in text and "None" not in text:
        text += " or null"
    return text


def markdown():
    """The configuration reference page: a table per section of every key, its
    default, the values it takes and what it does."""
    described = key_help()
    lines = [
        "# Configuration",
        "",
        "Every option of a run, with its default. A configuration file (YAML or JSON) "
        "gives any subset of them by section; `--set section.key=value` overrides one "
        "(`train --set train.epochs=3`). `keras-transformer config` prints all of them "
        "as a YAML file to start from. A key that is not here, or a value it does not "
        "take, is an error that names the key.",
        "",
        "This page is written by `keras-transformer config --markdown`.",
    ]
    for section, rules in RULES.items():
        lines += ["", f"## {section}", "", SECTIONS[section], ""]
        lines += ["| key | default | takes | what it does |", "|---|---|---|---|"]
        for key, rule in rules.items():
            cells = [
                f"`{key}`",
                f"`{yaml_value(DEFAULTS[section][key])}`",
                allowed_values(rule),
                described[section][key],
            ]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def yaml_template(config=DEFAULTS):
    """`config` as a YAML file whose every key has its description as a comment."""
    described = key_help()
    lines = ["# keras-transformer run configuration (keras-transformer config)."]
    for section, rules in RULES.items():
        lines += ["", f"# {SECTIONS[section]}", f"{section}:"]
        for key, rule in rules.items():
            comment = f"{described[section][key]} Takes {allowed_values(rule)}."
            lines += textwrap.wrap(
                comment, 88, initial_indent="  # ", subsequent_indent="  # ", break_on_hyphens=False
            )
            lines.append(f"  {key}: {yaml_value(config[section][key])}")
    return "\n".join(lines) + "\n"
