"""`DecodeOptions`: checked once where built, carried through dicts with a version."""

import argparse
import json

import pytest
import yaml

from keras_transformer.cli.parser import parser
from keras_transformer.config import DECODE_OPTIONS, decode_options, default_config, set_value
from keras_transformer.errors import ArgumentError, ConfigError
from keras_transformer.inference import DecodeOptions
from keras_transformer.inference.options import FORMAT_VERSION, OPTION_RULES


@pytest.mark.parametrize(
    "values, message",
    [
        (dict(beam_size=0), "`beam_size` must be a positive integer. Received: beam_size=0"),
        (dict(alpha=float("nan")), "`alpha` must be a finite number"),
        (
            dict(length_penalty="wu"),
            "`length_penalty` must be one of gnmt, average. Received: length_penalty='wu'",
        ),
        (dict(max_length=0), "`max_length` must be a positive integer"),
        (dict(max_source_length=0), "`max_source_length` must be a positive integer"),
        (dict(n_best=3, beam_size=2), "Received: n_best=3, beam_size=2"),
        (dict(patience=0.5), "patience"),
        (dict(max_length_b=0), "`max_length_b` must be an integer (at least 1 when"),
        (dict(max_length_a=-1.0), "`max_length_a` must be a finite number >= 0"),
        (dict(min_length=64), "Received: min_length=64, max_length=64"),
        (dict(no_repeat_ngram_size=-1), "`no_repeat_ngram_size` must be an integer >= 0"),
        (dict(sample=True, temperature=0.0), "`temperature` must be a number > 0"),
        (dict(sample=True, top_p=0.0), "`top_p` must be a number in (0, 1]"),
        (dict(sample=True, top_k=-1), "`top_k` must be an integer >= 0"),
    ],
)
def test_an_option_out_of_range_is_refused_by_name(values, message):
    with pytest.raises(ValueError) as error:
        DecodeOptions(**values)
    assert message in str(error.value)
    with pytest.raises(ValueError) as error:  # replace checks again
        DecodeOptions().replace(**values)
    assert message in str(error.value)


def test_sampling_takes_more_hypotheses_than_the_beam():
    assert DecodeOptions(sample=True, n_best=8, beam_size=1).n_best == 8


def test_options_survive_json_and_dicts_written_before_the_version_load():
    options = DecodeOptions(beam_size=6, alpha=1.0, patience=2.0, max_length_b=10, seed=3)
    written = json.loads(json.dumps(options.to_dict()))
    assert written["format_version"] == FORMAT_VERSION
    assert DecodeOptions.from_dict(written) == options
    # A CTranslate2 export's options file of an earlier release: no version, fewer fields.
    earlier = {"beam_size": 4, "alpha": 0.6, "patience": None, "max_length": 64}
    earlier |= {"max_source_length": 256, "quantization": "int8", "shortlist": False}
    loaded = DecodeOptions.from_dict(earlier, others=("quantization", "shortlist"))
    assert loaded == DecodeOptions()


