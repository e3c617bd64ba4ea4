"""`SavedModelHandler`: the package's SavedModel as a model of Beam's `RunInference`.

Beam's own `TFModelHandlerTensor` loads a model with `tf.keras.models.load_model`,
which in Keras 3 reads `.keras` files only, and needs `tensorflow_hub`; this
handler loads the SavedModel with `tf.saved_model.load` (and the TensorFlow Text
ops) in each worker, as TF Serving does, and calls one of its string signatures.
"""

from collections.abc import Sequence
from typing import Any, NamedTuple

from apache_beam.ml.inference.base import ModelHandler

from keras_transformer.export.saved_model_layout import (
    CONSTRAINED_SIGNATURE,
    N_BEST_SIGNATURE,
    PREFIX_SIGNATURE,
    SERVING_SIGNATURE,
)
from keras_transformer.validation import check_choice, check_positive_int

METRICS = "keras_transformer"  # the namespace of the pipeline's metrics
SIGNATURES = (SERVING_SIGNATURE, N_BEST_SIGNATURE, PREFIX_SIGNATURE, CONSTRAINED_SIGNATURE)
"""The signatures a corpus can be translated with; the input line of each:
`serving_default` and `translate_n_best` a source sentence,
`translate_with_prefix` `source<TAB>prefix`, `translate_constrained`
`source<TAB>phrase<TAB>phrase...` (the phrases the translation must hold)."""


class Translated(NamedTuple):
    """What `SavedModelHandler` gives for one input line.

    Attributes:
        hypotheses: `(translation, score)` pairs, best first: `n_best` of them
            from `translate_n_best`, one from the other signatures (their
            score is NaN: those signatures return text only).
        truncated: whether the source was longer than the model reads and was
            translated cut to `max_source_length` tokens, as `translate` does.
    """

    hypotheses: list[tuple[str, float]]
    truncated: bool


class SavedModelHandler(ModelHandler[str, Translated, Any]):
    """Translates batches of lines with a SavedModel written by `export_translator`.

    Args:
        saved_model: the SavedModel's version directory
            (`saved_models/<name>/<version>`), on any file system the workers
            read (`gs://...` on Dataflow).
        signature: one of `SIGNATURES`; it fixes what an input line holds.
        max_batch_size: lines a call of the signature translates at most.
        **kwargs: further `ModelHandler` arguments (`min_batch_size`,
            `batch_length_fn`, `model_copies`, ...).

    Examples:
        ```python
        import apache_beam as beam
        from apache_beam.ml.inference.base import RunInference

        with beam.Pipeline() as p:
            (p | beam.Create(["siebzehn", "zwei"])
               | RunInference(SavedModelHandler("saved_models/numbers_de_en/1"))
               | beam.Map(print))  # Translated(hypotheses=[('seventeen', nan)], ...)
        ```
    """

    def __init__(self, saved_model, signature=SERVING_SIGNATURE, max_batch_size=64, **kwargs):
        check_choice("signature", signature, set(SIGNATURES))
        check_positive_int("max_batch_size", max_batch_size)
        super().__init__(max_batch_size=max_batch_size, **kwargs)
        self.saved_model = str(saved_model)
        self.signature = signature

    def load_model(self):
        """The SavedModel as an engine (`export.SavedModelTranslator`), once per worker."""
        from keras_transformer.export import SavedModelTranslator

        return SavedModelTranslator(self.saved_model)

    def run_inference(self, batch: Sequence[str], model, inference_args=None) -> list[Translated]:
        """`Translated` of each line of `batch`, in its order."""
        sources, extra = split_lines(batch, self.signature)
        cut = model.truncated(sources)
        if self.signature == N_BEST_SIGNATURE:
            result = model.signature(N_BEST_SIGNATURE)(inputs=sources)
            texts, scores = result["translations"].numpy(), result["scores"].numpy()
            return [
                Translated(
                    [(t.decode("utf-8"), float(s)) for t, s in zip(row, row_scores, strict=True)],
                    bool(c),
                )
                for row, row_scores, c in zip(texts, scores, cut, strict=True)
            ]
        if self.signature == PREFIX_SIGNATURE:
            outputs = model.signature(PREFIX_SIGNATURE)(inputs=sources, prefixes=extra)
        elif self.signature == CONSTRAINED_SIGNATURE:
            outputs = model.signature(CONSTRAINED_SIGNATURE)(inputs=sources, constraints=extra)
        else:
            outputs = model.signature(SERVING_SIGNATURE)(inputs=sources)
        texts = outputs["outputs"].numpy()
        return [
            Translated([(t.decode("utf-8"), float("nan"))], bool(c))
            for t, c in zip(texts, cut, strict=True)
        ]

    def get_metrics_namespace(self) -> str:
        return METRICS


def split_lines(lines, signature):
    """`(sources, extra)` of input lines for `signature`: the sources `(B,)`, and the
    prefixes `(B,)` or the constraint phrases `(B, C)` ("" where a row has fewer), or None.

    Examples:
        >>> split_lines(["zwei\\ttwo"], "translate_with_prefix")
        (['zwei'], ['two'])
        >>> split_lines(["zwei\\tt\\tw", "drei"], "translate_constrained")
        (['zwei', 'drei'], [['t', 'w'], ['', '']])
    """
    if signature in (SERVING_SIGNATURE, N_BEST_SIGNATURE):
        return list(lines), None
    if signature == PREFIX_SIGNATURE:
        fields = [line.split("\t", 1) for line in lines]
        return [row[0] for row in fields], [row[1] if len(row) > 1 else "" for row in fields]
    fields = [line.split("\t") for line in lines]
    sources = [row[0] for row in fields]
    phrases = [[p for p in row[1:] if p] for row in fields]
    width = max([1, *(len(row) for row in phrases)])
    return sources, [row + [""] * (width - len(row)) for row in phrases]
