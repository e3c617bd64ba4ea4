"""What a CTranslate2 export directory holds beside CTranslate2's own files, read by
`ctranslate2_runtime` and written by `ctranslate2`, and the import both need."""

from keras_transformer.errors import MissingDependencyError

DECODE_FILE = "keras_transformer.json"  # the `DecodeOptions` of the export, and its own keys
SOURCE_TOKENIZER = "source_tokenizer"
TARGET_TOKENIZER = "target_tokenizer"


def import_ctranslate2():
    """The `ctranslate2` module, or a `MissingDependencyError` that says how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise MissingDependencyError(
            "The CTranslate2 export needs the `ctranslate2` package: "
            'pip install "keras-transformer-nmt[ctranslate2]"'
        ) from error
    return ctranslate2
