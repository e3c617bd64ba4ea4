"""The run configuration: one schema, defaults taken from the code they configure."""

import inspect
import json

import pytest
import yaml

import keras_transformer as kt
from keras_transformer import config as cfg
from keras_transformer.errors import ArgumentError
from keras_transformer.inference import beam_search, greedy_search
from keras_transformer.layers import (
    ALiBi,
    Decoder,
    Encoder,
    EncoderLayer,
    FeedForward,
    Learned,
    ShawRelative,
    Sinusoidal,
    T5Bias,
)
from keras_transformer.layers.base import TransformerBlock, TransformerStack
from keras_transformer.model_section import (
    DEPTH_KEYS,
    POSITION_KEYS,
    model_arguments,
    model_section,
)


def defaults(function):
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def test_every_key_has_a_rule_and_every_default_follows_it():
    assert {s: set(keys) for s, keys in cfg.DEFAULTS.items()} == {
        s: set(rules) for s, rules in cfg.RULES.items()
    }
    for section, values in cfg.DEFAULTS.items():
        for key, value in values.items():
            assert cfg.RULES[section][key].problem(value) is None, (section, key, value)


def test_the_model_section_is_every_argument_of_transformer_with_its_defaults():
    """And a key for each setting of a position scheme and for each stack's depth, which
    `model_arguments` builds into `positions` and `num_layers`."""
    arguments = defaults(kt.Transformer)
    required = {"num_layers", "d_model", "num_heads", "dff"}
    own = set(POSITION_KEYS) | set(DEPTH_KEYS)
    assert set(cfg.DEFAULTS["model"]) == set(arguments) | required | own
    for name, value in arguments.items():
        assert cfg.DEFAULTS["model"][name] == value, name
    built = model_arguments(cfg.DEFAULTS["model"])
    assert set(built) == set(arguments) | required
    assert built["positions"] == kt.layers.Sinusoidal() and built["num_layers"] == 3


@pytest.mark.parametrize(
    "keys, scheme, num_layers",
    [
        (dict(positional_encoding_layout="concatenated"), Sinusoidal(layout="concatenated"), 3),
        (
            dict(positions="learned", max_positions=64, add_positions="every_layer"),
            Learned(64, placement="every_layer"),
            3,
        ),
        (
            dict(positions="relative", max_relative_position=16, num_decoder_layers=1),
            ShawRelative(16),
            (3, 1),
        ),
        (dict(positions="alibi", num_encoder_layers=6), ALiBi(), (6, 3)),
    ],
)
def test_the_model_section_builds_the_scheme_and_is_read_back_from_a_model(
    keys, scheme, num_layers
):
    section = {**cfg.DEFAULTS["model"], **keys}
    arguments = model_arguments(section)
    assert arguments["positions"] == scheme and arguments["num_layers"] == num_layers
    model = kt.Transformer(**arguments, input_vocab_size=20, target_vocab_size=20)
    assert model_arguments(model_section(model)) == arguments
    with pytest.raises(ArgumentError, match=r"no key for num_buckets=16"):
        model_section(kt.Transformer(1, 8, 2, 8, 9, 9, positions=T5Bias(num_buckets=16)))


def test_the_layers_share_the_models_defaults():
    model = defaults(kt.Transformer)
    for layer in [TransformerStack, Encoder, Decoder, TransformerBlock, EncoderLayer, FeedForward]:
        own = defaults(layer)
        for name in own.keys() & model.keys():
            assert own[name] == model[name], (layer.__name__, name)
    assert defaults(TransformerBlock)["activation"] == defaults(FeedForward)["activation"]


