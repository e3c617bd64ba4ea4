"""Translating lists of strings in batches, sorted by length for speed."""

import tensorflow as tf

from keras_transformer.errors import ArgumentError
from keras_transformer.files import text_items
from keras_transformer.inference.engine import translations_of

# Sentences a call of `translate_lines` and `translate_lines_with_scores` hands the translator.
BATCH_SIZE = 64


def translate_lines(translator, lines, batch_size=BATCH_SIZE):
    """Translates a list of strings in batches, sorted by length for speed.

    Args:
        translator: any engine (`inference.engine`: a `Translator`,
            `LiteRTTranslator`, `CTranslate2Translator`), or any callable from
            a `tf.string` batch `(B,)` to one, such as a loaded SavedModel's
            `serving_default`.
        lines: a list of strings (an `ArgumentError` names one that is not
            UTF-8 text).
        batch_size: sentences per call.

    Returns:
        The translations, a list of strings in the order of `lines`.

    Examples:
        ```python
        translate_lines(translator, ["einundzwanzig", "zwei"])  # ['twenty-one', 'two']
        ```
    """
    lines = text_items(lines, "lines")
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out = [None] * len(lines)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        results = translations_of(translator(tf.constant([lines[i] for i in chunk])))
        for i, text in zip(chunk, results, strict=True):
            out[i] = text
    return out


def translate_lines_with_scores(
    translator, lines, prefixes=None, constraints=None, batch_size=BATCH_SIZE
):
    """`Translator.translate` over a list of strings in batches sorted by length.

    Args:
        translator: any engine (`inference.engine`): a `Translator`,
            `LiteRTTranslator` or `CTranslate2Translator`; one that lacks
            prefixes or constraints refuses them by name.
        lines: a list of source strings.
        prefixes: optional list of target prefixes, one per line ("" for none).
        constraints: optional list of target phrases per line, each a list
            of strings the translation must contain (`[]` for none).
        batch_size: sentences per call.

    Returns:
        Per line, a list of `translator.n_best` pairs `(translation, score)`.

    Examples:
        ```python
        translate_lines_with_scores(translator.copy(n_best=2), ["zwei"])
        # [[('two', -0.01), ('second', -2.3)]]
        ```
    """
    for name, given in [("prefix", prefixes), ("row of constraints", constraints)]:
        if given is not None and len(given) != len(lines):
            raise ArgumentError(
                f"Give one {name} per line. Received: {len(lines)} lines, {len(given)}"
            )
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    out = [None] * len(lines)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        chunk_prefixes = None if prefixes is None else [prefixes[i] for i in chunk]
        chunk_constraints = None if constraints is None else [constraints[i] for i in chunk]
        result = translator.translate([lines[i] for i in chunk], chunk_prefixes, chunk_constraints)
        for i, hypotheses in zip(chunk, result.hypotheses(), strict=True):
            out[i] = hypotheses
    return out
