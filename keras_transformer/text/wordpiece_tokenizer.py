"""WordPiece subwords, the TensorFlow tutorial's tokenizer, built with tensorflow-text."""

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset

from keras_transformer.errors import ArgumentError
from keras_transformer.text.tokenizer import Tokenizer
from keras_transformer.validation import check_positive_int

RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")


class WordPieceTokenizer(Tokenizer):
    """WordPiece (Wu et al., 2016) on words split at whitespace and punctuation.

    Text is NFKC-normalized (and case-folded with `lower_case=True`) before it
    is split. Detokenization is not lossless: words and punctuation come back
    joined by single spaces ("a man , a dog ."), as in the TensorFlow tutorial.
    Words the vocabulary cannot spell map to `unk_id` ("[UNK]").

    Args:
        vocab: list of pieces: "[PAD]" first (id 0), and "[UNK]", "[START]"
            and "[END]" anywhere (ids 1-3 in the vocabularies `train` makes;
            `special_ids` reads them from `vocab`). Suffix pieces start
            with "##".
        lower_case: whether to case-fold text before splitting it.
        name: name of the `tf.Module`.

    Examples:
        >>> tokenizer = WordPieceTokenizer.train(["a cat", "a dog"] * 50, vocab_size=40)
        >>> tokenizer.detokenize(tokenizer.tokenize(["A cat"])).numpy()
        array([b'a cat'], dtype=object)
    """

    type_name = "wordpiece"
    asset_file = "vocab.txt"

    def __init__(self, vocab, lower_case=True, name=None):
        super().__init__(name=name)
        vocab = list(vocab)
        missing = [token for token in RESERVED_TOKENS if token not in vocab]
        if missing or vocab[0] != "[PAD]":
            raise ArgumentError(
                f'`vocab` must hold {list(RESERVED_TOKENS)}, with "[PAD]" first (id 0 is '
                f"padding). Received: vocab[:4]={vocab[:4]}, missing {missing}"
            )
        self.vocab = vocab
        self.unk_id, self.bos_id, self.eos_id = (vocab.index(t) for t in RESERVED_TOKENS[1:])
        self.lower_case = lower_case
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            vocab=vocab,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            support_detokenization=True,
        )

    @classmethod
    def train(cls, texts, vocab_size=8000, lower_case=True):
        """Learns a vocabulary with tensorflow-text's `bert_vocab_from_dataset`.

        Args:
            texts: iterable of `str`, one sentence each.
            vocab_size: target number of pieces (an upper bound).
            lower_case: whether to case-fold text first.

        Returns:
            A `WordPieceTokenizer`.
        """
        check_positive_int("vocab_size", vocab_size)
        sentences = [t for t in texts if t.strip()]
        if not sentences:
            raise ArgumentError("`texts` holds no non-empty sentence to train a tokenizer on.")
        dataset = tf.data.Dataset.from_tensor_slices(sentences).batch(1024)
        vocab = bert_vocab_from_dataset.bert_vocab_from_dataset(
            dataset,
            vocab_size=vocab_size,
            reserved_tokens=list(RESERVED_TOKENS),
            bert_tokenizer_params={"lower_case": lower_case},
        )
        return cls(vocab, lower_case=lower_case)

    @property
    def vocab_size(self):
        return len(self.vocab)

    @property
    def pieces(self):
        return list(self.vocab)

    def _continues_word(self, piece):
        return piece.startswith("##") and piece[2:3].isalnum()

    def _tokenize(self, strings):
        if self.lower_case:
            strings = tf_text.case_fold_utf8(strings)
        strings = tf_text.normalize_utf8(strings, "NFKC")
        return self._wordpiece.tokenize(strings)

    def _detokenize(self, token_ids):
        return self._wordpiece.detokenize(token_ids)

    def write_asset(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.vocab) + "\n")

    @classmethod
    def from_asset(cls, path, lower_case=True):
        with open(path, encoding="utf-8") as f:
            return cls([line.rstrip("\n") for line in f], lower_case=lower_case)

    def get_config(self):
        return {"lower_case": self.lower_case}
