"""The run-level commands under the name they had before `keras_transformer.run`.

Nothing is defined here; see `keras_transformer.run`.
"""

from keras_transformer import run
from keras_transformer.errors import RunError
from keras_transformer.run import (  # noqa: F401  (re-exported through __all__)
    RunDirectory,
    average_checkpoints,
    build_model,
    compile_from_config,
    corpus_split,
    evaluate,
    export,
    export_ctranslate2_run,
    load_models,
    load_run,
    make_translator,
    score_pairs,
    score_translations,
    train,
    translators,
)

__all__ = [*run.__all__, "RunError"]
