"""The run configuration: every data, model, training and decoding option, with defaults.

A configuration is a dict of sections. Files (YAML or JSON) and `key=value`
overrides replace defaults; unknown keys, and values of the wrong type or out
of range (`RULES`), are errors that name the key. The `model` section holds
the arguments of `Transformer` with its defaults, and `decode` the decoding
defaults of `keras_transformer.inference`. The defaults train a small model
on the built-in numbers corpus (German number words to English).

Examples:
    ```python
    config = load_config("configs/multi30k_de_en.yaml", overrides=["train.epochs=3"])
    config["model"]["d_model"]  # 256
    ```
"""

import copy
import difflib
import inspect
import json
import math
import os
import warnings
from typing import NamedTuple

import yaml

from keras_transformer.datasets.splits import CORPUS_KINDS
from keras_transformer.errors import ConfigError
from keras_transformer.inference import DecodeOptions
from keras_transformer.inference.options import OPTION_RULES
from keras_transformer.layers import positions as position_schemes
from keras_transformer.layers.positional_encoding import LAYOUTS
from keras_transformer.model_section import (
    DEPTH_KEYS,
    MODEL_ARGUMENTS,
    POSITION_KEYS,
    model_arguments,
)
from keras_transformer.models import Transformer
from keras_transformer.models.transformer import SHARED_EMBEDDINGS
from keras_transformer.text import TOKENIZER_TYPES
from keras_transformer.training.strategy import STRATEGIES


def signature_defaults(function, names):
    """`{name: default}` of the parameters `names` of `function`."""
    parameters = inspect.signature(function).parameters
    return {name: parameters[name].default for name in names}


# The `DecodeOptions` a run's `decode` section holds, with their defaults.
DECODE_OPTIONS = DecodeOptions.names(config=True)
DECODE_DEFAULTS = DecodeOptions()
MODEL_SIZES = {"num_layers": 3, "d_model": 128, "num_heads": 4, "dff": 512}

DEFAULTS = {
    "data": {
        "corpus": "numbers",
        "directory": None,
        "path": None,
        "name": None,
        "source_lang": "de",
        "target_lang": "en",
        "train_split": "train",
        "val_split": "val",
        "test_split": "test",
        "train_limit": None,
        "max_length": 64,
        "tokens_per_batch": 2048,
        "overflow": "drop",
    },
    "tokenizer": {
        "type": "sentencepiece",
        "vocab_size": 500,
        "shared": True,
        "sample_size": 2_000_000,
        "sampling_alpha": None,
        "sampling_nbest_size": -1,
    },
    "model": {
        **signature_defaults(Transformer, MODEL_ARGUMENTS),
        **MODEL_SIZES,
        **DEPTH_KEYS,
        **POSITION_KEYS,
    },
    "train": {
        "epochs": 6,
        "warmup_steps": 500,
        "learning_rate_scale": 1.0,
        "micro_batches": 1,
        "label_smoothing": 0.1,
        "r_drop": 0.0,
        "cooldown_epochs": 0,
        "patience": 3,
        "backup_every_steps": 0,
        "keep_checkpoints": 5,
        "mixed_precision": False,
        "jit_compile": "auto",
        "strategy": "auto",
        "devices": 1,
        "seed": 0,
    },
    "decode": {
        **{name: getattr(DECODE_DEFAULTS, name) for name in DECODE_OPTIONS},
        "batch_size": 64,
        "shortlist": 0,
        "shortlist_per_source": 20,
        "shortlist_frequent": 256,
    },
}

NONE = type(None)


class Rule(NamedTuple):
    """What a config value may be: Python types, a description and a test."""

    types: tuple
    description: str
    test: object = None

    def problem(self, value):
        """Why `value` breaks the rule (a phrase to follow "must be"), or None."""
        if isinstance(value, bool) is not (bool in self.types) and object not in self.types:
            return self.type_problem()
        if not isinstance(value, self.types):
            return self.type_problem()
        if value is not None and self.test is not None and not self.test(value):
            return self.description
        return None

    def type_problem(self):
        names = " or ".join("null" if t is NONE else t.__name__ for t in self.types)
        return f"of type {names}: {self.description}"


def one_of(*choices):
    names = ", ".join("null" if choice is None else repr(choice) for choice in choices)
    return Rule((object,), f"one of {names}", lambda v: v in choices)


def optional(rule):
    return Rule((*rule.types, NONE), f"{rule.description} or null", rule.test)


def decode_rule(name):
    """The rule of the decoding option `name`, which `DecodeOptions` checks by
    (`inference.options.OPTION_RULES`)."""
    rule = OPTION_RULES[name]
    types = (rule.kind, NONE) if rule.optional else (rule.kind,)
    return Rule(types, rule.description, lambda v: rule.problem(v) is None)


