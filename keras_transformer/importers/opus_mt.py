"""An OPUS-MT model directory in either layout it is published in."""

import os

from keras_transformer.importers.hugging_face import read_hugging_face
from keras_transformer.importers.marian import read_marian


def read_opus_mt(model_dir):
    """Reads the OPUS-MT model in `model_dir`: Marian's layout where it holds
    `decoder.yml`, Hugging Face's where it holds `config.json`.

    Args:
        model_dir: the model's directory.

    Returns:
        A `MarianModel`.

    Raises:
        FileNotFoundError: if `model_dir` holds neither file, or misses another.
    """
    model_dir = os.fspath(model_dir)
    if os.path.isfile(os.path.join(model_dir, "decoder.yml")):
        return read_marian(model_dir)
    if os.path.isfile(os.path.join(model_dir, "config.json")):
        return read_hugging_face(model_dir)
    raise FileNotFoundError(
        f"{model_dir} holds neither decoder.yml (Marian's layout of an OPUS-MT model) nor "
        "config.json (Hugging Face's)."
    )
