"""SentencePiece subwords, trained with `sentencepiece`, applied with tensorflow-text."""

import copy
import hashlib
import io

import sentencepiece
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.python.ops.sentencepiece_tokenizer import (
    gen_sentencepiece_tokenizer as sentencepiece_ops,
)

from keras_transformer.constants import BOS_ID, EOS_ID, PAD_ID, SPECIAL_IDS, UNK_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.text.tokenizer import Tokenizer
from keras_transformer.validation import check_choice, check_non_negative, check_positive_int

WORD_START = "\u2581"  # "▁", SentencePiece's mark of a piece that starts a word


class SharedSentencePieceModel(tf.saved_model.experimental.TrackableResource):
    """A SentencePiece model kept by its device's resource manager under `name`.

    TensorFlow Text's own model resource belongs to the kernel of the op that
    made it, and TensorFlow frees that kernel whenever it clears its eager
    kernel cache (`keras.utils.set_random_seed`, `tf.random.set_seed` and
    `keras.backend.clear_session` all do): a search traced before then would
    hold a handle to a freed model. A resource with a shared name belongs to
    the resource manager instead, and lives as long as the process, or the
    session of a loaded SavedModel; a model of the same name (the same digest)
    is made once and shared.

    Args:
        model_proto: the serialized SentencePiece model, `bytes`.
        name: the resource's shared name and the name scope of its op.
    """

    def __init__(self, model_proto, name):
        super().__init__()
        self._model_proto, self._name = model_proto, name
        _ = self.resource_handle  # made now, outside any graph being traced

    def _create_resource(self):
        with tf.name_scope(self._name):
            return sentencepiece_ops.sentencepiece_op(
                model=self._model_proto, shared_name=self._name
            )


class SentencePieceModel(Tokenizer):
    """Base of the tokenizers that run a SentencePiece model in the TensorFlow graph.

    Holds the model (`model_proto`), its TensorFlow Text op and the pieces of
    the tokenizer's ids (`_pieces`, set by the subclass), and tokenizes,
    samples and detokenizes with the op. A subclass whose ids are not the model's
    maps them in `_to_ids` and `_from_ids` (the identity here).
    """

    asset_file = "sentencepiece.model"

    def _load(self, model_proto):
        """Keeps `model_proto` and its TensorFlow Text op; returns its Python processor."""
        try:
            processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
        except RuntimeError as error:
            raise ArgumentError(
                f"`model_proto` is not a SentencePiece model ({str(error).strip()})"
            ) from None
        self.model_proto = model_proto
        self._sentencepiece = self._make_model()
        return processor

    @property
    def vocab_size(self):
        return len(self._pieces)

    @property
    def pieces(self):
        return list(self._pieces)

    def _make_model(self):
        """The TensorFlow Text tokenizer of `model_proto`, on a model resource of its own.

        The tokenizer's model lives in `SharedSentencePieceModel` (see there
        why), named after the model's digest, and so are the op's nodes: a
        SavedModel restores that op inside a function whose node is named by
        the tokenizer's `name`, and TensorFlow's function runtime shares one
        kernel between nodes of the same name, so with the default name the
        source and target models of a loaded SavedModel would both run the model
        restored first. The digest keeps two models apart, and one model on
        one resource.
        """
        name = "sentencepiece_" + hashlib.sha256(self.model_proto).hexdigest()[:16]
        model = tf_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32, name=name)
        # In place of the kernel-owned resource TensorFlow Text's constructor made.
        model._model_resource = SharedSentencePieceModel(self.model_proto, name)
        return model

    def _to_ids(self, ids):
        """This tokenizer's ids of SentencePiece's ids, ragged `(B, None)`."""
        return ids

    def _from_ids(self, ids):
        """SentencePiece's ids of this tokenizer's ids, ragged `(B, None)`."""
        return ids

    def sampler(self, alpha, nbest_size=-1):
        check_non_negative("alpha", alpha)
        if (
            isinstance(nbest_size, bool)
            or not isinstance(nbest_size, int)
            or not (nbest_size == -1 or nbest_size > 1)
        ):
            raise ArgumentError(
                "`nbest_size` must be -1 (every segmentation) or an integer > 1. "
                f"Received: nbest_size={nbest_size!r}"
            )
        # The same model resource, read with other arguments.
        sampling = copy.copy(self._sentencepiece)
        sampling.nbest_size, sampling.alpha = nbest_size, alpha

        def tokenize(strings):  # (B,) -> (B, None), a new draw each time the op runs
            return self._to_ids(sampling.tokenize(tf.convert_to_tensor(strings)))

        return tokenize

    def _continues_word(self, piece):
        return not piece.startswith(WORD_START) and piece[:1].isalnum()

    def _tokenize(self, strings):
        return self._to_ids(self._sentencepiece.tokenize(strings))

    def _detokenize(self, token_ids):
        return self._sentencepiece.detokenize(self._from_ids(token_ids))

    def write_asset(self, path):
        with open(path, "wb") as f:
            f.write(self.model_proto)


