"""Parallel corpora: text files, TSV pairs, TensorFlow Datasets and the built-in numbers."""

from keras_transformer.datasets.corpus import ParallelCorpus
from keras_transformer.datasets.numbers import numbers_corpus, small_numbers, split_numbers
from keras_transformer.datasets.parallel_files import load_parallel_files, load_split, read_lines
from keras_transformer.datasets.splits import load_corpus
from keras_transformer.datasets.streaming import StreamingCorpus
from keras_transformer.datasets.tfds import load_tfds
from keras_transformer.datasets.tsv import load_tsv

__all__ = [
    "ParallelCorpus",
    "StreamingCorpus",
    "load_corpus",
    "load_parallel_files",
    "load_split",
    "load_tfds",
    "load_tsv",
    "numbers_corpus",
    "read_lines",
    "small_numbers",
    "split_numbers",
]
