"""Argument checks shared by the layers, the model and the training objects.

Every check raises an `ArgumentError` (a `ValueError`) that names the
argument and the value it received, in the form Keras itself uses:
"`num_heads` must be a positive integer. Received: num_heads=0".
"""

import math
import numbers

from keras import backend

from keras_transformer.compat import in_symbolic_scope
from keras_transformer.errors import ArgumentError, BackendError


def check_tensorflow_backend(what):
    """A `BackendError` naming `what` unless Keras runs on TensorFlow.

    The layers, `Transformer`, its loss, metrics and schedule run on every
    Keras backend; the searches, `Translator` and the exports are TensorFlow
    graphs (`tf.while_loop`, XLA, tokenizers in the graph).
    """
    if backend.backend() != "tensorflow":
        raise BackendError(
            f"{what} runs in TensorFlow graphs and needs Keras' TensorFlow backend, but "
            f"Keras runs on {backend.backend()!r}: unset KERAS_BACKEND or set it to tensorflow. "
            "The layers, Transformer, its loss, metrics and schedule work on any backend."
        )


def check_positive_int(name, value):
    """Raises unless `value` is an integer > 0 (booleans are not integers)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ArgumentError(f"`{name}` must be a positive integer. Received: {name}={value!r}")


def check_at_least(name, value, minimum):
    """Raises unless `value` is a finite number >= `minimum` (booleans are not numbers)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not minimum <= value < math.inf
    ):
        raise ArgumentError(f"`{name}` must be a number >= {minimum}. Received: {name}={value!r}")


def check_non_negative(name, value):
    """Raises unless `value` is a finite number >= 0 (booleans are not numbers)."""
    check_at_least(name, value, 0)


def check_rate(name, value):
    """Raises unless `value` is a number in [0, 1) (a dropout rate)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 1:
        raise ArgumentError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}")


def check_choice(name, value, choices):
    """Raises unless `value` is one of `choices`."""
    if value not in choices:
        raise ArgumentError(
            f"`{name}` must be one of {sorted(choices)}. Received: {name}={value!r}"
        )


def check_token_ids(name, token_ids):
    """Raises unless `token_ids` is a rank-2 integer tensor `(B, S)`.

    The dtype is not checked while Keras builds a model symbolically
    (`keras.SymbolicScope`): under `tf.distribute`, Keras 3 builds from the
    replica-averaged first batch, whose integer ids have become floats. The
    check runs on the real dtype when the step function is traced.
    """
    dtype = backend.standardize_dtype(token_ids.dtype)
    if "int" not in dtype and not in_symbolic_scope():
        raise ArgumentError(
            f"`{name}` must be integer token ids of shape (batch, seq). "
            f"Received: {name} with dtype={dtype}"
        )
    check_token_ids_shape(name, token_ids.shape)


def check_token_ids_shape(name, shape):
    """Raises unless `shape` is the rank-2 shape `(B, S)` of token ids."""
    try:
        shape = tuple(shape)
    except TypeError:
        pass
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise ArgumentError(
            f"`{name}` must have rank 2, (batch, seq). Received: {name} with shape={shape}"
        )
