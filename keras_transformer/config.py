"""The run configuration: every data, model, training and decoding option, with defaults.

A configuration is a dict of sections. Files (YAML or JSON) and `key=value`
overrides replace defaults; unknown keys and values of the wrong type are
errors that name the key. The defaults train a small model on the built-in
numbers corpus (German number words to English) in about seven minutes on two CPU
cores.

Example:
```python
config = load_config("configs/multi30k_de_en.yaml", overrides=["train.epochs=3"])
config["model"]["d_model"]  # 256
```
"""

import copy
import json
import os

import yaml

DEFAULTS = {
    "data": {
        # numbers (built in) | files ({split}.{lang}[.gz] in `directory`) | tsv (`path`)
        # | tfds (`name`)
        "corpus": "numbers",
        "directory": None,
        "path": None,
        "name": None,
        "source_lang": "de",
        "target_lang": "en",
        "train_split": "train",
        "val_split": "val",
        "test_split": "test",
        "train_limit": None,  # use only the first N training pairs (quick runs)
        "max_length": 64,
        "tokens_per_batch": 2048,
        "overflow": "drop",
    },
    "tokenizer": {
        "type": "sentencepiece",  # sentencepiece | wordpiece
        "vocab_size": 500,
        "shared": True,  # one vocabulary for both languages
    },
    "model": {
        "num_layers": 3,
        "d_model": 128,
        "num_heads": 4,
        "dff": 512,
        "dropout_rate": 0.1,
        "attention_dropout_rate": 0.0,
        "norm_first": False,
        # null (separate) | output (target embedding = pre-softmax projection) | all
        "shared_embeddings": None,
    },
    "train": {
        "epochs": 6,
        "warmup_steps": 500,
        "learning_rate_scale": 1.0,
        "label_smoothing": 0.1,
        "patience": 3,
        # also back up the training state every N optimizer steps (0: at epoch ends only);
        # a killed run then loses at most N steps
        "backup_every_steps": 0,
        "keep_checkpoints": 5,
        "mixed_precision": False,
        "devices": 1,
        "seed": 0,
    },
    "decode": {
        "beam_size": 4,
        "alpha": 0.6,
        "max_length": 64,
        "batch_size": 64,
    },
}


BUILTIN_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


class ConfigError(ValueError):
    """A configuration key or value that is not allowed."""


def default_config():
    return copy.deepcopy(DEFAULTS)


def load_config(path=None, overrides=()):
    """Defaults, updated from a YAML/JSON file, then from `section.key=value` overrides.

    Args:
        path: optional configuration file (`.yaml`, `.yml` or `.json`), or the
            name of one shipped in `keras_transformer/configs` (e.g.
            `"multi30k_de_en"`); it may give any subset of the keys.
        overrides: strings `"section.key=value"`; the value is parsed as YAML
            (`3`, `0.1`, `true`, `null`, `de`).

    Returns:
        The full configuration dict.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ConfigError: on unknown keys, values of the wrong type, or bad syntax.
    """
    config = default_config()
    if path is not None:
        path = builtin_config_path(path)
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
    return config


def builtin_config_path(name):
    """The path of a config shipped with the package (`multi30k_de_en`), else `name`."""
    builtin = os.path.join(BUILTIN_CONFIGS, f"{name}.yaml")
    return builtin if os.path.isfile(builtin) and not os.path.exists(name) else name


def set_value(config, dotted, value):
    """Sets `config[section][key]` from `"section.key"`, checking name and type."""
    section, _, key = dotted.partition(".")
    if section not in DEFAULTS or key not in DEFAULTS[section]:
        valid = ", ".join(f"{s}.{k}" for s in DEFAULTS for k in DEFAULTS[s])
        raise ConfigError(f"Unknown config key {dotted!r}. Valid keys: {valid}")
    default = DEFAULTS[section][key]
    if default is not None and value is not None:
        expected = float if isinstance(default, float) else type(default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ConfigError(
                f"Config key {dotted!r} must be of type {expected.__name__}. Received: {value!r}"
            )
    elif default is not None and value is None:
        raise ConfigError(f"Config key {dotted!r} needs a value. Received: null")
    config[section][key] = value


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
            set_value(config, f"{section}.{key}", value)
    return config
