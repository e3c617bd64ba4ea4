"""keras_transformer: the encoder-decoder Transformer as Keras 3 layers.

The names most programs need are here (`kt.Transformer`,
`kt.transformer_optimizer`, `kt.Translator`, `kt.DecodeOptions`, `kt.export_translator`,
`kt.import_marian`, ...);
the subpackages `kt.layers`, `kt.models`, `kt.text`, `kt.datasets`,
`kt.training`, `kt.inference`, `kt.export`, `kt.importers`, `kt.run` and `kt.beam`
(Apache Beam, the `beam` extra) hold the rest. Importing the package loads what
Keras needs to load a saved model (the layers, the model and the training
objects); the other subpackages load on first use.
"""

from typing import TYPE_CHECKING

from keras_transformer.startup import import_tensorflow_quietly

import_tensorflow_quietly()  # before Keras imports TensorFlow; see startup.py

# What Keras needs to load a `.keras` file of the package: its layers, model, losses,
# metrics, optimizers and schedules register themselves when imported.
from keras_transformer import layers, models, training  # noqa: E402
from keras_transformer.lazy import lazy_attributes  # noqa: E402
from keras_transformer.models import Transformer  # noqa: E402
from keras_transformer.training import (  # noqa: E402
    MaskedAccuracy,
    MaskedSparseCategoricalCrossentropy,
    TransformerSchedule,
    transformer_optimizer,
)

__version__ = "0.2.0.dev0"

if TYPE_CHECKING:  # the names below, as type checkers and the API reference read them
    from keras_transformer import datasets, export, importers, inference, run, text
    from keras_transformer.export import export_translator
    from keras_transformer.inference import DecodeOptions, Translator
    from keras_transformer.run import import_marian

# The rest is imported on first use: `import keras_transformer` stays light.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "beam": "keras_transformer.beam",
        "datasets": "keras_transformer.datasets",
        "export": "keras_transformer.export",
        "importers": "keras_transformer.importers",
        "inference": "keras_transformer.inference",
        "run": "keras_transformer.run",
        "text": "keras_transformer.text",
        "DecodeOptions": "keras_transformer.inference:DecodeOptions",
        "Translator": "keras_transformer.inference:Translator",
        "export_translator": "keras_transformer.export:export_translator",
        "import_marian": "keras_transformer.run:import_marian",
    },
)

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
    "importers",
    "inference",
    "layers",
    "models",
    "run",
    "text",
    "training",
    "transformer_optimizer",
]
