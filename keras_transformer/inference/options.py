"""`DecodeOptions`: every option of a search, in one frozen type checked where it is built,
and the checks of each option.

`Translator`, the configuration's `decode` section and the options files the
exports write beside their models all take their fields and defaults from here.
"""

import dataclasses
import math
import numbers
from typing import NamedTuple

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.defaults import ALPHA, BEAM_SIZE, MAX_LENGTH
from keras_transformer.validation import check_at_least, check_positive_int

# The version of the dict `DecodeOptions.to_dict` writes; a dict without one was
# written before the type existed, and its missing fields take their defaults.
FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class DecodeOptions:
    """The options of a search: lengths, beam, repetition, patience and sampling.

    Built once and checked then: an option out of range, or two that do not
    go together (`n_best` above `beam_size` without sampling, `min_length`
    not below `max_length`), raise an `ArgumentError` naming them.

    Args:
        beam_size: 1 for greedy search, more for beam search.
        alpha: length penalty of beam search (and of the scores reported).
        max_length: most target tokens to generate, EOS included.
        max_source_length: longest source in tokens, EOS included; longer
            sources are cut to it (`keras_transformer.text.SourcePolicy`).
        n_best: hypotheses returned per sentence: the N best of beam search
            (at most `beam_size`), or N samples.
        patience: None to end beam search when its output is certain; P >= 1
            to also end a sentence once P * `beam_size` hypotheses have ended.
        max_length_a, max_length_b: an output has at most
            `max_length_a * source tokens + max_length_b` tokens (`max_length_b`
            None: `max_length`).
        min_length: fewest tokens before EOS.
        no_repeat_ngram_size: no n-gram of this many tokens twice (0: no rule).
        sample: draw tokens at random instead of searching.
        temperature, top_k, top_p, seed: the sampling options
            (`inference.sample`).

    Examples:
        >>> options = DecodeOptions(beam_size=6, alpha=1.0)
        >>> options.replace(beam_size=1).beam_size
        1
        >>> DecodeOptions.from_dict(options.to_dict()) == options
        True
    """

    beam_size: int = BEAM_SIZE
    alpha: float = ALPHA
    max_length: int = MAX_LENGTH
    max_source_length: int = 256
    n_best: int = 1
    patience: float | None = None
    max_length_a: float = 0.0
    max_length_b: int | None = None
    min_length: int = 0
    no_repeat_ngram_size: int = 0
    sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self):
        check_beam_options(self.max_length, self.beam_size, self.alpha, None, self.patience)
        check_positive_int("max_source_length", self.max_source_length)
        check_positive_int("n_best", self.n_best)
        check_length_options(self.length_options, self.max_length)
        if self.sample:
            check_sampling(self.temperature, self.top_k, self.top_p)
        elif self.n_best > self.beam_size:
            raise ArgumentError(
                "`n_best` can be at most `beam_size` (or use `sample=True`). "
                f"Received: n_best={self.n_best}, beam_size={self.beam_size}"
            )

    @classmethod
    def names(cls):
        """The options' names, in order."""
        return [field.name for field in dataclasses.fields(cls)]

    @property
    def length_options(self):
        """The length and repetition options, as the searches take them."""
        return LengthOptions(
            self.max_length_a, self.max_length_b, self.min_length, self.no_repeat_ngram_size
        )

    def replace(self, **changes):
        """A copy with `changes`, checked; an unknown name is an `ArgumentError`."""
        unknown_names("decoding option", changes, self.names())
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The options as a JSON-ready dict, with the format's version."""
        return {"format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, values, others=()):
        """Options from a dict `to_dict` wrote, or one written before it had a version.

        Args:
            values: a mapping of option names (and `format_version`).
            others: keys that `values` may hold beside the options (an
                export's own, such as `quantization`); they are left out.
        """
        version = values.get("format_version", 0)
        if version > FORMAT_VERSION:
            raise ArgumentError(
                f"These decoding options were written in format {version}; this release "
                f"reads formats up to {FORMAT_VERSION}. Upgrade keras-transformer-nmt."
            )
        options = {k: v for k, v in values.items() if k not in (*others, "format_version")}
        unknown_names("decoding option", options, cls.names())
        return cls(**options)


def unknown_names(what, given, known):
    """An `ArgumentError` naming the first key of `given` that is not in `known`."""
    for name in given:
        if name not in known:
            raise ArgumentError(f"Unknown {what} {name!r}. Known: {', '.join(known)}")


class LengthOptions(NamedTuple):
    """The length and repetition options every search takes.

    Attributes:
        max_length_a, max_length_b: an output has at most
            `max_length_a * source_length + max_length_b` tokens, EOS
            included (source length in tokens, its EOS included), and never
            more than `max_length`. `max_length_b=None` stands for
            `max_length`; with `max_length_a=0` (the default) that is no
            limit beyond `max_length`.
        min_length: the fewest tokens an output has before its EOS.
        no_repeat_ngram_size: n > 0 forbids an output to hold the same
            n tokens in a row twice (a target prefix is part of the output).

    Examples:
        ```python
        options = LengthOptions(max_length_a=1.5, max_length_b=10, no_repeat_ngram_size=3)
        ```
    """

    max_length_a: float = 0.0
    max_length_b: object = None
    min_length: int = 0
    no_repeat_ngram_size: int = 0


def lengths_of(length_options):
    """`length_options` (`inference.LengthOptions`, a tuple of its fields, or None) as
    `DecodeOptions` fields."""
    return LengthOptions(*(length_options or ()))._asdict()


def check_length_options(options, max_length):
    """`options` as `LengthOptions`, or an `ArgumentError` naming the first one out of range."""
    options = LengthOptions() if options is None else LengthOptions(*options)
    a, b = options.max_length_a, options.max_length_b
    if isinstance(a, bool) or not isinstance(a, numbers.Real) or not 0 <= a < float("inf"):
        raise ArgumentError(f"`max_length_a` must be a finite number >= 0. Received: {a!r}")
    not_an_integer = isinstance(b, bool) or not isinstance(b, numbers.Integral)
    if b is not None and (not_an_integer or b < 1 and a == 0):
        raise ArgumentError(
            "`max_length_b` must be an integer (at least 1 when max_length_a is 0), or None "
            f"for max_length. Received: {b!r}"
        )
    for name in ("min_length", "no_repeat_ngram_size"):
        value = getattr(options, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ArgumentError(f"`{name}` must be an integer >= 0. Received: {value!r}")
    if options.min_length >= max_length:
        raise ArgumentError(
            "`min_length` counts the tokens before EOS, so it must be below max_length. "
            f"Received: min_length={options.min_length}, max_length={max_length}"
        )
    return options


def check_beam_options(max_length, beam_size, alpha, n_best, patience=None):
    """Raises an `ArgumentError` naming the first of beam search's options out of range."""
    check_positive_int("max_length", max_length)
    check_positive_int("beam_size", beam_size)
    check_alpha(alpha)
    if patience is not None:
        check_at_least("patience", patience, 1)
    if n_best is not None:
        check_positive_int("n_best", n_best)
        if n_best > beam_size:
            raise ArgumentError(
                f"`n_best` can be at most `beam_size`. Received: n_best={n_best}, "
                f"beam_size={beam_size}"
            )


def check_alpha(alpha):
    """Raises an `ArgumentError` unless the length penalty's `alpha` is a finite number."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not math.isfinite(alpha):
        raise ArgumentError(f"`alpha` must be a finite number. Received: alpha={alpha!r}")


def check_sampling(temperature, top_k, top_p):
    """Raises a `ValueError` naming the first sampling option out of range."""
    if not temperature > 0:
        raise ArgumentError(f"`temperature` must be > 0. Received: temperature={temperature}")
    if not 0 < top_p <= 1:
        raise ArgumentError(f"`top_p` must be in (0, 1]. Received: top_p={top_p}")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ArgumentError(f"`top_k` must be an integer >= 0. Received: top_k={top_k!r}")
