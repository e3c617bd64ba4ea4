"""The files of a LiteRT export, written by `litert` and read by `litert_runtime`."""

LITERT_FILE = "translator.tflite"
OPTIONS_FILE = "litert.json"
SOURCE_MODEL = "source.model"
TARGET_MODEL = "target.model"
ID_MAPS = "id_maps.npz"  # SentencePiece's ids <-> the model's, where a vocabulary renumbers
# What `litert.json` holds beside the `DecodeOptions` of the exported search.
EXPORT_KEYS = ("quantization", "eos_id", "source_eos_id")
