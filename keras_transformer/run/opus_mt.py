"""OPUS-MT models as run directories, from Marian's layout or Hugging Face's.

`import_marian` reads a model directory in either layout
(`keras_transformer.importers.read_opus_mt`) and writes a run directory that
`evaluate`, `translate`, `score`, `export` and `train` (fine-tuning) use as if
it had been trained.
"""

import json
import os
import shutil

from keras_transformer.config import default_config, save_config
from keras_transformer.errors import RunError
from keras_transformer.importers import marian_transformer, read_opus_mt
from keras_transformer.model_section import model_section
from keras_transformer.run.directory import RunDirectory
from keras_transformer.text.languages import language_tokens
from keras_transformer.text.marian_tokenizer import MarianTokenizer


def import_marian(model_dir, run_dir):
    """Writes the OPUS-MT model in `model_dir` (Marian's layout or Hugging Face's,
    see `read_opus_mt`) as the run directory `run_dir`.

    The run holds the configuration (the `model` section from Marian's
    options, the `tokenizer` section `type: marian`, `data.corpus: null`, for
    the model comes without its data, the `decode` section its publisher's
    search: the beam and length normalization of `decoder.yml` (or of Hugging
    Face's generation settings), `length_penalty: average` and `patience: 1`,
    as Marian and CTranslate2 decode it, and the rest the defaults),
    the tokenizers (`MarianTokenizer`s of `source.spm` and `target.spm` with
    the vocabulary), `model.keras`, `imported.weights.h5` (the weights that
    `train` fine-tunes from) and `imported.json` (what was read, and the target
    languages of a multi-target model: the codes of its `>>xxx<<` tokens). Training
    it (`train` with a config for the user's data) fine-tunes those weights.

    Args:
        model_dir: the OPUS-MT directory (see `read_marian`).
        run_dir: a new run directory (or an empty one).

    Returns:
        The `RunDirectory`.

    Raises:
        RunError: if `run_dir` holds files already.

    Examples:
        ```python
        import_marian("opus-mt-de-en", "runs/opus-de-en")
        translator = make_translator("runs/opus-de-en", beam_size=4)
        ```
    """
    run = RunDirectory(run_dir)
    if os.path.isdir(run.path) and os.listdir(run.path):
        raise RunError(f"{run.path} holds files already; import into a new --run-dir.")
    marian = read_opus_mt(model_dir)
    model = marian_transformer(marian)
    tokenizers = [
        MarianTokenizer(proto, vocabulary)
        for proto, vocabulary in zip(marian.sentencepiece, marian.vocabularies, strict=True)
    ]
    config = default_config()
    config["model"] = model_section(model)
    config["tokenizer"].update(type=MarianTokenizer.type_name, shared=False)
    config["tokenizer"]["vocab_size"] = tokenizers[0].vocab_size
    config["data"]["corpus"] = None  # no data of its own: evaluate and train are told which
    config["decode"].update(marian.decoding)
    os.makedirs(run.path, exist_ok=True)
    try:
        tokenizers[0].save(run.tokenizer_dir("source"))
        tokenizers[1].save(run.tokenizer_dir("target"))
        model.save(run.model_path("best"))
        model.save_weights(run.imported_weights_path)
        with open(run.imported_path, "w", encoding="utf-8") as f:
            languages = [token[2:-2] for token in language_tokens(marian.vocabularies[0])]
            imported = {"format": marian.layout, "files": marian.files, "options": marian.options}
            json.dump({**imported, "target_languages": languages}, f)
        save_config(config, run.config_path)
    except BaseException:
        shutil.rmtree(run.path, ignore_errors=True)
        raise
    return run
