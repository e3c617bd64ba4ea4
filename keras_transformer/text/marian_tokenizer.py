"""A SentencePiece model whose ids come from a Marian vocabulary (OPUS-MT models).

Marian numbers pieces through its own vocabulary file, not through the
SentencePiece model's ids: `</s>` is 0, `<unk>` 1, and one vocabulary may
serve two SentencePiece models (a source and a target one). This tokenizer
runs the SentencePiece model in the TensorFlow graph and maps its ids to the
vocabulary's with a constant table, so a SavedModel still takes strings.

The package's models read id 0 as padding, so the vocabulary is numbered
from 1, and a start piece no text spells closes it:

    id       piece
    0        padding ("<pad>")
    1 + i    the Marian vocabulary's piece i (`</s>` is 1, `<unk>` 2 in OPUS-MT's)
    V + 1    the decoder's start ("<s>"), which a model that starts from a
             zero embedding never reads
"""

import collections

import numpy as np
import sentencepiece
import tensorflow as tf
import yaml

from keras_transformer.errors import ArgumentError, DamagedFileError
from keras_transformer.files import read_lines
from keras_transformer.text.sentencepiece_tokenizer import SentencePieceModel

PAD_PIECE, START_PIECE = "<pad>", "<s>"


def read_vocabulary(path):
    """The pieces of a Marian vocabulary file (`.yml`), in the order of their ids.

    Marian writes one `piece: id` mapping a line, quoting a piece YAML would
    read as something else (`"\\"": 7`, `'yes': 8`, `"\\x01": 9`) and writing
    a long one as a complex key (`? piece` and `: id` on two lines). A plain
    YAML reader turns some pieces into other values (`yes` into True), so each
    line is read here, and only a quoted piece is handed to YAML.

    Args:
        path: the `.yml` file.

    Returns:
        A list of strings, the piece of id i at index i.

    Raises:
        DamagedFileError: on a line that is not `piece: id`, or ids that are
            not 0, 1, ... each once.

    Examples:
        ```python
        pieces = read_vocabulary("opus-mt-de-en/opus.spm32k-spm32k.vocab.yml")
        pieces[:2]  # ['</s>', '<unk>']
        ```
    """
    by_id, key = {}, None
    for number, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        if line.startswith("? "):
            key = line[2:]
            continue
        if key is not None and line.startswith(": "):
            piece, value, key = key, line[2:], None
        else:
            piece, colon, value = line.rpartition(":")
            if not colon:
                piece = ""
        try:
            index = int(value)
            piece = _piece(piece.strip())
        except (ValueError, yaml.YAMLError):
            raise DamagedFileError(
                f"{path} is not a Marian vocabulary: line {number} is not `piece: id` "
                f"({line[:60]!r})",
                path,
            ) from None
        if index in by_id:
            raise DamagedFileError(f"{path}: id {index} is given twice (line {number})", path)
        by_id[index] = piece
    if sorted(by_id) != list(range(len(by_id))):
        missing = sorted(set(range(len(by_id))) - set(by_id))[:3]
        raise DamagedFileError(
            f"{path} is not a Marian vocabulary: its ids are not 0 to {len(by_id) - 1} "
            f"(missing {missing})",
            path,
        )
    return [by_id[i] for i in range(len(by_id))]


def read_sentencepiece_vocabulary(path):
    """The pieces of a SentencePiece model that Marian uses as its vocabulary (`.spm`
    named in `decoder.yml`'s `vocabs`), in the order of their ids: Marian numbers
    pieces by the model's own ids then.

    Args:
        path: the `.spm` file.

    Returns:
        A list of strings, the piece of id i at index i.

    Raises:
        DamagedFileError: if the file is not a SentencePiece model.

    Examples:
        ```python
        pieces = read_sentencepiece_vocabulary("opus-mt-mul-en/opus.spm32k.spm")
        pieces[:2]  # ['</s>', '<unk>'] in a model Marian trained
        ```
    """
    with open(path, "rb") as f:
        proto = f.read()
    try:
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    except RuntimeError as error:
        raise DamagedFileError(
            f"{path} is not a SentencePiece model ({str(error).strip()})", path
        ) from None
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _piece(text):
    """A piece as Marian wrote it: quoted YAML (single or double) or plain."""
    if text[:1] in "\"'" and len(text) > 1 and text[-1] == text[0]:
        piece = yaml.safe_load(text)
        if not isinstance(piece, str):
            raise ValueError(text)
        return piece
    if not text:
        raise ValueError(text)
    return text


