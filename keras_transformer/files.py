"""Files on disk: digests shared by the run directory and the multi-worker checks, and
text read as UTF-8 lines, with one message for a byte that is not UTF-8 wherever text
comes from (a file, standard input, the command line, a Python list)."""

import gzip
import hashlib
import os

from keras_transformer.errors import ArgumentError


def tree_digest(directory):
    """SHA-256 (hex) of the relative names and the bytes of the files under `directory`.

    Examples:
        ```python
        tree_digest("runs/a/tokenizers") == tree_digest("runs/b/tokenizers")  # same vocabulary
        ```
    """
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def decode_lines(raw_lines, where):
    """Byte lines as `str`, without their line ends, or an `ArgumentError` naming the
    first that is not UTF-8.

    Args:
        raw_lines: an iterable of `bytes`, one line each (a binary file).
        where: what the lines are in the message, e.g. `"'train.de'"` or
            `"standard input"`.

    Examples:
        ```python
        decode_lines([b"eins\\n", b"zwei"], "standard input")  # ['eins', 'zwei']
        decode_lines([b"\\xff"], "standard input")  # ArgumentError: line 1 ... position 0
        ```
    """
    lines = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ArgumentError(
                f"{where} is not UTF-8: line {number} has an invalid byte at "
                f"position {error.start}: {raw[:80]!r}"
            ) from None
        lines.append(line.rstrip("\r\n"))
    return lines


def read_lines(path):
    """Lines of a UTF-8 text file (plain or `.gz`), without their line ends.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ArgumentError: if a line is not UTF-8; the message names the file and line.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Text file not found: {path!r}")
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        return decode_lines(f, repr(os.fspath(path)))


def text_items(texts, name="sentences"):
    """`texts` as a list of `str`: bytes decoded as UTF-8, and an `ArgumentError` naming
    the first item that is not text or holds a byte that is not UTF-8.

    A `str` holds such a byte as a lone surrogate when it was decoded with
    `errors="surrogateescape"`, as Python decodes the command line.

    Args:
        texts: a list or tuple of `str` or `bytes`.
        name: the argument's name in the message.

    Examples:
        ```python
        text_items(["eins", b"zwei"])  # ['eins', 'zwei']
        text_items(["\\udcff"])  # ArgumentError: item 0 is not UTF-8 ... position 0
        ```
    """
    items = []
    for number, text in enumerate(texts):
        if not isinstance(text, (str, bytes)):
            raise ArgumentError(
                f"`{name}` must be a list of strings (B,). Received: an item {text!r:.80}"
            )
        try:
            text = text.decode("utf-8") if isinstance(text, bytes) else text
            text.encode("utf-8")  # a lone surrogate stands for a byte that was not UTF-8
        except UnicodeError as error:
            raise ArgumentError(
                f"`{name}` item {number} is not UTF-8: it has an invalid byte at "
                f"position {error.start}: {text[:80]!r}"
            ) from None
        items.append(text)
    return items
