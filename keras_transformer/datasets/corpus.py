"""`ParallelCorpus`: aligned source and target sentences held in memory."""

import dataclasses
import random

import tensorflow as tf

from keras_transformer.errors import ArgumentError


@dataclasses.dataclass
class ParallelCorpus:
    """Sentence i of `sources` translates to sentence i of `targets`.

    Attributes:
        sources: list of `str`.
        targets: list of `str`, as long as `sources`.
    """

    sources: list
    targets: list

    def __post_init__(self):
        if len(self.sources) != len(self.targets):
            raise ArgumentError(
                "A parallel corpus needs as many targets as sources. "
                f"Received: {len(self.sources)} sources and {len(self.targets)} targets"
            )

    def __len__(self):
        return len(self.sources)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return ParallelCorpus(self.sources[index], self.targets[index])
        return self.sources[index], self.targets[index]

    def to_dataset(self):
        """A `tf.data.Dataset` of `(source, target)` string pairs."""
        return tf.data.Dataset.from_tensor_slices((self.sources, self.targets))

    def sample_sentences(self, count, sides=("source", "target"), seed=0):
        """The sentences of `sides` (sources first), or `count` of them drawn at random."""
        sentences = [s for side in sides for s in getattr(self, f"{side}s")]
        if len(sentences) <= count:
            return sentences
        return random.Random(seed).sample(sentences, count)
