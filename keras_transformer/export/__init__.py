"""Exports: SavedModel for TF Serving (string and token-id signatures), CTranslate2, LiteRT,
an OPUS-MT (Marian) directory (`export_marian`), and the engines that translate with each
(`SavedModelTranslator`, `CTranslate2Translator`, `LiteRTTranslator`)."""

from keras_transformer.export.ctranslate2 import ctranslate2_spec, export_ctranslate2, write_spec
from keras_transformer.export.ctranslate2_runtime import CTranslate2Translator
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
    "export_litert",
    "export_marian",
    "export_translator",
    "next_version",
    "write_spec",
]
