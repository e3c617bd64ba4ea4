"""The corpus a run's `data` configuration section names, one split at a time."""

import os

import numpy as np

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.datasets.numbers import numbers_corpus
from keras_transformer.datasets.parallel_files import load_split
from keras_transformer.datasets.streaming import StreamingCorpus
from keras_transformer.datasets.tfds import load_tfds
from keras_transformer.datasets.tsv import load_tsv
from keras_transformer.validation import ConfigError


def load_corpus(data, split, stream=False):
    """The `split` of the corpus that the `data` config section names.

    Args:
        data: the `data` section of a run configuration (`corpus`,
            `source_lang`, `target_lang`, and `directory`, `path` or `name`).
        split: a split name, e.g. `data["train_split"]`.
        stream: for `files`, a `StreamingCorpus` that reads the files as
            they are needed instead of a list in memory.

    Returns:
        A `ParallelCorpus`, or a `StreamingCorpus` when streaming files.

    Raises:
        ConfigError: if the section lacks what its corpus type needs.

    Example:
    ```python
    corpus = load_corpus(load_config()["data"], "val")  # the built-in numbers
    ```
    """
    corpus, src, tgt = data["corpus"], data["source_lang"], data["target_lang"]
    if corpus == "numbers":
        return numbers_corpus(split, src, tgt)
    if corpus == "files":
        directory = os.path.expandvars(data["directory"] or "")
        if not directory or "$" in directory:
            raise ConfigError(
                "data.corpus=files needs data.directory (environment variables in it "
                f"must be set). Received: {data['directory']!r}"
            )
        if stream:
            return StreamingCorpus.from_directory(directory, split, src, tgt)
        return load_split(directory, split, src, tgt)
    if corpus == "tsv":
        if not data["path"]:
            raise ConfigError("data.corpus=tsv needs data.path")
        return tsv_split(load_tsv(data["path"]), split, data)
    if corpus == "tfds":
        if not data["name"]:
            raise ConfigError("data.corpus=tfds needs data.name")
        return load_tfds(data["name"], split)
    raise ConfigError(f"data.corpus must be numbers, files, tsv or tfds. Received: {corpus!r}")


def tsv_split(corpus, split, data):
    """A fixed shuffle of a TSV file: the last 2% is test, the 2% before it val."""
    order = np.random.default_rng(0).permutation(len(corpus))
    held = max(1, len(corpus) // 50)
    parts = {
        data["train_split"]: order[: -2 * held],
        data["val_split"]: order[-2 * held : -held],
        data["test_split"]: order[-held:],
    }
    if split not in parts:
        raise ConfigError(f"A TSV corpus has the splits {sorted(parts)}. Received: {split!r}")
    chosen = parts[split]
    return ParallelCorpus([corpus.sources[i] for i in chosen], [corpus.targets[i] for i in chosen])
