"""Position schemes: how a model tells where each token is, one object per scheme.

The layers take a scheme whole (`positions=`) and ask it what they need
(`scheme.PositionScheme`). A string names a scheme with its defaults
(`"sinusoidal"`, `"learned"`, `"rotary"`, `"relative"`, `"relative_bias"`,
`"alibi"`); `get` turns strings, Keras configs and the older separate
arguments (`max_positions`, `add_positions`, `max_relative_position`,
`positional_encoding_layout`) into schemes.

Examples:
    ```python
    from keras_transformer.layers import positions
    positions.get("learned", max_positions=256)  # Learned(max_positions=256, placement='input')
    model = Transformer(2, 64, 4, 128, 1000, 1000, positions=positions.Rotary())
    ```
"""

import dataclasses
import warnings

import keras

from keras_transformer.errors import ArgumentError
from keras_transformer.layers.positions.alibi import ALiBi, alibi_slopes
from keras_transformer.layers.positions.learned import Learned
from keras_transformer.layers.positions.rotary import Rotary
from keras_transformer.layers.positions.scheme import PLACEMENTS, SCHEMES, PositionScheme
from keras_transformer.layers.positions.shaw import ShawRelative
from keras_transformer.layers.positions.sinusoidal import Sinusoidal
from keras_transformer.layers.positions.t5_bias import T5Bias

# The older separate arguments, each now a setting of one scheme: argument -> (scheme, field)
SETTINGS = {
    "positional_encoding_layout": (Sinusoidal, "layout"),
    "layout": (Sinusoidal, "layout"),
    "max_wavelength": (Sinusoidal, "max_wavelength"),
    "max_positions": (Learned, "max_positions"),
    "add_positions": (None, "placement"),  # the schemes with a table
    "max_relative_position": (ShawRelative, "max_distance"),
}


def get(positions, **settings):
    """The `PositionScheme` that `positions` names.

    Args:
        positions: a `PositionScheme` (returned as it is), a shorthand of
            `SCHEMES`, a scheme's Keras config, or None (returned as None).
        **settings: with a shorthand, its scheme's settings in the older argument names
            (`SETTINGS`: `max_positions=`, `add_positions=`,
            `max_relative_position=`, `positional_encoding_layout=`); None
            means unset. A setting for another scheme is an error, except
            the sinusoidal table's layout and wavelength, which other schemes
            ignore (every scheme's layers kept them).

    Returns:
        A `PositionScheme`, or None.

    Raises:
        ArgumentError: on an unknown shorthand or setting, a setting that
            belongs to another scheme, or a scheme object with settings.

    Examples:
        ```python
        get("relative", max_relative_position=16)  # ShawRelative(max_distance=16)
        get("sinusoidal", add_positions="every_layer")  # Sinusoidal(placement='every_layer')
        ```
    """
    given = {name: value for name, value in settings.items() if value is not None}
    unknown = sorted(set(given) - set(SETTINGS))
    if unknown:
        raise ArgumentError(f"Unknown position settings {unknown}; they are {sorted(SETTINGS)}.")
    if positions is None or isinstance(positions, PositionScheme):
        if given:
            raise ArgumentError(
                f"Position settings {sorted(given)} go with a scheme's name; a scheme object "
                f"holds its own. Received: positions={positions!r}"
            )
        return positions
    if isinstance(positions, dict):
        scheme = keras.saving.deserialize_keras_object(positions)
        return get(scheme, **settings)
    if positions not in SCHEMES:
        raise ArgumentError(
            f"`positions` must be one of {sorted(SCHEMES)} or a PositionScheme. "
            f"Received: positions={positions!r}"
        )
    cls = SCHEMES[positions]
    fields = {}
    for name, value in given.items():
        owner, field = SETTINGS[name]
        if cls is not owner and field in ("layout", "max_wavelength"):
            continue  # the sinusoidal table's, ignored by the others as before
        if field == "placement" and value == "input":
            continue  # every scheme's default
        if field not in {f.name for f in _fields(cls)}:
            raise ArgumentError(
                f"`{name}` is a setting of positions={_shorthand(owner, field)}, not of "
                f"positions={positions!r}. Received: {name}={value!r}"
            )
        fields[field] = value
    missing = [f.name for f in _fields(cls) if f.name not in fields and _required(f)]
    if missing:
        names = [name for name, (owner, field) in SETTINGS.items() if owner is cls]
        raise ArgumentError(
            f"positions={positions!r} needs `{names[0]}`. "
            f"Received: {', '.join(f'{n}=None' for n in names)}"
        )
    return cls(**fields)


def from_arguments(positions, arguments, owner):
    """The scheme of a layer's `positions` and the older settings among its `arguments`.

    Pops the settings (`SETTINGS`) from `arguments`, a layer's `**kwargs`, and
    warns with a `DeprecationWarning` naming the scheme object to pass instead.

    Args:
        positions: the layer's `positions` argument.
        arguments: the layer's remaining keyword arguments; settings are removed.
        owner: the layer's class name, for the warning.

    Returns:
        A `PositionScheme` or None, as `get`.
    """
    settings = {name: arguments.pop(name) for name in list(arguments) if name in SETTINGS}
    scheme = get(positions, **settings)
    if any(value is not None for value in settings.values()):
        warnings.warn(
            f"{owner}({', '.join(f'{n}=' for n in settings)}...) sets the position scheme: "
            f"pass positions={scheme!r} instead.",
            DeprecationWarning,
            stacklevel=3,
        )
    return scheme


def upgrade_config(config):
    """An older layer config (a shorthand and separate settings) in today's form:
    `positions` a scheme, the settings gone. Today's configs are returned unchanged."""
    config = dict(config)
    settings = {name: config.pop(name) for name in list(config) if name in SETTINGS}
    if config.get("positions") is not None and not isinstance(config["positions"], dict):
        config["positions"] = get(config["positions"], **settings)
    return config


def serialize(scheme):
    """`scheme` as Keras config (None stays None), for a layer's `get_config`."""
    return None if scheme is None else keras.saving.serialize_keras_object(scheme)


def _fields(cls):
    return [f for f in cls.__dataclass_fields__.values() if f.init]


def _required(field):
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def _shorthand(owner, field):
    if owner is None:
        return "'sinusoidal' or 'learned'"
    return repr(owner.name)


class PositionsFromConfig:
    """A layer's `from_config` that reads an older config's separate position settings
    into its scheme; the layer's own class follows it among the bases.

    Examples:
        ```python
        class Encoder(PositionsFromConfig, keras.layers.Layer): ...
        ```
    """

    @classmethod
    def from_config(cls, config):
        return super().from_config(upgrade_config(config))


__all__ = [
    "PLACEMENTS",
    "SCHEMES",
    "ALiBi",
    "Learned",
    "PositionScheme",
    "PositionsFromConfig",
    "Rotary",
    "ShawRelative",
    "Sinusoidal",
    "T5Bias",
    "alibi_slopes",
    "from_arguments",
    "get",
    "serialize",
    "upgrade_config",
]