def test_decoding_defaults_are_the_same_everywhere():
    decode = {k: v for k, v in cfg.DEFAULTS["decode"].items() if k in cfg.DECODE_OPTIONS}
    assert {k: getattr(kt.inference.DecodeOptions(), k) for k in decode} == decode
    assert defaults(kt.Translator)["shortlist"] is None and cfg.DEFAULTS["decode"]["shortlist"] == 0
    shortlist = defaults(kt.inference.Shortlist.build)
    assert shortlist["per_source"] == cfg.DEFAULTS["decode"]["shortlist_per_source"]
    assert shortlist["frequent"] == cfg.DEFAULTS["decode"]["shortlist_frequent"]
    searched = ["beam_size", "alpha", "max_length"]
    assert {k: defaults(beam_search)[k] for k in searched} == {k: decode[k] for k in searched}
    assert defaults(greedy_search)["max_length"] == decode["max_length"]
    lengths = kt.inference.LengthOptions()._asdict()
    assert lengths == {k: decode[k] for k in lengths}


@pytest.mark.parametrize(
    "override, message",
    [
        ("data.train_limit=0", "'data.train_limit' must be a positive integer or null"),
        ("data.train_limit=many", "'data.train_limit' must be of type int or null"),
        ("data.directory=3", "'data.directory' must be of type str or null"),
        ("data.corpus=wmt", "'data.corpus' must be one of 'numbers', 'files', 'tsv', 'tfds'"),
        ("data.source_lang=", "'data.source_lang' must be of type str"),
        ("tokenizer.type=bpe", "'tokenizer.type' must be one of 'sentencepiece', 'wordpiece'"),
        ("tokenizer.shared=1", "'tokenizer.shared' must be of type bool"),
        ("model.shared_embeddings=yes", "'model.shared_embeddings' must be one of null,"),
        ("model.num_heads=0", "'model.num_heads' must be a positive integer"),
        ("model.dropout_rate=1", "'model.dropout_rate' must be a number in [0, 1)"),
        ("model.layer_norm_epsilon=0", "'model.layer_norm_epsilon' must be a number > 0"),
        ("model.positional_encoding_layout=x", "must be one of 'interleaved', 'concatenated'"),
        ("model.norm_first=2", "'model.norm_first' must be of type bool"),
        ("train.backup_every_steps=-1", "'train.backup_every_steps' must be an integer >= 0"),
        ("train.epochs=true", "'train.epochs' must be of type int"),
        ("train.learning_rate_scale=0", "'train.learning_rate_scale' must be a number > 0"),
        ("train.mixed_precision=half", "'train.mixed_precision' must be false, true (bfloat16),"),
        ("train.mixed_precision=1", "'train.mixed_precision' must be false, true (bfloat16),"),
        ("train.jit_compile=sometimes", "'train.jit_compile' must be auto, true or false"),
        ("train.r_drop=-1", "'train.r_drop' must be a finite number >= 0"),
        ("train.r_drop=.inf", "'train.r_drop' must be a finite number >= 0"),
        ("tokenizer.sampling_alpha=-0.1", "'tokenizer.sampling_alpha' must be a finite number"),
        ("tokenizer.sampling_nbest_size=0", "'tokenizer.sampling_nbest_size' must be -1 or an"),
        ("decode.beam_size=0", "'decode.beam_size' must be a positive integer"),
        ("decode.alpha=.nan", "'decode.alpha' must be a finite number"),
    ],
)
def test_bad_values_name_the_key_and_what_it_takes(override, message):
    with pytest.raises(cfg.ConfigError) as error:
        cfg.load_config(overrides=[override])
    assert message in str(error.value) and "Received:" in str(error.value)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["decode.min_length=64"], "`min_length` counts the tokens before EOS"),
        (["decode.max_length_b=0"], "`max_length_b` must be an integer (at least 1 when"),
        (["decode.max_length=8", "decode.min_length=8"], "Received: min_length=8, max_length=8"),
    ],
)
def test_decode_options_that_do_not_go_together_are_refused_on_load(overrides, message):
    with pytest.raises(cfg.ConfigError, match="decode section's options do not go together"):
        cfg.load_config(overrides=overrides)
    with pytest.raises(cfg.ConfigError) as error:
        cfg.load_config(overrides=overrides)
    assert message in str(error.value)


