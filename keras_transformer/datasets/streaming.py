"""Parallel text files read line by line in `tf.data`, for corpora larger than memory.

A split is one pair of files, `{split}.{lang}` (or `.gz`), or several shards
`{split}-*.{lang}` (or `.gz`), shard i of the source aligned line by line with
shard i of the target. `StreamingCorpus.to_dataset` reads them with
`TextLineDataset`, interleaving the shards, and checks as it reads that each
pair of shards ends on the same line.
"""

import glob
import os

import numpy as np
import tensorflow as tf

from keras_transformer.errors import ArgumentError, from_assertion

LINES_PER_BLOCK = 1024  # lines read, and checked for alignment, at a time


def split_files(directory, split, lang):
    """The files of one side of a split: `{split}.{lang}[.gz]`, else the shards `{split}-*`."""
    for name in (f"{split}.{lang}", f"{split}.{lang}.gz"):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return [path]
    shards = sorted(
        glob.glob(os.path.join(directory, f"{split}-*.{lang}"))
        + glob.glob(os.path.join(directory, f"{split}-*.{lang}.gz"))
    )
    if not shards:
        raise FileNotFoundError(
            f"No {split}.{lang} or {split}.{lang}.gz (nor shards {split}-*.{lang}[.gz]) in "
            f"{directory!r}"
            + ("" if os.path.isdir(directory) else " (the directory does not exist)")
        )
    return shards


def shard_name(path, lang):
    """A shard's name without its language and compression: `train-003` of `train-003.de.gz`."""
    name = os.path.basename(path)
    name = name[: -len(".gz")] if name.endswith(".gz") else name
    return name[: -len(f".{lang}")]


def split_file_pairs(directory, split, source_lang, target_lang):
    """`(source_files, target_files)` of a split in `directory`, shards paired by name.

    Raises:
        FileNotFoundError: if a side of the split has no file.
        ValueError: if the two sides' shards do not pair up by name.
    """
    sources = split_files(directory, split, source_lang)
    targets = split_files(directory, split, target_lang)
    source_names = [shard_name(p, source_lang) for p in sources]
    target_names = [shard_name(p, target_lang) for p in targets]
    if source_names != target_names:
        raise ArgumentError(
            f"The {source_lang} and {target_lang} shards of {split!r} in {directory!r} "
            f"do not pair up: {source_names} and {target_names}"
        )
    return sources, targets


class StreamingCorpus:
    """Sentence pairs read from line-aligned files as they are needed, never held whole.

    Args:
        source_files: source paths (plain or `.gz`, UTF-8), one per shard.
        target_files: the target paths, shard for shard.
        limit: only the first `limit` pairs (None: all).

    Raises:
        ValueError: if the two lists differ in length or are empty.
        FileNotFoundError: if a file is missing.

    Examples:
        ```python
        corpus = StreamingCorpus.from_directory("data/wmt", "train", "de", "en")
        batches = make_batches(corpus, tokenizer, tokenizer, cache=False)
        ```
    """

    def __init__(self, source_files, target_files, limit=None):
        source_files, target_files = list(source_files), list(target_files)
        if not source_files or len(source_files) != len(target_files):
            raise ArgumentError(
                "A streaming corpus needs one target file per source file, and at least one. "
                f"Received: {len(source_files)} source and {len(target_files)} target files"
            )
        for path in source_files + target_files:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Text file not found: {path!r}")
        self.source_files = source_files
        self.target_files = target_files
        self.limit = limit

    @classmethod
    def from_directory(cls, directory, split, source_lang, target_lang):
        """The split's files in `directory` (`split_file_pairs`) as a stream."""
        return cls(*split_file_pairs(directory, split, source_lang, target_lang))

    def __getitem__(self, index):
        """`corpus[:n]`, the first n pairs; the only indexing a stream has."""
        if not (isinstance(index, slice) and index.start is None and index.step is None):
            raise TypeError(f"A streaming corpus takes only [:n]. Received: {index!r}")
        if index.stop is None:
            return self
        limit = index.stop if self.limit is None else min(index.stop, self.limit)
        return StreamingCorpus(self.source_files, self.target_files, limit)

    def to_dataset(self, cycle_length=4):
        """A `tf.data.Dataset` of `(source, target)` strings, shards interleaved.

        A pair of shards that ends on different lines stops the stream with
        `InvalidArgumentError` naming both files, when the reader gets there.
        """
        shards = tf.data.Dataset.from_tensor_slices((self.source_files, self.target_files))
        pairs = shards.interleave(
            aligned_lines,
            cycle_length=min(cycle_length, len(self.source_files)),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        return pairs if self.limit is None else pairs.take(self.limit)

    def sample_sentences(self, count, sides=("source", "target"), seed=0):
        """At most `count` sentences drawn uniformly from the stream, in one pass.

        Every sentence gets a random key and the `count` smallest keys win
        (a reservoir sample), so the draw needs memory for `count`
        sentences only.

        Args:
            count: the sample's size.
            sides: which sides of each pair to draw from.
            seed: seed of the draw.
        """
        rng = np.random.default_rng(seed)
        keys, sample = np.empty(0), np.empty(0, dtype=object)
        positions = [("source", "target").index(side) for side in sides]
        try:
            for chunk in self.to_dataset().batch(65536).as_numpy_iterator():
                sentences = np.concatenate([sample] + [chunk[p].astype(object) for p in positions])
                keys = np.concatenate([keys, rng.random(len(sentences) - len(sample))])
                if len(keys) > count:
                    kept = np.argpartition(keys, count)[:count]
                    keys, sentences = keys[kept], sentences[kept]
                sample = sentences
        except tf.errors.InvalidArgumentError as error:  # files that end apart
            raise from_assertion(error) from None
        return [sentence.decode("utf-8") for sentence in sample[np.argsort(keys)]]


def aligned_lines(source_file, target_file, block=LINES_PER_BLOCK):
    """The lines of two files as pairs; an error naming both if one ends first.

    The files are read in blocks of `block` lines, and each pair of blocks
    is checked to hold as many lines, so the check costs one op per block,
    not per line. A file that ends first gives a shorter block, or none,
    where the other still has lines.
    """

    def blocks(path):
        compression = tf.where(tf.strings.regex_full_match(path, r".*\.gz"), "GZIP", "")
        lines = tf.data.TextLineDataset(path, compression_type=compression).batch(block)
        ended = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), False)).repeat()
        return lines.map(lambda lines: (lines, True)).concatenate(ended)

    def check(source, target):
        (source_lines, source_read), (target_lines, target_read) = source, target  # (n,), ()
        same = source_read & target_read & (tf.size(source_lines) == tf.size(target_lines))
        message = ["Parallel files differ in line count: ", source_file, " and ", target_file]
        with tf.control_dependencies([tf.debugging.Assert(same, [tf.strings.join(message)])]):
            return tf.identity(source_lines), tf.identity(target_lines)

    zipped = tf.data.Dataset.zip(blocks(source_file), blocks(target_file))
    return zipped.take_while(lambda source, target: source[1] | target[1]).map(check).unbatch()
