"""Learned positions in every layer, rotary positions, relative positions, T5's
relative bias and ALiBi, through the translator and the exports.

The layers and the cached step are checked against references in
`test_positional_encoding.py`, `test_rotary.py` and `test_search.py`, CTranslate2's
scores in `test_ctranslate2.py`; here untrained models, one with a learned table whose
rows are as large as its token embeddings (so a row read at the wrong position changes
the outputs) added in every layer, and one with each scheme of positions in attention, are
exported and decoded sentence by sentence.
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import randomize_position_tables, saved_model_ops, tf_serving_ops

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.export import export_translator
from keras_transformer.layers import ALiBi, Learned, Rotary, ShawRelative, Sinusoidal, T5Bias
from keras_transformer.text import SentencePieceTokenizer

MAX_POSITIONS = 24


def test_positions_in_every_layer_enter_each_layers_input():
    """Every layer reads the previous layer's output plus the sinusoidal table (the
    formula's, checked against NumPy in test_positional_encoding.py)."""
    encoder = kt.layers.Encoder(3, 16, 2, 32, 50, positions=Sinusoidal(placement="every_layer"))
    ids = np.array([[5, 9, 4, 3, 0, 0]])
    encoded = encoder(ids).numpy()
    mask = ids != 0
    table = kt.layers.positional_encoding(6, 16).numpy()[None]  # (1, 6, 16)
    x = encoder.embedding(ids)
    for index, block in enumerate(encoder.blocks):
        x = block(x if index == 0 else x + table, mask=mask)
    np.testing.assert_allclose(encoded, x.numpy(), atol=1e-5)
    plain = kt.layers.Encoder.from_config({**encoder.get_config(), "positions": "sinusoidal"})
    plain.build(ids.shape)
    plain.set_weights(encoder.get_weights())  # the same weights, positions at the input only
    assert np.abs(plain(ids).numpy() - encoded).max() > 0.1


def test_positions_for_queries_and_keys_steer_attention_without_entering_the_values():
    """The table is added to every self-attention's query and key inputs, not to the
    embeddings or the values: with the query kernels zero (uniform attention) the
    positions change nothing."""
    encoder = kt.layers.Encoder(
        2, 16, 2, 32, 50, positions=Sinusoidal(placement="queries_and_keys")
    )
    ids = np.array([[5, 9, 4, 3, 0, 0]])
    encoded = encoder(ids).numpy()
    mask = ids != 0
    table = kt.layers.positional_encoding(6, 16).numpy()[None]  # (1, 6, 16)
    tokens = encoder.embedding.token_embedding(ids) * 4.0  # sqrt(16), no table added

    def by_hand(rows):
        x = tokens
        for block in encoder.blocks:
            x = block(x, mask=mask, query_key_positions=rows)
        return x.numpy()

    np.testing.assert_allclose(encoded, by_hand(table), atol=1e-5)
    assert np.abs(encoded - by_hand(None)).max() > 0.01
    for block in encoder.blocks:
        attention = block.self_attention
        attention.query_kernel.assign(np.zeros(attention.query_kernel.shape))
        attention.query_bias.assign(np.zeros(attention.query_bias.shape))
    np.testing.assert_allclose(encoder(ids).numpy(), by_hand(None), atol=1e-5)


@pytest.fixture(scope="module")
def numbers():
    """`(tokenizer, sentences)`: a 100-piece vocabulary and 20 numbers, an empty line and an
    over-long one."""
    corpus = numbers_corpus("train", limit=400)
    tokenizer = SentencePieceTokenizer.train(corpus.sources + corpus.targets, vocab_size=100)
    return tokenizer, corpus.sources[:20] + ["", "eins " * 40]


def untrained(tokenizer, positions):
    """An untrained 2-layer model over `tokenizer`'s pieces, learned tables N(0, 1)."""
    vocab = tokenizer.vocab_size
    model = kt.Transformer(2, 32, 4, 64, vocab, vocab, positions=positions)
    model((np.ones((1, 2), "int32"), np.ones((1, 2), "int32")))
    randomize_position_tables(model)
    return model


SCHEMES = {
    "learned_every_layer": Learned(MAX_POSITIONS, placement="every_layer"),
    "rotary": Rotary(),
    "relative": ShawRelative(6),
    "relative_bias": T5Bias(),
    "alibi": ALiBi(),
    "learned_queries_and_keys": Learned(MAX_POSITIONS, placement="queries_and_keys"),
}


def test_a_translator_stays_inside_the_learned_table(numbers):
    tokenizer, _ = numbers
    model = untrained(tokenizer, SCHEMES["learned_every_layer"])
    with pytest.raises(ArgumentError, match=r"at most 24 positions.*max_length=64"):
        kt.Translator(model, tokenizer, tokenizer)  # the default max_length
    translator = kt.Translator(model, tokenizer, tokenizer, max_length=MAX_POSITIONS)
    assert translator.max_source_length == MAX_POSITIONS  # lowered from 256
    assert translator.truncated(["eins " * 40, "eins"]).numpy().tolist() == [True, False]


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_the_saved_model_and_litert_translate_as_the_translator_does(scheme, numbers, tmp_path):
    tokenizer, sentences = numbers
    model = untrained(tokenizer, SCHEMES[scheme])
    translator = kt.Translator(
        model, tokenizer, tokenizer, max_length=MAX_POSITIONS, beam_size=3, jit_compile=False
    )
    text = scheme == "learned_every_layer"  # strings in and out once; token ids, faster, else
    path = export_translator(translator, "positions", tmp_path, text=text, warmup=False)
    loaded = tf.saved_model.load(path)
    if text:
        outputs = loaded.signatures["serving_default"](inputs=tf.constant(sentences))["outputs"]
        expected = kt.inference.translate_lines(translator, sentences)
        assert [text.decode() for text in outputs.numpy()] == expected
    else:
        source_ids = translator.source_ids(tf.constant(sentences))
        outputs = loaded.signatures["serving_default"](source_ids=source_ids)["target_ids"]
        expected = translator.translate_ids(source_ids)
        np.testing.assert_array_equal(outputs.numpy(), expected.numpy())
    assert saved_model_ops(path) - tf_serving_ops() == set()
    if model.max_positions is not None:
        too_long = tf.fill([1, MAX_POSITIONS + 1], 5)
        with pytest.raises(tf.errors.InvalidArgumentError, match="at most max_positions=24"):
            loaded.signatures["translate_ids"](source_ids=too_long)

    pytest.importorskip("ai_edge_litert")
    from keras_transformer.export.litert import export_litert
    from keras_transformer.export.litert_runtime import LiteRTTranslator

    greedy = translator.copy(beam_size=1)
    litert = LiteRTTranslator(export_litert(greedy, tmp_path / "litert"))  # 64 by default
    expected_length = MAX_POSITIONS if model.max_positions is not None else 64  # the table's
    assert litert.max_source_length == expected_length
    cut = greedy.copy(max_source_length=expected_length)  # the file's fixed source length
    assert litert(sentences) == kt.inference.translate_lines(cut, sentences)
