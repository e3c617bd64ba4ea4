"""The run-level commands: train, evaluate, score, average, export and plot a run directory,
and import one from another toolkit (`import_marian`, over `keras_transformer.importers`).

Each takes a run directory (`RunDirectory` owns its layout) and the run's
configuration; the command line (`keras_transformer.cli`) is a thin layer
over them.

Examples:
    ```python
    config = load_config(overrides=["train.epochs=2"])
    train("runs/numbers", config)
    print(evaluate("runs/numbers")["bleu"])
    ```
"""

from keras_transformer.lazy import lazy_attributes
from keras_transformer.run.average import average_checkpoints
from keras_transformer.run.data import corpus_split, training_and_validation_batches
from keras_transformer.run.directory import RunDirectory
from keras_transformer.run.engines import open_engine
from keras_transformer.run.evaluate import evaluate, score_pairs, score_translations
from keras_transformer.run.export import (
    export,
    export_ctranslate2_run,
    export_hugging_face_run,
    export_litert_run,
    export_marian_run,
)
from keras_transformer.run.opus_mt import import_marian
from keras_transformer.run.plots import plot_attention, plot_run
from keras_transformer.run.train import build_model, compile_from_config, set_precision, train
from keras_transformer.run.translators import (
    load_models,
    load_run,
    load_shortlist,
    make_translator,
    translators,
)

__all__ = [
    "RunDirectory",
    "average_checkpoints",
    "build_model",
    "compile_from_config",
    "corpus_split",
    "evaluate",
    "export",
    "export_ctranslate2_run",
    "export_hugging_face_run",
    "export_litert_run",
    "export_marian_run",
    "import_marian",
    "load_models",
    "load_run",
    "load_shortlist",
    "make_translator",
    "open_engine",
    "plot_attention",
    "plot_run",
    "score_pairs",
    "score_translations",
    "set_precision",
    "train",
    "training_and_validation_batches",
    "translators",
]

# The readers of other toolkits' models moved to `keras_transformer.importers`.
__getattr__, _ = lazy_attributes(
    __name__,
    {},
    moved={
        name: f"keras_transformer.importers:{name}"
        for name in ("read_hugging_face", "read_marian", "read_opus_mt")
    },
)
