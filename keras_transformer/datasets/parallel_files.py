"""Line-aligned parallel text files, plain or gzip, such as Multi30k's `{split}.{lang}.gz`."""

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.datasets.streaming import split_file_pairs
from keras_transformer.errors import ArgumentError
from keras_transformer.files import read_lines


def load_parallel_files(source_path, target_path):
    """Reads two line-aligned files into a `ParallelCorpus`.

    Args:
        source_path: source sentences, one a line (plain or `.gz`, UTF-8).
        target_path: their translations, line for line.

    Returns:
        `ParallelCorpus`.

    Raises:
        FileNotFoundError: if a file is missing.
        ValueError: if a file is not UTF-8, or the files differ in line count.

    Examples:
        >>> corpus = load_parallel_files("train.de.gz", "train.en.gz")
    """
    sources = read_lines(source_path)
    targets = read_lines(target_path)
    if len(sources) != len(targets):
        raise ArgumentError(
            f"Parallel files differ in line count: {source_path!r} has {len(sources)} "
            f"lines, {target_path!r} has {len(targets)}"
        )
    return ParallelCorpus(sources, targets)


def load_split(directory, split, source_lang, target_lang):
    """Reads `{directory}/{split}.{lang}` (or `.gz`, or the shards `{split}-*`) for both sides.

    Args:
        directory: e.g. a Multi30k directory holding `train.de.gz`, `train.en.gz`.
        split: e.g. `"train"`, `"val"`, `"test_2016_flickr"`.
        source_lang: source language code, e.g. `"de"`.
        target_lang: target language code, e.g. `"en"`.

    Examples:
        >>> train = load_split("data/multi30k", "train", "de", "en")
    """
    sources, targets = split_file_pairs(directory, split, source_lang, target_lang)
    pairs = [load_parallel_files(s, t) for s, t in zip(sources, targets, strict=True)]
    return ParallelCorpus(
        [s for pair in pairs for s in pair.sources], [t for pair in pairs for t in pair.targets]
    )
