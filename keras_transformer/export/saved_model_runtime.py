"""`SavedModelTranslator`: a SavedModel written by `export_translator`, as an engine."""

import os
from collections.abc import Sequence

import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.export.options import read_options
from keras_transformer.export.saved_model_layout import (
    EXTRA_DIR,
    N_BEST_SIGNATURE,
    OPTIONS_FILE,
    SERVING_SIGNATURE,
    TRUNCATED_FUNCTION,
)
from keras_transformer.inference.checks import check_sentences
from keras_transformer.inference.engine import Translations, refuse_arguments, translations_of
from keras_transformer.inference.options import DecodeOptions


class SavedModelTranslator:
    """Translates with a SavedModel of the package, loaded with `tf.saved_model.load`:
    the engine a TF Serving deployment runs, in this process.

    `translate` runs the `translate_n_best` signature and gives the same
    `inference.Translations` as every engine; calling it runs
    `serving_default` (strings in, strings out), which every string export
    has, from any release. Its decoding options are the exported
    translator's (`options`), fixed at export.

    Args:
        directory: a version directory written by `export_translator`
            (`saved_models/<name>/<version>`).

    Raises:
        FileNotFoundError: if `directory` holds no `saved_model.pb`.
        ArgumentError: if the export takes token ids only (`text=False`).

    Examples:
        ```python
        engine = SavedModelTranslator("saved_models/numbers_de_en/1")
        engine(["siebzehn"])  # ['seventeen']
        engine.translate(["siebzehn"]).best  # ['seventeen']
        ```
    """

    def __init__(self, directory: str):
        if not os.path.isfile(os.path.join(directory, "saved_model.pb")):
            raise FileNotFoundError(
                f"No SavedModel in {os.fspath(directory)!r} (saved_model.pb is missing)"
            )
        import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

        self.directory = os.fspath(directory)
        self._loaded = tf.saved_model.load(self.directory)
        serving = self._loaded.signatures[SERVING_SIGNATURE]
        if "inputs" not in serving.structured_input_signature[1]:
            raise ArgumentError(
                f"The SavedModel in {self.directory!r} takes token ids (it was exported with "
                "text=False); translate strings with a run directory or a text export."
            )
        self._serve = serving
        extra = os.path.join(self.directory, EXTRA_DIR)
        written = None
        if os.path.isfile(os.path.join(extra, OPTIONS_FILE)):
            written = read_options(extra, OPTIONS_FILE, "SavedModel")
        self.options = None if written is None else DecodeOptions.from_dict(written)
        self.max_source_length = None if written is None else self.options.max_source_length
        self.n_best = None if written is None else self.options.n_best

    def __call__(self, sentences: Sequence[str]) -> list[str]:
        """The best translation of each of `sentences` `(B,)` (`serving_default`)."""
        outputs = self._serve(inputs=check_sentences(sentences))["outputs"]
        return translations_of(outputs).tolist()

    def translate(self, sentences, prefixes=None, constraints=None) -> Translations:
        """Translations with their scores, as every engine gives them (`inference.engine`).

        Args:
            sentences: strings `(B,)`.
            prefixes: not taken (an `ArgumentError` says so): the
                `translate_with_prefix` signature gives the best translation
                alone, without its score; call it for prefixes.
            constraints: not taken either (`translate_constrained`).

        Returns:
            `inference.Translations` of `n_best` translations a sentence.
        """
        refuse_arguments(
            self,
            "its signatures for prefixes and constraints give the best translation without "
            "its score",
            prefixes=prefixes,
            constraints=constraints,
        )
        self._check_written("translate")
        sentences = check_sentences(sentences)
        result = self._loaded.signatures[N_BEST_SIGNATURE](inputs=sentences)
        return Translations.of(result["translations"], result["scores"], self.truncated(sentences))

    def signature(self, name):
        """The concrete function of the signature `name` (`export_translator` lists them),
        or an `ArgumentError` naming those the SavedModel has."""
        if name not in self._loaded.signatures:
            raise ArgumentError(
                f"The SavedModel in {self.directory!r} has no signature {name!r}; it has "
                f"{', '.join(sorted(self._loaded.signatures))}."
            )
        return self._loaded.signatures[name]

    def truncated(self, sentences):
        """Which of `sentences` `(B,)` are cut to `max_source_length`: bool array `(B,)`."""
        self._check_written("truncated")
        return getattr(self._loaded, TRUNCATED_FUNCTION)(check_sentences(sentences)).numpy()

    def _check_written(self, method):
        if self.options is None:  # written with the `truncated` function, by the same release
            raise ArgumentError(
                f"The SavedModel in {self.directory!r} was exported by an earlier release of "
                f"keras_transformer, without {EXTRA_DIR}/{OPTIONS_FILE}: `{method}` needs it. "
                "Calling the engine still translates; export the run again for the rest."
            )
