import itertools
import json
import os
import re
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_transformer.datasets import load_split
from keras_transformer.text import (
    SentencePieceTokenizer,
    WordPieceTokenizer,
    load_tokenizer,
)

ANIMALS = [
    f"the {a} {v} the {b}."
    for a, v, b in itertools.product(
        ["cat", "dog", "bird", "horse"], ["sees", "chases", "likes"], ["ball", "tree", "house"]
    )
] * 5


@pytest.fixture
def sentencepiece():
    return SentencePieceTokenizer.train(ANIMALS, vocab_size=40)


@pytest.fixture
def wordpiece():
    return WordPieceTokenizer.train(ANIMALS, vocab_size=60)


def normal_form(text):
    """The documented normal form of nmt_nfkc: NFKC, single spaces, stripped."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


def test_multi30k_sentencepiece_round_trips_validation_text(multi30k_dir):
    train = load_split(multi30k_dir, "train", "de", "en")
    tokenizer = SentencePieceTokenizer.train(train.sources + train.targets, vocab_size=8000)
    assert tokenizer.vocab_size == 8000
    val = load_split(multi30k_dir, "val", "de", "en")
    sample = val.sources[:150] + val.targets[:150]
    restored = tokenizer.detokenize(tokenizer.tokenize(sample)).numpy()
    same = [r.decode("utf-8") == normal_form(s) for r, s in zip(restored, sample, strict=True)]
    assert np.mean(same) >= 0.995


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_special_ids_are_the_package_convention(name, request):
    tokenizer = request.getfixturevalue(name)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    ids = tokenizer.tokenize(ANIMALS[:10]).flat_values.numpy()
    assert ids.min() > tokenizer.eos_id and ids.max() < tokenizer.vocab_size


def test_sentencepiece_round_trip_and_ids_match_the_sentencepiece_library(sentencepiece):
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=sentencepiece.model_proto)
    text = "the dog chases the house."
    ids = sentencepiece.tokenize([text])
    assert ids.to_list() == [processor.encode(text)]
    assert sentencepiece.detokenize(ids).numpy().tolist() == [text.encode()]
    assert sentencepiece.pieces[:4] == ["<pad>", "<unk>", "<s>", "</s>"]
    assert [sentencepiece.pieces[i] for i in ids[0]] == processor.encode(text, out_type=str)
    assert len(sentencepiece.pieces) == sentencepiece.vocab_size


def test_wordpiece_pieces_are_its_vocabulary_in_id_order(wordpiece):
    ids = wordpiece.tokenize(["the cat likes the tree."])[0].numpy()
    pieces = [wordpiece.pieces[i] for i in ids]
    assert "".join(p.removeprefix("##") for p in pieces) == "thecatlikesthetree."
    assert wordpiece.pieces[:4] == ["[PAD]", "[UNK]", "[START]", "[END]"]


def test_wordpiece_reads_its_special_ids_from_the_vocabulary(wordpiece):
    vocab = wordpiece.pieces
    moved = [vocab[0], *vocab[4:10], vocab[2], vocab[1], *vocab[10:], vocab[3]]
    renumbered = WordPieceTokenizer(moved)
    where = {piece: i for i, piece in enumerate(moved)}
    assert renumbered.special_ids == {"pad": 0, "unk": 8, "bos": 7, "eos": len(moved) - 1}
    text = ["the cat likes the tree.", "", "the \u2603 cat"]
    ids = wordpiece.tokenize(text).to_list()
    expected = [[where[vocab[i]] for i in row] for row in ids]
    assert renumbered.tokenize(text).to_list() == expected
    dense = [[renumbered.bos_id, *expected[0], renumbered.eos_id, *expected[2]]]
    assert renumbered.detokenize(tf.constant(dense)).numpy().tolist() == [
        b"the cat likes the tree ."
    ]
    with pytest.raises(ValueError, match=r"must hold .*\[PAD\]\" first.*missing \['\[END\]'\]"):
        WordPieceTokenizer([p for p in vocab if p != "[END]"])
    with pytest.raises(ValueError, match=r"with \"\[PAD\]\" first"):
        WordPieceTokenizer(vocab[1:] + vocab[:1])


def test_wordpiece_splits_punctuation_and_lower_cases(wordpiece):
    ids = wordpiece.tokenize(["The CAT likes the tree."])
    assert wordpiece.detokenize(ids).numpy().tolist() == [b"the cat likes the tree ."]


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_detokenize_drops_padding_and_bos_and_stops_at_eos(name, request):
    tokenizer = request.getfixturevalue(name)
    ids = tokenizer.tokenize(["the cat sees the ball.", "the dog"]).to_list()
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    first = [bos] + ids[0] + [eos] + ids[1]  # anything after EOS is dropped
    second = [bos] + ids[1] + [eos]
    width = max(len(first), len(second))
    dense = [row + [0] * (width - len(row)) for row in (first, second)]
    expected = tokenizer.detokenize(tf.ragged.constant(ids)).numpy().tolist()
    assert tokenizer.detokenize(tf.constant(dense)).numpy().tolist() == expected


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_bad_text_neither_crashes_nor_hangs(name, request):
    tokenizer = request.getfixturevalue(name)
    texts = tf.constant(
        [b"", b"   \t ", b"the \xff\xfe cat", "the \u2603 cat".encode(), b"the cat " * 5000]
    )
    ids = tokenizer.tokenize(texts)
    assert ids.shape[0] == 5
    assert ids[0].shape[0] == 0 and ids[1].shape[0] == 0
    assert tokenizer.unk_id in ids[2].numpy() and tokenizer.unk_id in ids[3].numpy()
    assert ids[4].shape[0] >= 10_000
    restored = tokenizer.detokenize(ids).numpy()
    assert restored[0] == b"" and restored[4].startswith(b"the cat the cat")


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_tokenize_rejects_non_text(name, request):
    with pytest.raises(ValueError, match=r"`strings` must be text.*dtype=<dtype: 'int32'>"):
        request.getfixturevalue(name).tokenize(tf.constant([1, 2]))
    with pytest.raises(ValueError, match=r"`token_ids` must be integer ids.*float32"):
        request.getfixturevalue(name).detokenize(tf.constant([[1.0]]))


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_save_and_load_keep_the_vocabulary_as_an_asset(name, request, tmp_path):
    tokenizer = request.getfixturevalue(name)
    tokenizer.save(str(tmp_path))
    assert os.path.isfile(tmp_path / tokenizer.asset_file)
    assert os.path.getsize(tmp_path / "tokenizer.json") < 200
    restored = load_tokenizer(str(tmp_path))
    assert type(restored) is type(tokenizer) and restored.vocab_size == tokenizer.vocab_size
    assert restored.tokenize(ANIMALS[:5]).to_list() == tokenizer.tokenize(ANIMALS[:5]).to_list()


def test_load_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json is missing"):
        load_tokenizer(str(tmp_path))


def test_load_names_an_unknown_tokenizer_type(sentencepiece, tmp_path):
    sentencepiece.save(str(tmp_path))
    saved = json.loads((tmp_path / "tokenizer.json").read_text())
    (tmp_path / "tokenizer.json").write_text(json.dumps({**saved, "type": "bpe"}))
    with pytest.raises(ValueError, match=r"tokenizer.json: Unknown tokenizer type.*'bpe'"):
        load_tokenizer(str(tmp_path))


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_train_tokenizer_trains_the_type_it_is_named(name):
    from keras_transformer.text import TOKENIZER_TYPES, train_tokenizer

    tokenizer = train_tokenizer(name, ANIMALS, vocab_size=60)
    assert type(tokenizer) is TOKENIZER_TYPES[name] and tokenizer.type_name == name
    with pytest.raises(ValueError, match=r"Unknown tokenizer type.*'sentencepiece'"):
        train_tokenizer("unigram", ANIMALS, vocab_size=60)


def test_sentencepiece_rejects_a_model_with_other_special_ids():
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(ANIMALS), model_writer=model, vocab_size=20, minloglevel=2
    )
    with pytest.raises(ValueError, match="special ids"):
        SentencePieceTokenizer(model.getvalue())


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_a_saved_model_carries_the_tokenizer(name, request, tmp_path):
    tokenizer = request.getfixturevalue(name)

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def round_trip(self, strings):
            return self.tokenizer.detokenize(self.tokenizer.tokenize(strings))

    tf.saved_model.save(Module(), str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    texts = tf.constant(ANIMALS[:4] + [""])
    assert (
        loaded.round_trip(texts).numpy().tolist()
        == tokenizer.detokenize(tokenizer.tokenize(texts)).numpy().tolist()
    )


@pytest.mark.parametrize("name", ["sentencepiece", "wordpiece"])
def test_continues_word_marks_the_pieces_glued_to_a_word_before_them(name, request):
    """Detokenized after a whole word, exactly these pieces start with a letter or
    digit written without a space."""
    tokenizer = request.getfixturevalue(name)
    word = tokenizer.tokenize(["the"]).to_list()[0]
    pieces = np.arange(4, tokenizer.vocab_size)[:, None]
    texts = tokenizer.detokenize(np.concatenate([np.tile(word, [len(pieces), 1]), pieces], 1))
    glued = [text.decode()[len("the") :][:1].isalnum() for text in texts.numpy()]
    np.testing.assert_array_equal(tokenizer.continues_word[4:], glued)
    assert 0 < sum(glued) < len(glued)
    assert not tokenizer.continues_word[:4].any()  # padding, unknown, BOS, EOS


@pytest.mark.parametrize("model_type, alpha", [("unigram", 0.1), ("bpe", 0.1)])
def test_sampled_segmentations_vary_and_detokenize_to_the_text(model_type, alpha):
    tokenizer = SentencePieceTokenizer.train(ANIMALS, vocab_size=40, model_type=model_type)
    sample = tokenizer.sampler(alpha)
    text = tf.constant(sorted(set(ANIMALS)))
    best = tokenizer.tokenize(text).to_list()
    draws = [sample(text) for _ in range(5)]
    for ids in draws:
        assert tokenizer.detokenize(ids).numpy().tolist() == text.numpy().tolist()
    assert len({str(ids.to_list()) for ids in draws}) == 5  # a new draw each call
    assert any(ids.to_list() != best for ids in draws)
    assert tokenizer.tokenize(text).to_list() == best  # tokenize itself never samples


def test_sentencepiece_survives_the_calls_that_clear_tensorflows_kernels(sentencepiece):
    """TensorFlow Text's own model resource died with the eager kernel that made it."""
    text = tf.constant(["the cat sees the ball."])
    ids = sentencepiece.tokenize(text).to_list()
    traced_before = tf.function(lambda t: sentencepiece.detokenize(sentencepiece.tokenize(t)))
    assert traced_before(text).numpy().tolist() == text.numpy().tolist()
    for clear in (lambda: keras.utils.set_random_seed(1), keras.backend.clear_session):
        clear()  # frees TensorFlow's eager kernels
        assert sentencepiece.tokenize(text).to_list() == ids  # eagerly
        assert traced_before(text).numpy().tolist() == text.numpy().tolist()  # traced before
        traced = tf.function(lambda t: sentencepiece.detokenize(sentencepiece.tokenize(t)))
        clear()
        assert traced(text).numpy().tolist() == text.numpy().tolist()  # traced after the reset
