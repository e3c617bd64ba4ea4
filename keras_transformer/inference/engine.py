"""The interface every translation engine of the package shares, and its result.

An engine is the package's `Translator`, a loaded SavedModel
(`export.SavedModelTranslator`) or a runtime of an export
(`export.LiteRTTranslator`, `export.CTranslate2Translator`);
`run.open_engine(path)` opens any of them from its path. Each one translates a
batch with `translate(sentences, prefixes=None, constraints=None)` and returns
the same `Translations`: texts as Python `str` `(B, N)`, scores as floats
`(B, N)` (log P / GNMT length penalty, best first) and which sources were cut
to the engine's `max_source_length` `(B,)`. An engine that cannot honour an
argument refuses it by name (`refuse_arguments`), so switching engines is a
change of the line that makes one.

    engine       prefixes  constraints  n-best
    Translator   yes       yes          yes
    SavedModel   no        no           yes (fixed at export)
    LiteRT       no        no           no (fixed at export)
    CTranslate2  yes       no           yes
"""

import collections.abc
import dataclasses
from typing import Protocol

import numpy as np

from keras_transformer.errors import ArgumentError


@dataclasses.dataclass(frozen=True, eq=False)
class Translations(collections.abc.Mapping):
    """What every engine's `translate` returns: NumPy arrays of Python values.

    Also a read-only mapping of its three fields by name
    (`result["translations"]`), as the engines' dicts were.

    Attributes:
        translations: `str` `(B, N)`, the N best translations of each
            sentence, best first.
        scores: float32 `(B, N)`, their log-probabilities over the GNMT length
            penalty.
        truncated: bool `(B,)`, the sources cut to the engine's
            `max_source_length`.

    Examples:
        >>> result = Translations.of([[b"two", b"second"]], [[-0.1, -2.5]], [False])
        >>> result.best, result.hypotheses()
        (['two'], [[('two', -0.1), ('second', -2.5)]])
    """

    translations: np.ndarray
    scores: np.ndarray
    truncated: np.ndarray

    @classmethod
    def of(cls, translations, scores, truncated):
        """`Translations` of tensors, arrays or nested lists (bytes read as UTF-8)."""
        texts = translations_of(translations)
        rows = len(texts)
        width = texts.shape[1] if texts.ndim == 2 else 1
        return cls(
            translations=texts.reshape(rows, width),
            scores=np.asarray(scores, np.float32).reshape(rows, width),
            truncated=np.asarray(truncated, bool).reshape(rows),
        )

    @property
    def best(self):
        """The best translation of each sentence: a list of `str`."""
        return [str(row[0]) for row in self.translations]

    def hypotheses(self):
        """Per sentence, its `(translation, score)` pairs, best first, as Python values."""
        return [
            [(str(text), float(score)) for text, score in zip(texts, scores, strict=True)]
            for texts, scores in zip(self.translations, self.scores, strict=True)
        ]

    def __getitem__(self, name):
        if name not in ("translations", "scores", "truncated"):
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(("translations", "scores", "truncated"))

    def __len__(self):
        return 3


class Engine(Protocol):
    """What `inference.translate_lines_with_scores` and the command line call on any engine."""

    max_source_length: int

    def translate(self, sentences, prefixes=None, constraints=None) -> Translations:
        """The `Translations` of `sentences` `(B,)`."""

    def truncated(self, sentences):
        """Which of `sentences` `(B,)` the engine cuts to `max_source_length`: bool `(B,)`."""


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
                f"{type(engine).__name__} does not take `{name}`: {reason}. Translate with "
                f"`keras_transformer.Translator` (or the SavedModel's signatures) for `{name}`."
            )


def translations_of(values):
    """Texts of a tensor, array or nested list of bytes or `str` as `str`, same shape.

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