@pytest.mark.parametrize(
    "values, message",
    [
        ({"beam_width": 4}, "Unknown decoding option 'beam_width'. Known: beam_size, alpha"),
        ({"format_version": FORMAT_VERSION + 1}, f"written in format {FORMAT_VERSION + 1}"),
        ({"beam_size": 0}, "`beam_size` must be a positive integer"),
    ],
)
def test_a_dict_with_unknown_names_a_newer_format_or_bad_values_is_refused(values, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        DecodeOptions.from_dict(values)
    if "Unknown" in message:
        with pytest.raises(ValueError, match="Unknown decoding option 'beam_width'"):
            DecodeOptions().replace(**values)


# Partners that let each option's own range decide (max_length_b below 1 needs a
# max_length_a; n_best above 1 and the sampling options need sampling).
PARTNERS = {"max_length_b": {"max_length_a": 1.0}, "n_best": {"sample": True}}
TEXTS = ["0", "1", "3", "-1", "0.5", "1.5", "1e9", "nan", "inf", "true", "x", "average", "por"]


def number(text):
    """The Python value a text stands for: an int, a float, True, or the text."""
    for read in (int, float, {"true": True}.__getitem__):
        try:
            return read(text)
        except (KeyError, ValueError):
            pass
    return text


@pytest.mark.parametrize("name", [n for n in DecodeOptions.names() if n != "sample"])
def test_the_options_type_the_config_and_the_command_line_take_the_same_values(name):
    """One rule per option: what `DecodeOptions`, a config's `decode` section and a
    command-line flag accept, each where the option can be given there."""
    partners = PARTNERS.get(name, {"sample": True})
    flags = {
        action.dest: action
        for sub in parser()._subparsers._group_actions[0].choices.values()
        for action in sub._actions
    }
    for text in TEXTS:  # a text option (a language code) takes the text as Python gives it
        value = text if OPTION_RULES[name].kind is str else number(text)
        accepted = {}
        try:
            DecodeOptions(**{name: value, **partners})
            accepted["DecodeOptions"] = True
        except ArgumentError:
            accepted["DecodeOptions"] = False
        if name in DECODE_OPTIONS:
            config = default_config()
            try:
                set_value(config, f"decode.{name}", yaml.safe_load(text))  # as --set reads it
                accepted["config"] = True
            except ConfigError:
                accepted["config"] = False
        if name in flags and flags[name].type is not None and name != "beam_size":
            try:
                flags[name].type(text)
                accepted["command line"] = True
            except argparse.ArgumentTypeError:
                accepted["command line"] = False
        assert len(set(accepted.values())) == 1, (text, value, accepted)


def test_each_option_is_declared_once_with_where_it_is_set():
    """An option's field says whether a run's `decode` section holds it and which group of
    flags gives it; the configuration and the command line are made from that."""
    from keras_transformer.inference.options import RUN, SAMPLING

    assert list(OPTION_RULES) == DecodeOptions.names()
    held = {k for k in default_config()["decode"] if k in DecodeOptions.names()}
    assert held == set(DecodeOptions.names(config=True)) == set(DECODE_OPTIONS)
    assert {"beam_size", "max_length", "alpha"} <= held and "max_source_length" not in held
    commands = parser()._subparsers._group_actions[0].choices
    flags = {name: {a.dest for a in sub._actions} for name, sub in commands.items()}
    for name in DecodeOptions.names(flags=RUN):
        scored = ["score"] if name == "target_language" else []  # the language of its targets
        expected = ["evaluate", "translate", *scored, "export"]
        assert [c for c in flags if name in flags[c]] == expected, name
    for name in DecodeOptions.names(flags=SAMPLING):
        assert [c for c in flags if name in flags[c]] == ["translate"], name
    assert DecodeOptions.names(flags=SAMPLING) == ["temperature", "top_k", "top_p", "seed"]


def test_a_runs_options_are_its_decode_section_with_the_options_given():
    """`config.decode_options`, where the command line builds its options: a value given
    replaces the section's, None keeps it, an option the section lacks keeps its default."""
    config = default_config()
    for key, value in [("beam_size", 3), ("max_length", 20), ("no_repeat_ngram_size", 2)]:
        set_value(config, f"decode.{key}", value)
    options = decode_options(config, beam_size=None, max_length=10, n_best=None, top_k=None)
    assert (options.beam_size, options.max_length, options.no_repeat_ngram_size) == (3, 10, 2)
    assert (options.alpha, options.n_best, options.top_k) == (config["decode"]["alpha"], 1, 0)
    set_value(config, "decode.min_length", 5)
    with pytest.raises(ArgumentError, match="Received: min_length=5, max_length=5"):
        decode_options(config, max_length=5)
    with pytest.raises(ArgumentError, match="Unknown decoding option 'beam'"):
        decode_options(config, beam=2)
