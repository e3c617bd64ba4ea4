"""Translating corpora larger than one machine on Apache Beam (the `beam` extra).

`translate_corpus` runs a whole job: text files in, each file's translations
out, in order. Its parts compose into larger pipelines: `ReadNumberedLines`,
`TranslateLines` (the SavedModel through `RunInference`), `TranslateFiles`, and
`SavedModelHandler`, the model handler `RunInference` takes.
"""

from keras_transformer.errors import MissingDependencyError

try:
    import apache_beam  # noqa: F401
except ImportError as error:
    raise MissingDependencyError(
        'Translating on Apache Beam needs the `apache-beam` package: pip install "keras-'
        'transformer-nmt[beam]"'
    ) from error

from keras_transformer.beam.handler import SIGNATURES, SavedModelHandler, Translated  # noqa: E402
from keras_transformer.beam.pipeline import (  # noqa: E402
    MALFORMED_FILE,
    TRUNCATED_FILE,
    CorpusReport,
    Malformed,
    ReadNumberedLines,
    TranslateFiles,
    TranslateLines,
    match_files,
    translate_corpus,
)

__all__ = [
    "MALFORMED_FILE",
    "SIGNATURES",
    "TRUNCATED_FILE",
    "CorpusReport",
    "Malformed",
    "ReadNumberedLines",
    "SavedModelHandler",
    "TranslateFiles",
    "TranslateLines",
    "Translated",
    "match_files",
    "translate_corpus",
]
