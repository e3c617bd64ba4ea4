"""Names of a package imported on first use (PEP 562's module `__getattr__`)."""

import importlib
import warnings


def lazy_attributes(module_name, targets, moved=None):
    """The `(__getattr__, __dir__)` of a module whose names load on first use.

    Args:
        module_name: the module's `__name__`.
        targets: `{name: "package.module"}` for a module, or
            `{name: "package.module:attribute"}` for a name inside one.
        moved: `{name: "package.module:attribute"}` of names that live
            elsewhere now: reading one warns with a `DeprecationWarning` that
            names its new place.

    Returns:
        The two functions, to assign to the module's `__getattr__` and
        `__dir__`.

    Examples:
        ```python
        __getattr__, __dir__ = lazy_attributes(__name__, {"run": "keras_transformer.run"})
        ```
    """
    moved = moved or {}
    module = importlib.import_module(module_name)

    def load(target):
        path, _, attribute = target.partition(":")
        loaded = importlib.import_module(path)
        return getattr(loaded, attribute) if attribute else loaded

    def __getattr__(name):
        if name in moved:
            new = moved[name].replace(":", ".")
            warnings.warn(
                f"`{module_name}.{name}` is deprecated: use `{new}`.",
                DeprecationWarning,
                stacklevel=2,
            )
            return load(moved[name])
        if name not in targets:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = load(targets[name])
        setattr(module, name, value)  # found directly from now on
        return value

    def __dir__():
        return sorted(set(vars(module)) | set(targets))

    return __getattr__, __dir__
