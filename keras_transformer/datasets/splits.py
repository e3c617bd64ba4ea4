"""One split of a corpus named by its kind: the built-in numbers, text files, TSV or TFDS."""

import os

import numpy as np

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.datasets.numbers import numbers_corpus
from keras_transformer.datasets.parallel_files import load_split
from keras_transformer.datasets.streaming import StreamingCorpus
from keras_transformer.datasets.tfds import load_tfds
from keras_transformer.datasets.tsv import load_tsv
from keras_transformer.errors import ArgumentError

CORPUS_KINDS = ("numbers", "files", "tsv", "tfds")


def load_corpus(
    kind,
    split,
    source_lang="de",
    target_lang="en",
    directory=None,
    path=None,
    name=None,
    stream=False,
    split_names=("train", "val", "test"),
    limit=None,
):
    """The `split` of a corpus of one of `CORPUS_KINDS`.

    Args:
        kind: `"numbers"` (built in), `"files"` (`{split}.{lang}[.gz]`, or
            shards `{split}-*.{lang}[.gz]`, in `directory`), `"tsv"` (the
            file `path`, split 96/2/2 by a fixed shuffle) or `"tfds"` (the
            TensorFlow Datasets set `name`).
        split: a split name, e.g. `"train"`.
        source_lang: the source language's code.
        target_lang: the target language's code.
        directory: for `files`; environment variables in it are expanded.
        path: for `tsv`.
        name: for `tfds`.
        stream: for `files`, a `StreamingCorpus` that reads the files as
            they are needed instead of a list in memory.
        split_names: the names of the training, validation and test splits
            of a TSV file.
        limit: the first `limit` pairs only (the built-in numbers then write
            out no more than those).

    Returns:
        A `ParallelCorpus`, or a `StreamingCorpus` when streaming files.

    Raises:
        ArgumentError: if `kind` is unknown or lacks what it needs.

    Examples:
        ```python
        corpus = load_corpus("numbers", "val")
        ```
    """
    if kind == "numbers":
        return numbers_corpus(split, source_lang, target_lang, limit=limit)
    if kind == "files":
        expanded = os.path.expandvars(directory or "")
        if not expanded or "$" in expanded:
            raise ArgumentError(
                "A corpus of files needs a `directory` (environment variables in it "
                f"must be set). Received: directory={directory!r}"
            )
        if stream:
            corpus = StreamingCorpus.from_directory(expanded, split, source_lang, target_lang)
        else:
            corpus = load_split(expanded, split, source_lang, target_lang)
    elif kind == "tsv":
        if not path:
            raise ArgumentError("A TSV corpus needs a `path`. Received: path=None")
        corpus = tsv_split(load_tsv(path), split, split_names)
    elif kind == "tfds":
        if not name:
            raise ArgumentError("A TFDS corpus needs a `name`. Received: name=None")
        corpus = load_tfds(name, split)
    else:
        raise ArgumentError(f"`kind` must be one of {CORPUS_KINDS}. Received: kind={kind!r}")
    return corpus if limit is None else corpus[:limit]


def tsv_split(corpus, split, split_names):
    """A fixed shuffle of a TSV file: the last 2% is test, the 2% before it val."""
    order = np.random.default_rng(0).permutation(len(corpus))
    held = max(1, len(corpus) // 50)
    train, val, test = split_names
    parts = {train: order[: -2 * held], val: order[-2 * held : -held], test: order[-held:]}
    if split not in parts:
        raise ArgumentError(f"A TSV corpus has the splits {sorted(parts)}. Received: {split!r}")
    chosen = parts[split]
    return ParallelCorpus([corpus.sources[i] for i in chosen], [corpus.targets[i] for i in chosen])