class SentencePieceTokenizer(SentencePieceModel):
    """A SentencePiece model (Kudo & Richardson, 2018) run in the TensorFlow graph.

    Detokenization is lossless for text in the model's normal form: with the
    default `normalization="nmt_nfkc"`, that is NFKC text with single spaces
    and no leading or trailing space (`detokenize(tokenize(s)) == s` for such
    `s`, unless it holds characters the model never saw). Characters never
    seen in training, and bytes that are not valid UTF-8, map to `unk_id` and
    detokenize as " ⁇ ". Empty and whitespace-only strings give no ids.

    Args:
        model_proto: the serialized SentencePiece model (`bytes`), as written
            by `SentencePieceTokenizer.train` or `spm_train`. Padding must be
            id 0 (the model's masks read it so); the unknown piece, BOS and
            EOS may have any other ids (`train` gives them 1, 2 and 3).
        name: name of the `tf.Module`.

    Examples:
        >>> tokenizer = SentencePieceTokenizer.train(["a cat", "a dog"] * 50, vocab_size=20)
        >>> ids = tokenizer.tokenize(["a cat"])
        >>> tokenizer.detokenize(ids).numpy()
        array([b'a cat'], dtype=object)
    """

    type_name = "sentencepiece"

    def __init__(self, model_proto, name=None):
        super().__init__(name=name)
        processor = self._load(model_proto)
        found = {
            "pad": processor.pad_id(),
            "unk": processor.unk_id(),
            "bos": processor.bos_id(),
            "eos": processor.eos_id(),
        }
        if found["pad"] != PAD_ID or min(found.values()) < 0 or len(set(found.values())) < 4:
            raise ArgumentError(
                f"The SentencePiece model's special ids must have padding at {PAD_ID} and an "
                f"id of their own for each of unk, bos and eos, as {SPECIAL_IDS}. Received: {found}"
            )
        self.unk_id, self.bos_id, self.eos_id = found["unk"], found["bos"], found["eos"]
        self._pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]

    @classmethod
    def train(
        cls,
        texts,
        vocab_size=8000,
        model_type="unigram",
        character_coverage=1.0,
        normalization="nmt_nfkc",
        max_sentences=2_000_000,
        seed=0,
    ):
        """Trains a model on an iterable of strings.

        Args:
            texts: iterable of `str`, one sentence each (join source and target
                text for a shared vocabulary).
            vocab_size: number of pieces, special ids included. Small corpora
                may give fewer; the real size is `tokenizer.vocab_size`.
            model_type: `"unigram"` (default) or `"bpe"`.
            character_coverage: share of characters the vocabulary covers.
            normalization: SentencePiece normalization rule, `"nmt_nfkc"`,
                `"nfkc"` or `"identity"`.
            max_sentences: sentences sampled for training, for big corpora.
            seed: seed of that sample.

        Returns:
            A `SentencePieceTokenizer`.
        """
        check_positive_int("vocab_size", vocab_size)
        check_choice("model_type", model_type, {"unigram", "bpe"})
        check_choice("normalization", normalization, {"nmt_nfkc", "nfkc", "identity"})
        sentences = [t for t in texts if t.strip()]
        if not sentences:
            raise ArgumentError("`texts` holds no non-empty sentence to train a tokenizer on.")
        sentencepiece.set_random_generator_seed(seed)
        model = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            normalization_rule_name=normalization,
            input_sentence_size=max_sentences,
            shuffle_input_sentence=True,
            hard_vocab_limit=False,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            minloglevel=2,
        )
        return cls(model.getvalue())

    @classmethod
    def from_asset(cls, path):
        with open(path, "rb") as f:
            return cls(f.read())

    def get_config(self):
        return {}
