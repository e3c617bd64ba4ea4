"""Activations of the feed-forward network: Keras' own names, and those of other toolkits'
models that Keras lacks.

A layer takes an activation by name (`"relu"`, `"gelu"`, `"silu"`, ... or one of
`NAMED`) or as a callable, and writes its name back into its config, so a model
saved with `"gelu_sigmoid"` loads with it.
"""

import keras


def gelu_sigmoid(x):
    """GELU approximated with a sigmoid, `x * sigmoid(1.702 x)` (Hendrycks & Gimpel,
    2016): the `gelu` of Marian (and so of OPUS-MT models), CTranslate2's `GELUSigmoid`.

    Args:
        x: a tensor.

    Returns:
        A tensor of the shape and dtype of `x`.

    Example:
        ```python
        gelu_sigmoid(keras.ops.convert_to_tensor([-1.0, 0.0, 1.0]))  # [-0.154, 0., 0.846]
        ```
    """
    return x * keras.ops.sigmoid(1.702 * x)


NAMED = {"gelu_sigmoid": gelu_sigmoid}


def get_activation(identifier):
    """The activation function `identifier` names: one of `NAMED`, or what
    `keras.activations.get` gives for it (a Keras name, a serialized registered
    function, or a callable)."""
    if isinstance(identifier, str) and identifier in NAMED:
        return NAMED[identifier]
    return keras.activations.get(identifier)


def serialize_activation(function):
    """The name of `function` in a config: its key in `NAMED`, or Keras' serialization."""
    for name, named in NAMED.items():
        if function is named:
            return name
    return keras.activations.serialize(function)
