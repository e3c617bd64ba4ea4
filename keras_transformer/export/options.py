"""The decoding options an export writes beside its model, as JSON, and reads back."""

import json
import os

from keras_transformer.errors import DamagedFileError


def write_options(directory, file_name, options):
    """Writes the dict `options` to `{directory}/{file_name}`."""
    with open(os.path.join(directory, file_name), "w", encoding="utf-8") as f:
        json.dump(options, f, indent=2)


def read_options(directory, file_name, engine):
    """The options `write_options` wrote, or a `FileNotFoundError` naming the export.

    Args:
        directory: the export's directory.
        file_name: its options file.
        engine: the export's name in the message, e.g. `"LiteRT"`.

    Examples:
        ```python
        read_options("saved_models/x-litert-float32", "litert.json", "LiteRT")["beam_size"]
        ```
    """
    path = os.path.join(directory, file_name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{os.fspath(directory)!r} is not a {engine} export of keras_transformer: "
            f"{file_name} is missing."
        )
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def open_export_file(directory, name, load, what, export_format):
    """`load(path)` of the file (or directory) `name` of an export, or an error naming it.

    Args:
        directory: the export's directory.
        name: the file's path in it.
        load: reads the file from its path.
        what: what the file holds, for the message: "a LiteRT model".
        export_format: the `export --format` that writes it again.

    Raises:
        FileNotFoundError: if the file is missing.
        DamagedFileError: if `load` cannot read it, naming the file.

    Examples:
        ```python
        open_export_file("x-litert", "source.model", SentencePieceProcessor, "a SentencePiece "
                         "model", "litert")
        ```
    """
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{os.fspath(directory)!r} is not a complete export: {name} is missing. "
            f"Export the run again: keras-transformer export --format {export_format}."
        )
    try:
        return load(path)
    except FileNotFoundError:
        raise
    except (RuntimeError, ValueError, OSError) as error:
        damaged, reason = path, str(error)
        if isinstance(error, DamagedFileError) and error.path:
            damaged, reason = error.path, "its bytes do not parse"
        raise DamagedFileError(
            f"{damaged} is damaged: it cannot be read as {what} ({reason[:160]}). "
            f"Export the run again: keras-transformer export --format {export_format}.",
            damaged,
        ) from None
