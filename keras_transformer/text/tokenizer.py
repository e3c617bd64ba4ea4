"""The interface every tokenizer of the package shares.

A tokenizer maps strings to ragged int32 ids and back, in TensorFlow ops, so
it runs inside `tf.data` and inside an exported SavedModel. Id 0 is padding
for every tokenizer (the model's masks read it so); the ids of BOS, EOS and
the unknown piece are those of its vocabulary: the package's
(`keras_transformer.constants`) for the vocabularies it trains, others for a
SentencePiece model that numbers them differently.
"""

import json
import os

import numpy as np
import tensorflow as tf

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from keras_transformer.errors import ArgumentError

CONFIG_FILE = "tokenizer.json"


class Tokenizer(tf.Module):
    """Base class: strings <-> ragged token ids, with the special ids above.

    Subclasses set `type_name` and `asset_file`, and implement `_tokenize`,
    `_detokenize`, `vocab_size`, `pieces`, `_continues_word`, `write_asset`, `from_asset` and
    `get_config`.
    """

    type_name = None
    asset_file = None
    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def tokenize(self, strings):
        """Splits each string into subword ids.

        Args:
            strings: a string or a 1-D batch of strings (Python or `tf.string`).

        Returns:
            `tf.RaggedTensor` of int32 ids, `(B, None)`; no BOS or EOS added.
        """
        strings = tf.convert_to_tensor(strings)
        if strings.dtype != tf.string:
            raise ArgumentError(
                f"`strings` must be text (tf.string). Received: strings with dtype={strings.dtype}"
            )
        return tf.cast(self._tokenize(strings), tf.int32)

    def detokenize(self, token_ids):
        """Joins ids back into strings.

        Padding and BOS are dropped, and each row ends at its first EOS, so the
        raw output of a decoder can be passed as it is.

        Args:
            token_ids: int ids, dense `(B, T)` (0 = padding) or ragged.

        Returns:
            `tf.string` tensor `(B,)`.
        """
        if isinstance(token_ids, tf.RaggedTensor):
            token_ids = token_ids.to_tensor(default_value=self.pad_id)
        token_ids = tf.convert_to_tensor(token_ids)
        if not token_ids.dtype.is_integer:
            raise ArgumentError(
                f"`token_ids` must be integer ids. Received: token_ids with dtype={token_ids.dtype}"
            )
        token_ids = tf.cast(token_ids, tf.int32)
        is_eos = tf.cast(token_ids == self.eos_id, tf.int32)
        before_eos = tf.math.cumsum(is_eos, axis=-1, exclusive=True) == 0
        keep = (
            before_eos
            & (token_ids != self.pad_id)
            & (token_ids != self.bos_id)
            & (token_ids != self.eos_id)
        )
        return self._detokenize(tf.ragged.boolean_mask(token_ids, keep))

    def sampler(self, alpha, nbest_size=-1):
        """A function from strings to ragged ids that samples a segmentation on each call.

        Subword regularization (Kudo, 2018; Provilkov et al., 2020 for BPE):
        training on sampled segmentations instead of the best one. Only
        SentencePiece models have more than one segmentation of a text.

        Args:
            alpha: for a unigram model, the smoothing of the sampling
                distribution (0 uniform, larger values closer to the best
                segmentation; 0.1 to 0.5 in the paper); for a BPE model,
                the dropout probability of each merge (BPE-dropout, 0.1).
            nbest_size: sample among this many best segmentations (> 1),
                or -1 for all of them. Defaults to -1.

        Returns:
            A function `strings (B,) -> tf.RaggedTensor (B, None)` of int32.
        """
        raise ArgumentError(
            f"{type(self).__name__} has one segmentation of each text; subword sampling "
            "needs a SentencePiece tokenizer."
        )

    @property
    def special_ids(self):
        """`{"pad": id, "unk": id, "bos": id, "eos": id}` of this vocabulary."""
        return {"pad": self.pad_id, "unk": self.unk_id, "bos": self.bos_id, "eos": self.eos_id}

    @property
    def vocab_size(self):
        raise NotImplementedError

    @property
    def pieces(self):
        """The vocabulary as strings: `pieces[i]` is the piece of id `i`."""
        raise NotImplementedError

    @property
    def continues_word(self):
        """bool `(V,)`: True for pieces that go on with the word before them.

        Such a piece is glued to the previous one without a space when
        detokenized and starts with a letter or digit ("s" after "▁lot").
        Punctuation written without a space (".", ",") does not continue a
        word. Constrained decoding uses this to keep a phrase a whole word.
        """
        return np.array([self._continues_word(piece) for piece in self.pieces], bool)

    def _continues_word(self, piece):
        raise NotImplementedError

    def save(self, directory):
        """Writes the vocabulary asset and `tokenizer.json` into `directory`."""
        os.makedirs(directory, exist_ok=True)
        self.write_asset(os.path.join(directory, self.asset_file))
        config = {"type": self.type_name, "asset": self.asset_file, "config": self.get_config()}
        with open(os.path.join(directory, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
