"""Imports: models trained by other toolkits read into the package's `Transformer`, the
mirror of `keras_transformer.export`.

`read_marian` reads Marian's own layout of an OPUS-MT model, `read_hugging_face`
the Hugging Face Hub's copy, `read_opus_mt` either; `marian_transformer` builds
the model with the weights read. `keras_transformer.run.import_marian` writes
the result as a run directory.

Examples:
    ```python
    marian = read_opus_mt("opus-mt-de-en")
    model = marian_transformer(marian)
    ```
"""

from keras_transformer.importers.hugging_face import read_hugging_face
from keras_transformer.importers.marian import MarianModel, marian_transformer, read_marian
from keras_transformer.importers.opus_mt import read_opus_mt

__all__ = ["MarianModel", "marian_transformer", "read_hugging_face", "read_marian", "read_opus_mt"]
