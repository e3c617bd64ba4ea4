"""keras_transformer: the encoder-decoder Transformer as Keras 3 layers.

The names most programs need are here (`kt.Transformer`,
`kt.transformer_optimizer`, `kt.Translator`, `kt.DecodeOptions`, `kt.export_translator`,
`kt.import_marian`, ...);
the subpackages `kt.layers`, `kt.models`, `kt.text`, `kt.datasets`,
`kt.training`, `kt.inference`, `kt.export` and `kt.run` hold the rest.
"""

from keras_transformer.startup import import_tensorflow_quietly

import_tensorflow_quietly()  # before Keras imports TensorFlow; see startup.py

import keras  # noqa: E402

from keras_transformer import (  # noqa: E402
    datasets,
    export,
    inference,
    layers,
    models,
    run,
    text,
    training,
)
from keras_transformer.export import export_translator  # noqa: E402
from keras_transformer.inference import DecodeOptions, Translator  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.run.opus_mt import import_marian  # noqa: E402
from keras_transformer.training import (  # noqa: E402
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    TransformerSchedule,
    transformer_optimizer,
)
from keras_transformer.training.memory import keep_freed_memory_for_jax  # noqa: E402

keep_freed_memory_for_jax(keras.backend.backend())  # see training/memory.py

__version__ = "0.2.0.dev0"

__all__ = [
    "DecodeOptions",
    "MaskedAccuracy",
    "MaskedSparseCategoricalCrossentropy",
    "Transformer",
    "TransformerSchedule",
    "Translator",
    "datasets",
    "export",
    "export_translator",
    "import_marian",
    "inference",
    "layers",
    "models",
    "run",
    "text",
    "training",
    "transformer_optimizer",
]
