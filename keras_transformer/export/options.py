"""The decoding options an export writes beside its model, as JSON, and reads back."""

import json
import os


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
