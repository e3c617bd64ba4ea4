"""A run's `model` section: `Transformer`'s arguments as configuration keys, and back.

The section holds `Transformer`'s arguments (its defaults are the model's),
except that a position scheme is a shorthand plus a key per setting
(`POSITION_KEYS`) and the two stacks' depths are keys of their own
(`DEPTH_KEYS`), so a YAML file or a `--set model.max_positions=64` reaches
each. `model_arguments` builds the `positions` object and the `num_layers`
pair from them; `model_section` reads them back from a built model.
"""

import dataclasses
import inspect

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import positions as position_schemes
from keras_transformer.models import Transformer

# `Transformer`'s arguments a section holds; the vocabulary sizes come from the
# trained tokenizers.
MODEL_ARGUMENTS = [
    name
    for name, parameter in inspect.signature(Transformer).parameters.items()
    if parameter.kind is parameter.POSITIONAL_OR_KEYWORD
    and name not in ("input_vocab_size", "target_vocab_size")
]
POSITION_KEYS = {  # key -> default; `positions.SETTINGS` maps each to its scheme's field
    "positional_encoding_layout": "interleaved",
    "max_positions": None,
    "add_positions": "input",
    "max_relative_position": None,
}
DEPTH_KEYS = {"num_encoder_layers": None, "num_decoder_layers": None}


def model_arguments(model):
    """`Transformer`'s arguments of a run's `model` section (vocabulary sizes aside).

    The scheme's settings (`POSITION_KEYS`) and `positions` become one
    position scheme, and the depths (`DEPTH_KEYS`) one `num_layers`.

    Raises:
        ArgumentError: where the position keys do not go together.

    Examples:
        ```python
        model_arguments({**config["model"], "positions": "learned", "max_positions": 64})
        # {..., "positions": Learned(max_positions=64, placement='input')}
        ```
    """
    arguments = {key: value for key, value in model.items() if key in MODEL_ARGUMENTS}
    settings = {key: model[key] for key in POSITION_KEYS if key in model}
    arguments["positions"] = position_schemes.get(model["positions"], **settings)
    depths = [model.get(key) or model["num_layers"] for key in DEPTH_KEYS]
    if depths[0] != depths[1] or depths[0] != model["num_layers"]:
        arguments["num_layers"] = tuple(depths)
    return arguments


def model_section(model):
    """A run's `model` section for the built `Transformer` `model`, the reverse of
    `model_arguments`.

    Raises:
        ArgumentError: for a position scheme with a setting the section has no key for.
    """
    config = model.get_config()
    section = {key: config[key] for key in MODEL_ARGUMENTS}
    section.update(DEPTH_KEYS, **POSITION_KEYS)
    if not isinstance(model.num_layers, int):  # the encoder's depth, and the decoder's own
        section["num_layers"], section["num_decoder_layers"] = model.num_layers
    scheme = model.positions
    section["positions"] = scheme.name
    keys = {  # the scheme's field -> its key in the section
        field: key
        for key, (owner, field) in position_schemes.SETTINGS.items()
        if key in POSITION_KEYS and owner in (type(scheme), None)
    }
    for field in dataclasses.fields(scheme):
        value = getattr(scheme, field.name)
        if field.name in keys:
            section[keys[field.name]] = value
        elif value != field.default:
            raise ArgumentError(
                f"A run's model section has no key for {field.name}={value!r} of {scheme!r}."
            )
    return section
