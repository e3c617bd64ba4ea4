"""Learned positions, and positions in every layer, through the translator and the exports.

The layers and the cached step are checked against references in
`test_positional_encoding.py` and `test_search.py`, CTranslate2's scores in
`test_ctranslate2.py`; here an untrained model with a learned table whose rows
are as large as its token embeddings (so a row read at the wrong position
changes the outputs), added in every layer, is exported and decoded sentence
by sentence.
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import randomize_position_tables, saved_model_ops, tf_serving_ops

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.export import export_translator
from keras_transformer.text import SentencePieceTokenizer

MAX_POSITIONS = 24


def test_positions_in_every_layer_enter_each_layers_input():
    """Every layer reads the previous layer's output plus the sinusoidal table (the
    formula's, checked against NumPy in test_positional_encoding.py)."""
    encoder = kt.layers.Encoder(3, 16, 2, 32, 50, add_positions="every_layer")
    ids = np.array([[5, 9, 4, 3, 0, 0]])
    encoded = encoder(ids).numpy()
    mask = ids != 0
    table = kt.layers.positional_encoding(6, 16).numpy()[None]  # (1, 6, 16)
    x = encoder.embedding(ids)
    for index, block in enumerate(encoder.blocks):
        x = block(x if index == 0 else x + table, mask=mask)
    np.testing.assert_allclose(encoded, x.numpy(), atol=1e-5)
    plain = kt.layers.Encoder.from_config({**encoder.get_config(), "add_positions": "input"})
    plain.build(ids.shape)
    plain.set_weights(encoder.get_weights())  # the same weights, positions at the input only
    assert np.abs(plain(ids).numpy() - encoded).max() > 0.1


@pytest.fixture(scope="module")
def learned():
    """`(model, tokenizer, sentences)`: an untrained 2-layer model with learned positions
    added in every layer."""
    corpus = numbers_corpus("train")[:400]
    tokenizer = SentencePieceTokenizer.train(corpus.sources + corpus.targets, vocab_size=100)
    vocab = tokenizer.vocab_size
    model = kt.Transformer(
        2,
        32,
        4,
        64,
        vocab,
        vocab,
        positions="learned",
        max_positions=MAX_POSITIONS,
        add_positions="every_layer",
    )
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    randomize_position_tables(model)
    return model, tokenizer, corpus.sources[:20] + ["", "eins " * 40]


def test_a_translator_stays_inside_the_learned_table(learned):
    model, tokenizer, _ = learned
    with pytest.raises(ArgumentError, match=r"at most 24 positions.*max_length=64"):
        kt.Translator(model, tokenizer, tokenizer)  # the default max_length
    translator = kt.Translator(model, tokenizer, tokenizer, max_length=MAX_POSITIONS)
    assert translator.max_source_length == MAX_POSITIONS  # lowered from 256
    assert translator.truncated(["eins " * 40, "eins"]).numpy().tolist() == [True, False]


def test_the_saved_model_and_litert_translate_as_the_translator_does(learned, tmp_path):
    model, tokenizer, sentences = learned
    translator = kt.Translator(model, tokenizer, tokenizer, max_length=MAX_POSITIONS, beam_size=3)
    path = export_translator(translator, "learned", tmp_path, warmup=False)
    loaded = tf.saved_model.load(path)
    outputs = loaded.signatures["serving_default"](inputs=tf.constant(sentences))["outputs"]
    expected = kt.inference.translate_lines(translator, sentences)
    assert [text.decode() for text in outputs.numpy()] == expected
    assert saved_model_ops(path) - tf_serving_ops() == set()
    too_long = tf.fill([1, MAX_POSITIONS + 1], 5)
    with pytest.raises(tf.errors.InvalidArgumentError, match="at most max_positions=24 tokens"):
        loaded.signatures["translate_ids"](source_ids=too_long)

    pytest.importorskip("ai_edge_litert")
    from keras_transformer.export.litert import export_litert
    from keras_transformer.export.litert_runtime import LiteRTTranslator

    greedy = translator.copy(beam_size=1)
    litert = LiteRTTranslator(export_litert(greedy, tmp_path / "litert"))  # 64 by default
    assert litert.max_source_length == MAX_POSITIONS  # the table's, not the default 64
    assert litert(sentences) == kt.inference.translate_lines(greedy, sentences)
