"""The tokenizer types by name: training one from a config, loading any from disk."""

import json
import os

from keras_transformer.errors import ArgumentError, DamagedFileError
from keras_transformer.text.marian_tokenizer import MarianTokenizer
from keras_transformer.text.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_transformer.text.tokenizer import CONFIG_FILE
from keras_transformer.text.wordpiece_tokenizer import WordPieceTokenizer

TOKENIZER_TYPES = {
    tokenizer.type_name: tokenizer
    for tokenizer in (SentencePieceTokenizer, WordPieceTokenizer, MarianTokenizer)
}
"""The tokenizer classes by their `type_name` (the config's `tokenizer.type`)."""


def tokenizer_class(type_name):
    """The tokenizer class named `type_name` (`"sentencepiece"` or `"wordpiece"`)."""
    if type_name not in TOKENIZER_TYPES:
        raise ArgumentError(
            f"Unknown tokenizer type. Expected one of {sorted(TOKENIZER_TYPES)}. "
            f"Received: type={type_name!r}"
        )
    return TOKENIZER_TYPES[type_name]


def train_tokenizer(type_name, texts, vocab_size):
    """Trains a tokenizer of the type named `type_name` on `texts`.

    Args:
        type_name: a key of `TOKENIZER_TYPES`.
        texts: a list of strings.
        vocab_size: number of ids, the special ones included.

    Examples:
        ```python
        tokenizer = train_tokenizer("sentencepiece", ["a cat", "a dog"] * 50, vocab_size=20)
        ```
    """
    return tokenizer_class(type_name).train(texts, vocab_size=vocab_size)


def load_tokenizer(directory):
    """Loads any tokenizer written by `Tokenizer.save`.

    Args:
        directory: the directory holding `tokenizer.json` and the asset file.

    Returns:
        The tokenizer, of the class named in `tokenizer.json`.

    Raises:
        FileNotFoundError: if the directory or one of its files is missing.
        ValueError: if `tokenizer.json` names an unknown tokenizer type.
    """
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"No tokenizer in {directory!r}: {CONFIG_FILE} is missing.")
    with open(config_path, encoding="utf-8") as f:
        try:
            saved = json.load(f)
        except json.JSONDecodeError as error:
            raise DamagedFileError(
                f"The tokenizer file {config_path} is damaged: {error}", config_path
            ) from None
    try:
        cls = tokenizer_class(saved.get("type"))
    except ValueError as error:
        raise ArgumentError(f"{config_path}: {error}") from None
    asset_path = os.path.join(directory, saved["asset"])
    if not os.path.isfile(asset_path):
        raise FileNotFoundError(f"Tokenizer asset {asset_path!r} is missing.")
    try:
        return cls.from_asset(asset_path, **saved["config"])
    except ArgumentError as error:
        raise DamagedFileError(
            f"The tokenizer file {asset_path} is damaged: {error}. Restore it, or train a "
            "new tokenizer (and model) in a new run directory.",
            asset_path,
        ) from None
