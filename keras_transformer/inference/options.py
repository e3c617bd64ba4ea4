"""`DecodeOptions`: every option of a search, in one frozen type checked where it is built,
and the checks of each option.

`Translator`, the configuration's `decode` section and the options files the
exports write beside their models all take their fields and defaults from here.
"""

import dataclasses
import math
import numbers
import re
from typing import NamedTuple

from keras_transformer.errors import ArgumentError
from keras_transformer.inference.defaults import (
    ALPHA,
    BEAM_SIZE,
    LENGTH_PENALTIES,
    LENGTH_PENALTY,
    MAX_LENGTH,
)

# The version of the dict `DecodeOptions.to_dict` writes; a dict without one was
# written before the type existed, and its missing fields take their defaults.
FORMAT_VERSION = 1


class OptionRule(NamedTuple):
    """What one decoding option may be, checked the same way wherever it is given:
    `DecodeOptions`, the run configuration's `decode` section and the command line.

    Attributes:
        kind: `int`, `float` (an integer is a float too), `bool` or `str`.
        description: what a value must be, to follow "must be" in a message.
        test: True for a value of `kind` in range.
        optional: whether None is a value.
        help: the option's description on the command line.
    """

    kind: type
    description: str
    test: object
    optional: bool = False
    help: str = ""

    def problem(self, value):
        """What `value` must be instead (a phrase), or None if it is a value of the rule."""
        if value is None and self.optional:
            return None
        kinds = {bool: (bool,), int: (numbers.Integral,), float: (numbers.Real,), str: (str,)}[
            self.kind
        ]
        is_bool = isinstance(value, bool)
        if is_bool is not (self.kind is bool) or not isinstance(value, kinds):
            return self.description + (" or None" if self.optional else "")
        return None if self.test(value) else self.description

    def check(self, name, value):
        """Raises an `ArgumentError` naming `name` unless `value` is a value of the rule."""
        problem = self.problem(value)
        if problem is not None:
            raise ArgumentError(f"`{name}` must be {problem}. Received: {name}={value!r}")

    def parse(self, name, text):
        """The value of the command-line text `text`, checked; an `ArgumentError`
        naming `name` if it is not one."""
        words = {"true": True, "false": False}
        try:
            value = words[text.lower()] if self.kind is bool else self.kind(text.strip())
        except (KeyError, ValueError):
            raise ArgumentError(
                f"`{name}` must be {self.description}. Received: {text!r}"
            ) from None
        self.check(name, value)
        return value


# Which command-line flags give an option (`DecodeOptions.names(flags=...)`): the decoding
# flags of `evaluate`, `translate` and `export` over a run, or `translate`'s sampling flags.
RUN = "run"
SAMPLING = "sampling"
# A target language: its ISO 639 code, with a script or region if the model's token has one
# (por, zho_Hant, pt_BR), or its token (>>por<<, `text.languages`).
LANGUAGE_CODE = re.compile(r"(>>)?[a-z]{2,3}(_[A-Za-z]+)*(<<)?")
# The rules several options share.
POSITIVE_INT = OptionRule(int, "a positive integer", lambda v: v > 0)
COUNT = OptionRule(int, "an integer >= 0", lambda v: v >= 0)


def option(default, rule, config=False, flags=None):
    """A field of `DecodeOptions`: its default and `OptionRule`, whether a run's
    configuration holds it (its `decode` section), and the group of command-line
    flags that gives it (`RUN`, `SAMPLING`, or None for none or a flag of its own)."""
    return dataclasses.field(
        default=default, metadata={"rule": rule, "config": config, "flags": flags}
    )


