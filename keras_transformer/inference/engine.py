"""The interface every translation engine of the package shares.

An engine is the package's `Translator`, or a runtime of an export
(`export.LiteRTTranslator`, `export.CTranslate2Translator`). Each one
translates a batch with `translate(sentences, prefixes=None, constraints=None)`
and returns the same dict: `"translations"` `(B, N)`, `"scores"` `(B, N)`
(log P / GNMT length penalty, best first) and `"truncated"` `(B,)`, the
sources cut to the engine's `max_source_length`. `Translator` gives
TensorFlow tensors (strings as bytes), the runtimes NumPy arrays (strings as
`str`); `translations_of` reads either. An engine that cannot honour an
argument refuses it by name (`refuse_arguments`), so switching engines is a
change of the line that makes one.

    engine      prefixes  constraints  n-best
    Translator  yes       yes          yes
    LiteRT      no        no           no (fixed at export)
    CTranslate2 yes       no           yes
"""

from typing import Protocol

import numpy as np

from keras_transformer.errors import ArgumentError


class Engine(Protocol):
    """What `inference.translate_lines_with_scores` and the CLI call on any engine."""

    max_source_length: int

    def translate(self, sentences, prefixes=None, constraints=None):
        """`{"translations": (B, N), "scores": (B, N), "truncated": (B,)}`."""


def refuse_arguments(engine, reason, **given):
    """An `ArgumentError` naming the first of `given` that is not None, which `engine`
    cannot honour for `reason`.

    Examples:
        ```python
        refuse_arguments(self, "its search is fixed at export", prefixes=prefixes)
        ```
    """
    for name, value in given.items():
        if value is not None:
            raise ArgumentError(
                f"{type(engine).__name__} does not take `{name}`: {reason}. Translate "
                f"with `keras_transformer.Translator` (or the SavedModel) for `{name}`."
            )


def translations_of(values):
    """Translations of any engine (a tensor or array of bytes or `str`) as `str`, same shape.

    Examples:
        >>> translations_of(np.array([[b"zwei"], [b""]], object)).tolist()
        [['zwei'], ['']]
    """
    values = np.asarray(values, dtype=object)
    decode = np.vectorize(
        lambda v: v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v,
        otypes=[object],
    )
    return decode(values) if values.size else values


def engine_result(translations, scores, truncated):
    """The `translate` dict of a runtime from Python lists: `(B, N)`, `(B, N)`, `(B,)`."""
    rows = len(translations)
    width = len(translations[0]) if rows else 1
    texts = np.empty((rows, width), object)
    for row, texts_of_row in enumerate(translations):
        texts[row, :] = texts_of_row
    return {
        "translations": texts,
        "scores": np.asarray(scores, np.float32).reshape(rows, width),
        "truncated": np.asarray(truncated, bool).reshape(rows),
    }