TEXT = Rule((str,), "a non-empty string", lambda v: v.strip() != "")
POSITIVE_INT = Rule((int,), "a positive integer", lambda v: v > 0)
COUNT = Rule((int,), "an integer >= 0", lambda v: v >= 0)
POSITIVE = Rule((float,), "a number > 0", lambda v: v > 0)
RATE = Rule((float,), "a number in [0, 1)", lambda v: 0 <= v < 1)
NON_NEGATIVE = Rule((float,), "a finite number >= 0", lambda v: 0 <= v < math.inf)
FLAG = Rule((bool,), "true or false")
# train.mixed_precision -> the Keras dtype policy it trains under
MIXED_PRECISION_POLICIES = {
    True: "mixed_bfloat16",
    "bfloat16": "mixed_bfloat16",
    "float16": "mixed_float16",
}

RULES = {
    "data": {
        "corpus": one_of(*CORPUS_KINDS, None),
        "directory": Rule((str, NONE), "a directory or null"),
        "path": Rule((str, NONE), "a file path or null"),
        "name": Rule((str, NONE), "a TensorFlow Datasets name or null"),
        "source_lang": TEXT,
        "target_lang": TEXT,
        "train_split": TEXT,
        "val_split": TEXT,
        "test_split": TEXT,
        "train_limit": optional(POSITIVE_INT),
        "max_length": POSITIVE_INT,
        "tokens_per_batch": POSITIVE_INT,
        "overflow": one_of("drop", "truncate"),
    },
    "tokenizer": {
        "type": one_of(*TOKENIZER_TYPES),
        "vocab_size": POSITIVE_INT,
        "shared": FLAG,
        "sample_size": POSITIVE_INT,
        "sampling_alpha": optional(NON_NEGATIVE),
        "sampling_nbest_size": Rule((int,), "-1 or an integer > 1", lambda v: v == -1 or v > 1),
    },
    "model": {
        "num_layers": POSITIVE_INT,
        "d_model": POSITIVE_INT,
        "num_heads": POSITIVE_INT,
        "dff": POSITIVE_INT,
        "dropout_rate": RATE,
        "attention_dropout_rate": RATE,
        "norm_first": FLAG,
        "layer_norm_epsilon": POSITIVE,
        "activation": TEXT,
        "shared_embeddings": one_of(*SHARED_EMBEDDINGS),
        "positions": one_of(*position_schemes.SCHEMES),
        "start_from_zero_embedding": FLAG,
        "num_encoder_layers": optional(POSITIVE_INT),
        "num_decoder_layers": optional(POSITIVE_INT),
        "positional_encoding_layout": one_of(*LAYOUTS),
        "max_positions": optional(POSITIVE_INT),
        "add_positions": one_of(*position_schemes.PLACEMENTS),
        "max_relative_position": optional(POSITIVE_INT),
    },
    "train": {
        "epochs": POSITIVE_INT,
        "warmup_steps": POSITIVE_INT,
        "learning_rate_scale": POSITIVE,
        "micro_batches": POSITIVE_INT,
        "label_smoothing": RATE,
        "r_drop": NON_NEGATIVE,
        "cooldown_epochs": COUNT,
        "patience": COUNT,
        "backup_every_steps": COUNT,
        "keep_checkpoints": POSITIVE_INT,
        "mixed_precision": Rule(
            (object,),
            "false, true (bfloat16), bfloat16 or float16",
            lambda v: v is False or v is True or v in ("bfloat16", "float16"),
        ),
        "jit_compile": Rule(
            (object,), "auto, true or false", lambda v: v is True or v is False or v == "auto"
        ),
        "strategy": one_of(*STRATEGIES),
        "devices": POSITIVE_INT,
        "seed": COUNT,
    },
    "decode": {
        **{name: decode_rule(name) for name in DECODE_OPTIONS},
        "batch_size": POSITIVE_INT,
        "shortlist": COUNT,
        "shortlist_per_source": POSITIVE_INT,
        "shortlist_frequent": POSITIVE_INT,
    },
}


BUILTIN_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


def default_config():
    return copy.deepcopy(DEFAULTS)


def load_config(path=None, overrides=(), base=None):
    """Defaults (or `base`), updated from a YAML/JSON file, then from `section.key=value`
    overrides.

    Args:
        path: optional configuration file (`.yaml`, `.yml` or `.json`), or the
            name of one shipped in `keras_transformer/configs` (e.g.
            `"multi30k_de_en"`); it may give any subset of the keys.
        overrides: strings `"section.key=value"`; the value is parsed as YAML
            (`3`, `0.1`, `true`, `null`, `de`).
        base: the configuration to update instead of the defaults, such as a run's
            saved one (`read_saved_config`).

    Returns:
        The full configuration dict.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ConfigError: on unknown keys, values of the wrong type, bad syntax,
            more cool-down epochs than epochs, or a token budget smaller than
            the longest sentence.
    """
    config = copy.deepcopy(base) if base is not None else default_config()
    if path is not None:
        path = os.fspath(builtin_config_path(path))  # a str or a pathlib.Path
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Config file not found: {path!r}")
        with open(path, encoding="utf-8") as f:
            try:
                given = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
            except (json.JSONDecodeError, yaml.YAMLError) as error:
                raise ConfigError(f"Could not parse {path!r}: {error}") from None
        if not isinstance(given, dict):
            raise ConfigError(f"{path!r} must hold a mapping of sections, got {type(given)}")
        for section, values in given.items():
            if not isinstance(values, dict):
                raise ConfigError(f"Section {section!r} in {path!r} must be a mapping")
            for key, value in values.items():
                set_value(config, f"{section}.{key}", value)
    for override in overrides:
        if "=" not in override:
            raise ConfigError(f"Overrides look like section.key=value. Received: {override!r}")
        dotted, raw = override.split("=", 1)
        set_value(config, dotted.strip(), yaml.safe_load(raw) if raw.strip() else None)
    check_decode_section(config["decode"])
    check_model_positions(config)
    t = config["train"]
    if t["cooldown_epochs"] > t["epochs"]:
        raise ConfigError(
            "train.cooldown_epochs must be at most train.epochs. Received: "
            f"cooldown_epochs={t['cooldown_epochs']}, epochs={t['epochs']}"
        )
    data = config["data"]
    if data["tokens_per_batch"] < data["max_length"]:
        raise ConfigError(
            "data.tokens_per_batch must be at least data.max_length, so that a batch holds "
            f"one sentence of the longest length. Received: tokens_per_batch="
            f"{data['tokens_per_batch']}, max_length={data['max_length']}"
        )
    return config