@dataclasses.dataclass(frozen=True)
class DecodeOptions:
    """The options of a search: lengths, beam, repetition, patience and sampling.

    Built once and checked then: an option out of range, or two that do not
    go together (`n_best` above `beam_size` without sampling, `min_length`
    not below `max_length`), raise an `ArgumentError` naming them.

    Args:
        beam_size: 1 for greedy search, more for beam search.
        alpha: strength of the length penalty that ranks beam search's outputs
            (and divides the scores reported).
        length_penalty: "gnmt", log P / ((5 + |Y|) / 6) ** alpha, or "average",
            log P / |Y| ** alpha, as Marian and CTranslate2 rank (|Y| counts EOS).
        max_length: most target tokens to generate, EOS included.
        max_source_length: longest source in tokens, EOS included; longer
            sources are cut to it (`keras_transformer.text.SourcePolicy`).
        n_best: hypotheses returned per sentence: the N best of beam search
            (at most `beam_size`), or N samples.
        patience: None to end beam search when its output is certain; P >= 1
            to also end a sentence once P * `beam_size` hypotheses have ended.
        max_length_a: an output has at most `max_length_a * source tokens +
            max_length_b` tokens.
        max_length_b: B of `max_length_a`; None: `max_length`.
        min_length: fewest tokens before EOS.
        no_repeat_ngram_size: no n-gram of this many tokens twice (0: no rule).
        sample: draw tokens at random instead of searching.
        temperature: with `sample`, the logits are divided by it.
        top_k: with `sample`, draw from the K most likely tokens (0: all).
        top_p: with `sample`, draw from the smallest set of tokens whose
            probability reaches P (nucleus sampling; 1: all).
        seed: with `sample`, the seed of the draws.
        target_language: the language a multi-target model writes, as its code
            (`"por"`) or token (`">>por<<"`); the token is the source's first
            piece (`text.languages`). None for a model without such tokens.

    Examples:
        >>> options = DecodeOptions(beam_size=6, alpha=1.0)
        >>> options.replace(beam_size=1).beam_size
        1
        >>> DecodeOptions.from_dict(options.to_dict()) == options
        True
    """

    beam_size: int = option(BEAM_SIZE, POSITIVE_INT._replace(help="1 for greedy"), config=True)
    alpha: float = option(
        ALPHA,
        OptionRule(float, "a finite number", math.isfinite, help="strength of the length penalty"),
        config=True,
        flags=RUN,
    )
    length_penalty: str = option(
        LENGTH_PENALTY,
        OptionRule(
            str,
            f"one of {', '.join(LENGTH_PENALTIES)}",
            lambda v: v in LENGTH_PENALTIES,
            help="how --alpha divides by an output's length: gnmt, by ((5 + |Y|) / 6) ** alpha; "
            "average, by |Y| ** alpha (Marian's and CTranslate2's)",
        ),
        config=True,
        flags=RUN,
    )
    max_length: int = option(MAX_LENGTH, POSITIVE_INT, config=True)
    max_source_length: int = option(256, POSITIVE_INT)
    n_best: int = option(1, POSITIVE_INT)
    patience: float | None = option(
        None,
        OptionRule(
            float,
            "a number >= 1",
            lambda v: 1 <= v < math.inf,
            optional=True,
            help="end a sentence's beam search once PATIENCE * beam size hypotheses have "
            "ended, not only when its output is certain",
        ),
        config=True,
        flags=RUN,
    )
    max_length_a: float = option(
        0.0,
        OptionRule(
            float,
            "a finite number >= 0",
            lambda v: 0 <= v < math.inf,
            help="outputs have at most A * source tokens + B tokens",
        ),
        config=True,
        flags=RUN,
    )
    max_length_b: int | None = option(
        None,
        OptionRule(int, "an integer", lambda v: True, optional=True, help="B of --max-length-a"),
        config=True,
        flags=RUN,
    )
    min_length: int = option(
        0,
        COUNT._replace(help="fewest tokens before the end of an output"),
        config=True,
        flags=RUN,
    )
    no_repeat_ngram_size: int = option(
        0,
        COUNT._replace(help="no n-gram of this size twice in an output; 0: allowed"),
        config=True,
        flags=RUN,
    )
    sample: bool = option(False, OptionRule(bool, "true or false", lambda v: True))
    temperature: float = option(
        1.0,
        OptionRule(float, "a number > 0", lambda v: 0 < v < math.inf, help="with --sample"),
        flags=SAMPLING,
    )
    top_k: int = option(0, COUNT._replace(help="with --sample (0: all)"), flags=SAMPLING)
    top_p: float = option(
        1.0,
        OptionRule(float, "a number in (0, 1]", lambda v: 0 < v <= 1, help="with --sample"),
        flags=SAMPLING,
    )
    seed: int = option(0, COUNT._replace(help="with --sample"), flags=SAMPLING)
    target_language: str | None = option(
        None,
        OptionRule(
            str,
            "an ISO 639 code such as por or zho_Hant, or its token >>por<<",
            lambda v: LANGUAGE_CODE.fullmatch(v) is not None,
            optional=True,
            help="the language a multilingual model writes (its >>code<< token)",
        ),
        config=True,
        flags=RUN,
    )

    def __post_init__(self):
        for name, rule in OPTION_RULES.items():
            rule.check(name, getattr(self, name))
        check_length_options(self.length_options, self.max_length)
        if not self.sample and self.n_best > self.beam_size:
            raise ArgumentError(
                "`n_best` can be at most `beam_size` (or use `sample=True`). "
                f"Received: n_best={self.n_best}, beam_size={self.beam_size}"
            )

    @classmethod
    def names(cls, config=None, flags=None):
        """The options' names, in order: all of them, or those a run's configuration
        holds (`config=True`), or those a group of command-line flags gives (`flags=RUN`
        or `SAMPLING`)."""
        return [
            field.name
            for field in dataclasses.fields(cls)
            if (config is None or field.metadata["config"] == config)
            and (flags is None or field.metadata["flags"] == flags)
        ]

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

    def replace_given(self, **values):
        """`replace` with the `values` that are not None: the options given where a
        None stands for one left out (a command-line flag, an unset argument).

        Examples:
            >>> DecodeOptions().replace_given(beam_size=1, alpha=None).alpha
            0.6
        """
        return self.replace(**{name: value for name, value in values.items() if value is not None})

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


# What each option may be, by name: the configuration and the command line check by it too.
OPTION_RULES = {field.name: field.metadata["rule"] for field in dataclasses.fields(DecodeOptions)}


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
    for name, value in options._asdict().items():
        OPTION_RULES[name].check(name, value)
    a, b = options.max_length_a, options.max_length_b
    if b is not None and b < 1 and a == 0:
        raise ArgumentError(
            "`max_length_b` must be an integer (at least 1 when max_length_a is 0), or None "
            f"for max_length. Received: {b!r}"
        )
    if options.min_length >= max_length:
        raise ArgumentError(
            "`min_length` counts the tokens before EOS, so it must be below max_length. "
            f"Received: min_length={options.min_length}, max_length={max_length}"
        )
    return options


def check_sampling(temperature, top_k, top_p):
    """Raises an `ArgumentError` naming the first sampling option out of range."""
    for name, value in [("temperature", temperature), ("top_p", top_p), ("top_k", top_k)]:
        OPTION_RULES[name].check(name, value)