def test_position_options_that_do_not_go_together_are_refused_on_load():
    with pytest.raises(cfg.ConfigError, match="positions do not go together.*max_positions=None"):
        cfg.load_config(overrides=["model.positions=learned"])
    with pytest.raises(cfg.ConfigError, match="max_positions=50 is shorter.*data.max_length=64"):
        cfg.load_config(overrides=["model.positions=learned", "model.max_positions=50"])
    config = cfg.load_config(overrides=["model.positions=learned", "model.max_positions=64"])
    assert config["model"]["max_positions"] == 64
    rotary = ["model.positions=rotary", "model.add_positions=every_layer"]
    with pytest.raises(cfg.ConfigError, match="`add_positions` is a setting of.*not of"):
        cfg.load_config(overrides=rotary)
    assert cfg.load_config(overrides=rotary[:1])["model"]["positions"] == "rotary"
    with pytest.raises(cfg.ConfigError, match="max_relative_position=None"):
        cfg.load_config(overrides=["model.positions=relative"])
    relative = ["model.positions=relative", "model.max_relative_position=16"]
    assert cfg.load_config(overrides=relative)["model"]["max_relative_position"] == 16


def test_mixed_precision_names_the_policy_it_trains_under():
    for value, policy in [("true", "mixed_bfloat16"), ("float16", "mixed_float16")]:
        config = cfg.load_config(overrides=[f"train.mixed_precision={value}"])
        assert cfg.MIXED_PRECISION_POLICIES[config["train"]["mixed_precision"]] == policy


def test_numbers_are_read_as_written():
    config = cfg.load_config(
        overrides=["model.layer_norm_epsilon=1e-5", "train.label_smoothing=0", "data.train_limit=9"]
    )
    assert config["model"]["layer_norm_epsilon"] == 1e-5  # YAML reads 1e-5 as text
    assert config["train"]["label_smoothing"] == 0.0
    assert config["data"]["train_limit"] == 9


def test_the_reference_page_is_the_schemas_and_describes_every_key():
    from conftest import REPO

    from keras_transformer import config_reference

    assert config_reference.missing_help() == []
    assert set(config_reference.HELP) <= set(cfg.RULES)
    for section, keys in config_reference.HELP.items():
        assert set(keys) <= set(cfg.RULES[section]), section
    with open(f"{REPO}/docs/configuration.md", encoding="utf-8") as f:
        page = f.read()
    assert page == config_reference.markdown(), (
        "docs/configuration.md is stale: keras-transformer config --markdown > "
        "docs/configuration.md"
    )


def test_argument_help_reads_grouped_and_continued_docstring_entries():
    from keras_transformer.config_reference import argument_help

    def f(a, b, c, **kwargs):
        """Does nothing.

        Args:
            a: the first,
                continued.
            b, c: both of
                them (`b`
                None: none).
            **kwargs: the rest.

        Returns:
            None.
        """

    assert argument_help(f) == {
        "a": "the first, continued.",
        "b": "both of them (`b` None: none).",
        "c": "both of them (`b` None: none).",
        "**kwargs": "the rest.",
    }


@pytest.mark.parametrize("path, overrides", [(None, []), ("multi30k_de_en", ["train.epochs=9"])])
def test_the_printed_configuration_loads_as_the_one_it_prints(path, overrides, tmp_path, capsys):
    from keras_transformer.cli import main

    arguments = (["--config", path] if path else []) + [f"--set={o}" for o in overrides]
    assert main(["config", *arguments]) == 0
    (tmp_path / "printed.yaml").write_text(capsys.readouterr().out, encoding="utf-8")
    printed = cfg.load_config(str(tmp_path / "printed.yaml"))
    assert printed == cfg.load_config(path, overrides)
    as_json = json.dumps(yaml.safe_load((tmp_path / "printed.yaml").read_text(encoding="utf-8")))
    (tmp_path / "printed.json").write_text(as_json, encoding="utf-8")
    for given in ("printed.json", "printed.yaml"):  # either format, named by a pathlib.Path
        assert cfg.load_config(tmp_path / given) == printed
    assert (printed == cfg.DEFAULTS) is (path is None)
    assert main(["config", "--markdown", *arguments]) == (2 if arguments else 0)
