"""The errors a user can cause and fix, under one base class.

The command line prints a `UserError` as one line and exits with status 2;
any other exception is a bug, and keeps its traceback. Each class also
derives from the built-in exception it refines, so `except ValueError`
keeps working.
"""

import re


class UserError(Exception):
    """Base of every error the package raises on purpose about its input."""


class ArgumentError(UserError, ValueError):
    """An argument with a value that is not allowed (`keras_transformer.validation`)."""


class ConfigError(ArgumentError):
    """A run configuration key or value that is not allowed (`keras_transformer.config`)."""


class RunError(UserError, RuntimeError):
    """A run that cannot do what was asked: missing, unfinished, mismatched or damaged."""


class DamagedFileError(UserError, OSError):
    """A file that exists but cannot be read as what it should hold (truncated, overwritten).

    Args:
        message: what is wrong and what to do.
        path: the damaged file, when the message is about one.
    """

    def __init__(self, message, path=None):
        super().__init__(message)
        self.path = path


class BackendError(UserError, RuntimeError):
    """A part of the package that runs only on TensorFlow, used under another Keras backend."""


class MissingDependencyError(UserError, ImportError):
    """An optional package that a feature needs is not installed; the message says how to
    install it."""


def from_assertion(error):
    """The `ArgumentError` for an in-graph assertion about the user's data (such as
    parallel files that end apart), with the assertion's own message.

    Args:
        error: the `tf.errors.InvalidArgumentError` the assertion raised.
    """
    found = re.search(r"assertion failed: \[(.*?)\]", error.message, re.S)
    return ArgumentError(found.group(1) if found else error.message)
