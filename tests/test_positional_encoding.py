import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import layers


def paper_table(length, depth, layout):
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(same), in NumPy."""
    pos = np.arange(length)[:, None].astype("float64")
    i = np.arange(depth // 2)[None, :]
    angle = pos / np.power(10000.0, 2 * i / depth)
    if layout == "interleaved":
        table = np.zeros((length, depth))
        table[:, 0::2] = np.sin(angle)
        table[:, 1::2] = np.cos(angle)
        return table
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=-1)


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_positional_encoding_matches_the_formula(layout):
    table = ops.convert_to_numpy(layers.positional_encoding(50, 64, layout=layout))
    np.testing.assert_allclose(table, paper_table(50, 64, layout), atol=2e-5)


@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
def test_positional_encoding_layer_adds_the_table(layout):
    x = np.random.default_rng(0).normal(size=(2, 30, 16)).astype("float32")
    y = ops.convert_to_numpy(layers.PositionalEncoding(layout=layout)(x))
    np.testing.assert_allclose(
        y - x, np.broadcast_to(paper_table(30, 16, layout), x.shape), atol=2e-5
    )


def test_start_index_continues_the_table():
    x = np.zeros((1, 3, 8), "float32")
    shifted = layers.PositionalEncoding()(x, start_index=5)
    np.testing.assert_allclose(
        ops.convert_to_numpy(shifted)[0], paper_table(8, 8, "interleaved")[5:], atol=1e-5
    )


def test_positional_encoding_rejects_odd_depth_and_unknown_layout():
    with pytest.raises(ValueError, match=r"must be known and even"):
        layers.PositionalEncoding()(np.zeros((1, 3, 7), "float32"))
    with pytest.raises(ValueError, match=r"`layout` must be one of.*layout='sine'"):
        layers.PositionalEncoding(layout="sine")


def test_positional_embedding_scales_adds_and_masks():
    ids = np.array([[5, 8, 2, 0, 0]])
    embed = layers.PositionalEmbedding(vocab_size=10, d_model=8)
    x = embed(ids)
    table = ops.convert_to_numpy(embed.token_embedding.embeddings)
    expected = table[ids] * np.sqrt(8) + paper_table(5, 8, "interleaved")
    np.testing.assert_allclose(ops.convert_to_numpy(x), expected, atol=1e-5)
    np.testing.assert_array_equal(ops.convert_to_numpy(embed.compute_mask(ids)), ids != 0)
    np.testing.assert_array_equal(ops.convert_to_numpy(x._keras_mask), ids != 0)


@pytest.mark.parametrize(
    "ids, message",
    [
        (np.zeros((2, 3), "float32"), r"`token_ids` must be integer.*dtype=float32"),
        (np.zeros((2, 3, 1), "int32"), r"`token_ids` must have rank 2.*shape=\(2, 3, 1\)"),
    ],
)
def test_positional_embedding_rejects_bad_token_ids(ids, message):
    with pytest.raises(ValueError, match=message):
        layers.PositionalEmbedding(vocab_size=10, d_model=8)(ids)


def test_positional_embedding_rejects_bad_sizes():
    with pytest.raises(ValueError, match=r"`vocab_size` must be a positive integer.*vocab_size=0"):
        layers.PositionalEmbedding(vocab_size=0, d_model=8)
    with pytest.raises(ValueError, match=r"sinusoidal table needs an even d_model.*d_model=7"):
        layers.PositionalEmbedding(vocab_size=10, d_model=7)


def test_a_learned_table_adds_the_rows_an_embedding_lookup_of_the_positions_gives():
    x = np.random.default_rng(1).normal(size=(2, 6, 8)).astype("float32")
    learned = layers.LearnedPositionalEncoding(max_positions=20)
    learned.build(x.shape)
    table = np.random.default_rng(2).normal(size=(20, 8)).astype("float32")
    learned.embeddings.assign(table)
    lookup = keras.layers.Embedding(20, 8)  # Keras' own layer with the same weights
    lookup.build((None,))
    lookup.embeddings.assign(table)
    for start in (0, 14):
        expected = x + ops.convert_to_numpy(lookup(np.arange(start, start + 6)))[None]
        np.testing.assert_allclose(
            ops.convert_to_numpy(learned(x, start_index=start)), expected, atol=1e-6
        )
    with pytest.raises(ValueError, match=r"has 20 positions.*reach position 20"):
        learned(x, start_index=15)


def test_a_learned_positional_embedding_needs_its_size_and_round_trips_its_config():
    with pytest.raises(ValueError, match=r"positions='learned' needs `max_positions`"):
        layers.PositionalEmbedding(10, 8, positions="learned")
    with pytest.raises(ValueError, match=r"`max_positions` must be a positive integer"):
        layers.Learned(0)
    with pytest.raises(ValueError, match=r"`max_positions` is a setting of positions='learned'"):
        layers.PositionalEmbedding(10, 8, max_positions=32)  # the sinusoidal table's layer
    with pytest.raises(ValueError, match=r"`positions` must be one of.*'rotary'"):
        layers.PositionalEmbedding(10, 8, positions="sine")
    rotary = layers.PositionalEmbedding(10, 8, positions="rotary")  # no table: the scaled tokens
    np.testing.assert_allclose(
        ops.convert_to_numpy(rotary(np.array([[5, 8]]), start_index=3)),
        ops.convert_to_numpy(rotary.token_embedding.embeddings)[[[5, 8]]] * np.sqrt(8),
        atol=1e-6,
    )
    embed = layers.PositionalEmbedding(10, 7, positions=layers.Learned(32))  # odd D
    ids = np.array([[5, 8, 2, 0]])
    x = ops.convert_to_numpy(embed(ids))
    rows = ops.convert_to_numpy(embed.position_encoding.embeddings)[:4]
    tokens = ops.convert_to_numpy(embed.token_embedding.embeddings)[ids[0]] * np.sqrt(7)
    np.testing.assert_allclose(x[0], tokens + rows, atol=1e-5)
    again = layers.PositionalEmbedding.from_config(embed.get_config())
    again.build(ids.shape)
    again.set_weights(embed.get_weights())
    np.testing.assert_allclose(ops.convert_to_numpy(again(ids)), x, atol=1e-6)
