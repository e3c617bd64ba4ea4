"""How a source sentence's pieces become the ids an encoder reads: cut to a limit, then EOS.

Every path that encodes a source (`Translator` and the SavedModel in the graph, the
LiteRT and CTranslate2 runtimes in Python, the training pipeline) cuts it with one
`SourcePolicy`, so that an over-long sentence reads the same pieces wherever it is
translated.
"""

import dataclasses

import tensorflow as tf

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.validation import check_positive_int


@dataclasses.dataclass(frozen=True)
class SourcePolicy:
    """A source keeps its first pieces, then gets `eos_id`: `prefix` (a target-language
    token, `text.languages`), then as many pieces as fit in `max_length` with EOS.

    A source is truncated when its prefix, pieces and EOS are more than
    `max_length` tokens. An empty source is `[*prefix, eos_id]`.

    Args:
        max_length: longest source in tokens, prefix and EOS included.
        eos_id: the id that ends every source.
        prefix: ids every source starts with.

    Examples:
        >>> policy = SourcePolicy(max_length=3, eos_id=3)
        >>> policy.ids([7, 8, 9]), policy.truncated(3)
        ([7, 8, 3], True)
    """

    max_length: int
    eos_id: int
    prefix: tuple = ()

    def __post_init__(self):
        check_positive_int("max_length", self.max_length)
        if self.max_length <= len(self.prefix):
            raise ArgumentError(
                f"`max_length` must leave room for EOS after the prefix {list(self.prefix)}. "
                f"Received: max_length={self.max_length}"
            )

    @property
    def kept(self):
        """How many of a source's own pieces fit beside the prefix and EOS."""
        return self.max_length - 1 - len(self.prefix)

    def pieces(self, pieces):
        """The pieces a source reads before EOS, of its piece ids (a list or a 1-D
        tensor): the prefix, then its first pieces."""
        kept = pieces[: self.kept]
        if not self.prefix:
            return kept
        if isinstance(kept, tf.Tensor):
            return tf.concat([tf.constant(self.prefix, kept.dtype), kept], axis=0)
        return [*self.prefix, *kept]

    def ids(self, pieces):
        """The source ids of a list of piece ids: the prefix, kept pieces, then EOS."""
        return [*self.pieces(list(pieces)), self.eos_id]

    def truncated(self, num_pieces):
        """Whether a source of `num_pieces` pieces (prefix and EOS not counted) is cut."""
        return num_pieces > self.kept

    def tf_ids(self, pieces):
        """Source ids of ragged piece ids `(B, None)`: int32 `(B, S)`, EOS then PAD."""
        pieces = pieces[:, : self.kept]
        if self.prefix:
            rows = tf.shape(pieces.row_lengths())[0]
            prefix = tf.tile(tf.constant([self.prefix], pieces.dtype), [rows, 1])  # (B, P)
            pieces = tf.concat([tf.RaggedTensor.from_tensor(prefix), pieces], axis=1)
        dense = tf.pad(pieces.to_tensor(PAD_ID), [[0, 0], [0, 1]], constant_values=PAD_ID)
        lengths = tf.cast(pieces.row_lengths(), tf.int32)  # (B,)
        at_end = tf.range(tf.shape(dense)[1])[None, :] == lengths[:, None]  # (B, S)
        return tf.where(at_end, tf.cast(self.eos_id, dense.dtype), dense)  # (B, S)

    def tf_truncated(self, pieces):
        """Which rows of ragged piece ids `(B, None)` are cut: bool `(B,)`."""
        return pieces.row_lengths() > self.kept
