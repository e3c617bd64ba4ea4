"""The private Keras hooks the package relies on, in one place.

Each was written against Keras 3.15 (`KERAS_RELEASE`); importing this module
under another minor release warns once, since a private name may have moved
or changed meaning there. Nothing else in the package reaches into Keras'
private attributes or its `keras.src` modules.
"""

import warnings

import keras
from keras.src.backend.common.symbolic_scope import in_symbolic_scope

KERAS_RELEASE = "3.15"

if not keras.version().startswith(KERAS_RELEASE + "."):
    warnings.warn(
        f"keras_transformer was written for Keras {KERAS_RELEASE}; Keras {keras.version()} "
        "may have changed the private hooks in keras_transformer/compat.py.",
        stacklevel=2,
    )

__all__ = [
    "in_symbolic_scope",
    "loss_tracker",
    "distribute_strategy",
    "symbolic_build",
    "replace_symbolic_build",
]


def loss_tracker(model):
    """The `keras.metrics.Mean` in which `keras.Model.train_step` logs the loss."""
    return model._loss_tracker


def distribute_strategy(model):
    """The `tf.distribute` strategy `model` was made under, or None."""
    return model._distribute_strategy


def symbolic_build(model, data_batch):
    """Builds `model` (and its metrics) from one batch, as `fit` does before its first step."""
    model._symbolic_build(data_batch=data_batch)


def replace_symbolic_build(model, build):
    """Makes `fit` call `build(iterator=None, data_batch=None)` to build `model`."""
    model._maybe_symbolic_build = build