class MarianTokenizer(SentencePieceModel):
    """SentencePiece pieces, numbered by a Marian vocabulary.

    Args:
        model_proto: the serialized SentencePiece model (`bytes`), e.g. the
            contents of OPUS-MT's `source.spm` or `target.spm`.
        vocabulary: the Marian vocabulary as a list of pieces, `vocabulary[i]`
            the piece Marian numbers i (`marian.read_vocabulary` reads one
            from its `.yml` file). It must hold `eos_piece` and `unk_piece`.
        eos_piece: the piece that ends a sentence. Defaults to `"</s>"`.
        unk_piece: the piece of what the vocabulary cannot spell. Defaults to
            `"<unk>"`.
        name: name of the `tf.Module`.

    A piece of the SentencePiece model that the vocabulary lacks maps to the
    unknown piece; a vocabulary piece that the model lacks (the other side's,
    in a shared vocabulary) detokenizes as SentencePiece's unknown " ⁇ ".

    Examples:
        ```python
        with open("opus-mt-de-en/source.spm", "rb") as f:
            source = MarianTokenizer(f.read(), read_vocabulary("opus-mt-de-en/opus.vocab.yml"))
        source.tokenize(["Guten Morgen"])  # ids of the vocabulary, plus one
        ```
    """

    type_name = "marian"

    def __init__(self, model_proto, vocabulary, eos_piece="</s>", unk_piece="<unk>", name=None):
        super().__init__(name=name)
        processor = self._load(model_proto)
        vocabulary = list(vocabulary)
        for role, piece in (("eos_piece", eos_piece), ("unk_piece", unk_piece)):
            if piece not in vocabulary:
                raise ArgumentError(
                    f"The vocabulary has no {role} {piece!r}; a Marian vocabulary holds it "
                    "(OPUS-MT's number `</s>` 0 and `<unk>` 1)."
                )
        if len(set(vocabulary)) != len(vocabulary):
            counts = collections.Counter(vocabulary)
            repeated = sorted(piece for piece, count in counts.items() if count > 1)[:3]
            raise ArgumentError(f"The vocabulary lists a piece twice: {repeated}")
        self.vocabulary = vocabulary
        self.eos_piece, self.unk_piece = eos_piece, unk_piece
        self._pieces = [PAD_PIECE, *vocabulary, START_PIECE]
        ids = {piece: i for i, piece in enumerate(self._pieces)}
        self.unk_id, self.eos_id = ids[unk_piece], ids[eos_piece]
        self.bos_id = len(self._pieces) - 1
        size = processor.get_piece_size()
        model_pieces = [processor.id_to_piece(i) for i in range(size)]
        self.sentencepiece_to_ids = np.array(
            [ids.get(p, self.unk_id) for p in model_pieces], "int32"
        )  # (SentencePiece's size,): this tokenizer's id of each SentencePiece id
        in_model = {piece: i for i, piece in enumerate(model_pieces)}
        unknown = processor.unk_id()
        self.ids_to_sentencepiece = np.array(
            [in_model.get(p, unknown) for p in self._pieces], "int32"
        )  # (vocab_size,): the SentencePiece id of each of this tokenizer's ids

    def _to_ids(self, ids):
        table = tf.constant(self.sentencepiece_to_ids)
        return tf.ragged.map_flat_values(tf.gather, table, ids)

    def _from_ids(self, ids):
        table = tf.constant(self.ids_to_sentencepiece)
        return tf.ragged.map_flat_values(tf.gather, table, ids)

    @classmethod
    def from_asset(cls, path, vocabulary, eos_piece="</s>", unk_piece="<unk>"):
        with open(path, "rb") as f:
            return cls(f.read(), vocabulary, eos_piece=eos_piece, unk_piece=unk_piece)

    @classmethod
    def train(cls, texts, vocab_size):
        raise ArgumentError(
            "A Marian vocabulary is imported with its model (keras-transformer import "
            "--format marian), not trained; train a `sentencepiece` tokenizer instead."
        )

    def get_config(self):
        return {
            "vocabulary": self.vocabulary,
            "eos_piece": self.eos_piece,
            "unk_piece": self.unk_piece,
        }
