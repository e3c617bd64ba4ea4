"""Exports: SavedModel for TF Serving (string and token-id signatures), CTranslate2, LiteRT,
OPUS-MT directories in Marian's and Hugging Face's layouts (`export_marian`,
`export_hugging_face`), and the engines that translate with each
(`SavedModelTranslator`, `CTranslate2Translator`, `LiteRTTranslator`)."""

from keras_transformer.export.ctranslate2 import ctranslate2_spec, export_ctranslate2, write_spec
from keras_transformer.export.ctranslate2_runtime import CTranslate2Translator
from keras_transformer.export.hugging_face import export_hugging_face
from keras_transformer.export.litert import export_litert
from keras_transformer.export.litert_runtime import LiteRTTranslator
from keras_transformer.export.marian import export_marian
from keras_transformer.export.saved_model import (
    IDS_SIGNATURE,
    SAVED_MODELS_DIR,
    SERVING_SIGNATURE,
    export_translator,
    next_version,
)
from keras_transformer.export.saved_model_runtime import SavedModelTranslator

__all__ = [
    "CTranslate2Translator",
    "LiteRTTranslator",
    "IDS_SIGNATURE",
    "SAVED_MODELS_DIR",
    "SavedModelTranslator",
    "SERVING_SIGNATURE",
    "ctranslate2_spec",
    "export_ctranslate2",
    "export_hugging_face",
    "export_litert",
    "export_marian",
    "export_translator",
    "next_version",
    "write_spec",
]
