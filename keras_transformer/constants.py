"""The special token ids and their order, stated once for the whole package.

Every tokenizer stores these ids with its vocabulary; the masks, losses,
metrics, searches and exporters read them here. An ordinary piece has an id
of at least `FIRST_PIECE_ID`.

    id  piece
    0   padding
    1   unknown (anything the vocabulary cannot spell)
    2   BOS, begin of sequence
    3   EOS, end of sequence
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

SPECIAL_IDS = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
FIRST_PIECE_ID = len(SPECIAL_IDS)
