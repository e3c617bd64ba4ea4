"""The errors a user can cause and fix, under one base class.

The command line prints a `UserError` as one line and exits with status 2;
any other exception is a bug, and keeps its traceback. Each class also
derives from the built-in exception it refines, so `except ValueError`
keeps working.
"""


class UserError(Exception):
    """Base of every error the package raises on purpose about its input."""


class ArgumentError(UserError, ValueError):
    """An argument with a value that is not allowed (`keras_transformer.validation`)."""


class ConfigError(ArgumentError):
    """A run configuration key or value that is not allowed (`keras_transformer.config`)."""


class RunError(UserError, RuntimeError):
    """A run that cannot do what was asked: missing, unfinished, mismatched or damaged."""


class DamagedFileError(UserError, OSError):
    """A file that exists but cannot be read as what it should hold (truncated, overwritten)."""


class BackendError(UserError, RuntimeError):
    """A part of the package that runs only on TensorFlow, used under another Keras backend."""
