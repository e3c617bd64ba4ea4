"""Exporting a trained run: a SavedModel for TF Serving, a CTranslate2 model, LiteRT, or an
OPUS-MT model directory in Marian's layout or Hugging Face's."""

import os

from keras_transformer.export import SAVED_MODELS_DIR, export_translator
from keras_transformer.run.directory import RunDirectory
from keras_transformer.run.translators import make_translator


def export(
    run_dir: str,
    name: str | None = None,
    base_dir: str = SAVED_MODELS_DIR,
    version: int | None = None,
    checkpoint: str = "best",
    text: bool = True,
    xla: bool = False,
    n_best: int | None = None,
    **kw,
) -> str:
    """Exports a run as `{base_dir}/{name}/{version}/`; `name` defaults to the run's.

    `text=False` leaves out the tokenizers, `xla=True` keeps the XLA-compiled
    search and `n_best` is N of the `translate_n_best` signature (see
    `export_translator`); other keyword arguments go to the `Translator`
    (`beam_size`, `alpha`, the length options).

    Examples:
        ```python
        export("runs/numbers")  # saved_models/numbers/1
        ```
    """
    translator = make_translator(run_dir, checkpoint, **kw)
    name = name or RunDirectory(run_dir).name
    return export_translator(
        translator, name, base_dir=base_dir, version=version, text=text, xla=xla, n_best=n_best
    )


def export_ctranslate2_run(
    run_dir: str,
    directory: str | None = None,
    base_dir: str = SAVED_MODELS_DIR,
    checkpoint: str = "best",
    quantization: str | None = None,
    **kw,
) -> str:
    """Exports a run as a CTranslate2 model directory (see `export_ctranslate2`).

    `directory` defaults to `{base_dir}/{run name}-ctranslate2-{quantization}`
    (`float32` without quantization); other keyword arguments go to the
    `Translator` whose options are saved with it (`beam_size`, `alpha`).

    Examples:
        ```python
        export_ctranslate2_run("runs/numbers", quantization="int8")
        ```
    """
    from keras_transformer.export.ctranslate2 import export_ctranslate2

    translator = make_translator(run_dir, checkpoint, **kw)
    directory = directory or default_directory(run_dir, base_dir, "ctranslate2", quantization)
    return export_ctranslate2(translator, directory, quantization=quantization)


def export_litert_run(
    run_dir: str,
    directory: str | None = None,
    base_dir: str = SAVED_MODELS_DIR,
    checkpoint: str = "best",
    quantization: str | None = None,
    max_source_length: int | None = None,
    batch_size: int | None = 1,
    **kw,
) -> str:
    """Exports a run as a LiteRT translator directory (see `export_litert`).

    `directory` defaults to `{base_dir}/{run name}-litert-{quantization}`
    (`float32` without quantization); `batch_size` is the file's sentences a
    call (None: any number); other keyword arguments go to the `Translator`
    whose search is exported (`beam_size`, `alpha`, the length options).

    Examples:
        ```python
        export_litert_run("runs/numbers", quantization="dynamic_int8")
        export_litert_run("runs/numbers", "litert/batches", batch_size=None)
        ```
    """
    from keras_transformer.export.litert import MAX_SOURCE_LENGTH, export_litert

    translator = make_translator(run_dir, checkpoint, **kw)
    directory = directory or default_directory(run_dir, base_dir, "litert", quantization)
    return export_litert(
        translator, directory, quantization, max_source_length or MAX_SOURCE_LENGTH, batch_size
    )


def export_marian_run(
    run_dir: str,
    directory: str | None = None,
    base_dir: str = SAVED_MODELS_DIR,
    checkpoint: str = "best",
    **kw,
) -> str:
    """Exports a run as an OPUS-MT (Marian) model directory (see `export_marian`), which
    Marian, CTranslate2's `OpusMTConverter` and `import --format marian` read.

    `directory` defaults to `{base_dir}/{run name}-marian`; other keyword
    arguments go to the `Translator` whose beam and length normalization
    `decoder.yml` records (`beam_size`, `alpha`, `length_penalty`).

    Examples:
        ```python
        export_marian_run("runs/numbers")  # saved_models/numbers-marian
        ```
    """
    from keras_transformer.export.marian import export_marian

    translator = make_translator(run_dir, checkpoint, **kw)
    directory = directory or os.path.join(base_dir, f"{RunDirectory(run_dir).name}-marian")
    return export_marian(translator, directory)


def export_hugging_face_run(
    run_dir: str,
    directory: str | None = None,
    base_dir: str = SAVED_MODELS_DIR,
    checkpoint: str = "best",
    **kw,
) -> str:
    """Exports a run in Hugging Face's layout of OPUS-MT models (see
    `export_hugging_face`), which `transformers`' `MarianMTModel` and `import` read.

    `directory` defaults to `{base_dir}/{run name}-hugging_face`; other keyword
    arguments go to the `Translator` whose beam and length normalization
    `generation_config.json` records.

    Examples:
        ```python
        export_hugging_face_run("runs/numbers")  # saved_models/numbers-hugging_face
        ```
    """
    from keras_transformer.export.hugging_face import export_hugging_face

    translator = make_translator(run_dir, checkpoint, **kw)
    name = f"{RunDirectory(run_dir).name}-hugging_face"
    return export_hugging_face(translator, directory or os.path.join(base_dir, name))


def default_directory(run_dir, base_dir, export_format, quantization):
    """`{base_dir}/{run name}-{export_format}-{quantization or "float32"}`."""
    name = f"{RunDirectory(run_dir).name}-{export_format}-{quantization or 'float32'}"
    return os.path.join(base_dir, name)
