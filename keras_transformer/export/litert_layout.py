"""The files of a LiteRT export, written by `litert` and read by `litert_runtime`."""

LITERT_FILE = "translator.tflite"
OPTIONS_FILE = "litert.json"
SOURCE_MODEL = "source.model"
TARGET_MODEL = "target.model"
ID_MAPS = "id_maps.npz"  # SentencePiece's ids <-> the model's, where a vocabulary renumbers
# What `litert.json` holds beside the `DecodeOptions` of the exported search.
# `source_prefix_ids`: the ids every source starts with (a target-language token), and
# `batch_size`: sentences a call (None: any number), which files written before them lack
# (they hold one sentence a call).
EXPORT_KEYS = ("quantization", "batch_size", "eos_id", "source_eos_id", "source_prefix_ids")
