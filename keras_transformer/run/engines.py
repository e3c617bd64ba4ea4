"""Opening any engine of the package from its path: a run directory (or several, for an
ensemble), a SavedModel, a LiteRT export or a CTranslate2 export."""

import os
from collections.abc import Mapping, Sequence

from keras_transformer.errors import ArgumentError
from keras_transformer.export.ctranslate2_layout import DECODE_FILE
from keras_transformer.export.litert_layout import OPTIONS_FILE as LITERT_OPTIONS
from keras_transformer.inference.options import DecodeOptions
from keras_transformer.run.directory import CHECKPOINTS
from keras_transformer.run.translators import make_translator
from keras_transformer.validation import check_choice

# The kinds of engine, as error messages name them.
KINDS = {
    "run": "a run directory",
    "saved_model": "a SavedModel",
    "litert": "a LiteRT export",
    "ctranslate2": "a CTranslate2 export",
}
# The decoding options a CTranslate2 runtime takes when it is opened; its others are fixed.
CTRANSLATE2_OPTIONS = ("beam_size", "alpha", "length_penalty", "patience")


def open_engine(
    path: str | os.PathLike | Sequence[str],
    options: DecodeOptions | Mapping | None = None,
    checkpoint: str = "best",
    kind: str | None = None,
    **engine_arguments,
):
    """The engine (`inference.engine`) that translates with what `path` holds.

    Every engine has `translate(sentences, prefixes=None, constraints=None)`
    returning `inference.Translations`, `truncated(sentences)` and
    `max_source_length`, and calling it translates a list of strings.

    Args:
        path: a run directory (a `Translator` of its `checkpoint`), a list of
            run directories (their `Ensemble`), a SavedModel version
            directory or TF Serving's model directory above it (its newest
            version; `export.SavedModelTranslator`), a LiteRT export
            (`export.LiteRTTranslator`) or a CTranslate2 export
            (`export.CTranslate2Translator`).
        options: decoding options: a `DecodeOptions`, or option values by
            name where None keeps the run's own (its configuration's
            `decode` section). An export's options are fixed when it is
            written, and it refuses others by name, but a CTranslate2
            export takes `beam_size`, `alpha`, `length_penalty` and `patience`.
        checkpoint: a run directory's `"best"` or `"averaged"` model.
        kind: `"run"`, `"saved_model"`, `"litert"` or `"ctranslate2"` opens
            `path` as that kind, whose own errors say what is missing; None
            tells the kind from the files `path` holds.
        **engine_arguments: further arguments of the engine's class
            (`jit_compile=False` for a `Translator`, `num_threads` for
            LiteRT, `compute_type` for CTranslate2).

    Raises:
        FileNotFoundError: if `path` is none of these, or lacks a file of
            its `kind`.
        ArgumentError: for options an export does not take.

    Examples:
        ```python
        engine = open_engine("runs/numbers_de_en", {"beam_size": 1})
        engine.translate(["siebzehn"]).best  # ['seventeen']
        open_engine("saved_models/numbers_de_en").translate(["siebzehn"]).scores  # (1, 4)
        ```
    """
    check_choice("checkpoint", checkpoint, set(CHECKPOINTS))
    if kind is not None:
        check_choice("kind", kind, set(KINDS))
    values = option_values(options)
    if not isinstance(path, (str, os.PathLike)):
        run_dirs = [os.fspath(run_dir) for run_dir in path]
        return make_translator(run_dirs, checkpoint, **values, **engine_arguments)
    path = os.fspath(path)
    if kind in (None, "saved_model"):
        path = newest_version(path) or path
    kind = kind or kind_of(path, checkpoint)
    if kind == "run":
        return make_translator(path, checkpoint, **values, **engine_arguments)
    refuse_options(values, KINDS[kind], CTRANSLATE2_OPTIONS if kind == "ctranslate2" else ())
    if kind == "saved_model":
        from keras_transformer.export.saved_model_runtime import SavedModelTranslator

        return SavedModelTranslator(path, **engine_arguments)
    if kind == "litert":
        from keras_transformer.export.litert_runtime import LiteRTTranslator

        return LiteRTTranslator(path, **engine_arguments)
    from keras_transformer.export.ctranslate2_runtime import CTranslate2Translator

    return CTranslate2Translator(path, **values, **engine_arguments)


def kind_of(path, checkpoint="best"):
    """The kind of engine (a key of `KINDS`) that the files of `path` make, or a
    `FileNotFoundError` naming what each kind holds."""
    if has(path, "saved_model.pb"):
        return "saved_model"
    if has(path, LITERT_OPTIONS):
        return "litert"
    if has(path, DECODE_FILE) and has(path, "model.bin"):
        return "ctranslate2"
    if has(path, CHECKPOINTS[checkpoint]):
        return "run"
    raise FileNotFoundError(
        f"{path!r} holds no model to translate with: neither a run directory (with "
        f"{CHECKPOINTS[checkpoint]}), a SavedModel (saved_model.pb), a LiteRT export "
        f"({LITERT_OPTIONS}) nor a CTranslate2 export (model.bin and {DECODE_FILE})."
    )


def option_values(options):
    """`options` as values by name, None dropped: a `DecodeOptions` gives every field."""
    if options is None:
        return {}
    if isinstance(options, DecodeOptions):
        return {name: getattr(options, name) for name in DecodeOptions.names()}
    if not isinstance(options, Mapping):
        raise ArgumentError(
            "`options` must be a DecodeOptions or a mapping of option values by name. "
            f"Received: options={options!r:.80}"
        )
    unknown = sorted(set(options) - set(DecodeOptions.names()))
    if unknown:
        raise ArgumentError(f"Unknown decoding options {unknown}; the options are DecodeOptions'.")
    return {name: value for name, value in options.items() if value is not None}


def refuse_options(values, what, taken):
    """An `ArgumentError` naming the options of `values` that an export, `what`, fixed."""
    fixed = sorted(set(values) - set(taken))
    if fixed:
        raise ArgumentError(
            f"The decoding options of {what} are fixed at export; {fixed} cannot be changed "
            "when it is opened. Export the run again with them, or translate with the run "
            "directory."
        )


def newest_version(path):
    """The newest version directory of a TF Serving model directory (numbered
    subdirectories holding `saved_model.pb`), or None if `path` is not one."""
    if not os.path.isdir(path) or has(path, "saved_model.pb"):
        return None
    versions = [
        int(name)
        for name in os.listdir(path)
        if name.isdigit() and has(os.path.join(path, name), "saved_model.pb")
    ]
    return os.path.join(path, str(max(versions))) if versions else None


def has(directory, name):
    """Whether `directory` holds the file `name`."""
    return os.path.isfile(os.path.join(directory, name))