def check_model_positions(config):
    """A `ConfigError` where the position keys do not go together (`model_arguments`) or a
    learned table is shorter than the sentences the run trains on or decodes."""
    model, data, decode = config["model"], config["data"], config["decode"]
    try:
        limit = model_arguments(model)["positions"].max_positions
    except ValueError as error:
        raise ConfigError(f"The model section's positions do not go together: {error}") from None
    lengths = {
        "data.max_length": data["max_length"],
        "decode.max_length": decode["max_length"],
    }
    if limit is not None and max(lengths.values()) > limit:
        received = ", ".join(f"{key}={value}" for key, value in lengths.items())
        raise ConfigError(
            f"model.max_positions={limit} is shorter than the sentences "
            f"the run reads: {received}. Raise it or lower those."
        )


def check_decode_section(decode):
    """A `ConfigError` where the `decode` options do not go together (`DecodeOptions`)."""
    try:
        section_options(decode)
    except ValueError as error:
        raise ConfigError(f"The decode section's options do not go together: {error}") from None


def decode_options(config, **given):
    """A run's `DecodeOptions`: its configuration's `decode` section, with the options
    `given` by name in their place.

    An option given as None is one not given (a command-line flag left out):
    it keeps the section's value, or the default of an option the section
    does not hold (`n_best`, the sampling options).

    Args:
        config: a run's configuration (`load_config`, `RunDirectory.read_config`).
        **given: fields of `DecodeOptions`.

    Examples:
        ```python
        options = decode_options(config, beam_size=1, max_length=None)
        options.max_length == config["decode"]["max_length"]  # True
        ```
    """
    return section_options(config["decode"]).replace_given(**given)


def section_options(decode):
    """The `DecodeOptions` a `decode` section holds, the others at their defaults."""
    return DecodeOptions(**{name: decode[name] for name in DECODE_OPTIONS})


def builtin_config_path(name):
    """The path of a config shipped with the package (`multi30k_de_en`), else `name`."""
    builtin = os.path.join(BUILTIN_CONFIGS, f"{name}.yaml")
    return builtin if os.path.isfile(builtin) and not os.path.exists(name) else name


# Keys of earlier releases, read as the keys that replaced them.
RENAMED = {"train.gradient_accumulation_steps": "train.micro_batches"}


def set_value(config, dotted, value, warn_renamed=True):
    """Sets `config[section][key]` from `"section.key"`, checking name, type and range.

    A key of `RENAMED` sets its new key, with a `FutureWarning` unless
    `warn_renamed` is False (a saved run's config, which the user did not write).
    """
    if dotted in RENAMED:
        if warn_renamed:
            warnings.warn(
                f"The config key {dotted!r} is now {RENAMED[dotted]!r}; it still works.",
                FutureWarning,
                stacklevel=2,
            )
        dotted = RENAMED[dotted]
    section, _, key = dotted.partition(".")
    if section not in RULES or key not in RULES[section]:
        keys = [f"{s}.{k}" for s in RULES for k in RULES[s]]
        close = difflib.get_close_matches(dotted, keys, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"Unknown config key {dotted!r}.{hint} `keras-transformer config` lists every "
            f"key. Valid keys: {', '.join(keys)}"
        )
    rule = RULES[section][key]
    if float in rule.types:
        value = as_float(value)
    problem = rule.problem(value)
    if problem is not None:
        raise ConfigError(f"Config key {dotted!r} must be {problem}. Received: {value!r}")
    config[section][key] = value


def as_float(value):
    """Integers and numeric strings ("1e-6", which YAML reads as text) as floats."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def save_config(config, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)


def read_saved_config(path):
    """A run's saved config, checked against the current schema."""
    with open(path, encoding="utf-8") as f:
        saved = json.load(f)
    config = default_config()
    for section, values in saved.items():
        for key, value in values.items():
            set_value(config, f"{section}.{key}", value, warn_renamed=False)
    return config
