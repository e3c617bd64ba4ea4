"""Positions inside attention against the papers' formulas written in NumPy: rotary
positions (Su et al., 2021) and relative position representations (Shaw et al., 2018),
and the options that go with them.

The cached steps of such models are checked against their full passes in
`test_search.py`, CTranslate2's scores in `test_ctranslate2.py`, the exports in
`test_positions.py`.
"""

import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.errors import ArgumentError
from keras_transformer.layers import rotary_positions
from keras_transformer.layers.relative import relative_indices


def numpy_rotation(x, start=0):
    """Su et al. (2021), eq. 34 in complex form: feature pair i of the vector at position m,
    `x_i + 1j * x_{i + K/2}`, times `exp(1j * m * theta_i)`, theta_i = 10000^(-2i / K)."""
    depth = x.shape[-1]
    half = depth // 2
    theta = 10000.0 ** (-2.0 * np.arange(half) / depth)  # (K/2,)
    m = start + np.arange(x.shape[-2])  # (L,)
    z = (x[..., :half] + 1j * x[..., half:]) * np.exp(1j * m[:, None] * theta)
    return np.concatenate([z.real, z.imag], axis=-1)


def test_rotate_turns_each_feature_pair_by_the_angle_of_its_position():
    x = np.random.default_rng(0).normal(size=(2, 3, 7, 8)).astype("float32")  # (B, H, L, K)
    for start in (0, 5):
        np.testing.assert_allclose(
            np.asarray(rotary_positions(x, start)), numpy_rotation(x, start), atol=1e-5
        )
    q, k = x[:, :, :1], x[:, :, 1:2]  # one query, one key
    products = [
        np.sum(np.asarray(rotary_positions(q, m)) * np.asarray(rotary_positions(k, m + 3)), axis=-1)
        for m in (0, 4, 40)
    ]  # the key three positions after the query, wherever the pair stands
    np.testing.assert_allclose(products[1], products[0], atol=1e-4)
    np.testing.assert_allclose(products[2], products[0], atol=1e-4)


def numpy_self_attention(layer, x, mask, scheme):
    """Multi-head self-attention from NumPy: queries and keys rotated before their product
    (`"rotary"`), or Shaw et al.'s eqs. 3-5 with `a_ij = w[clip(j - i, -k, k) + k]`
    (`"relative"`). `mask` `(B, L, L)`: True where query i may attend to key j."""
    weights = {w.path.split("/")[-1]: np.asarray(w) for w in layer.weights}
    heads, depth, length = layer.num_heads, layer.depth, x.shape[1]

    def project(name):
        y = x @ weights[f"{name}_kernel"] + weights[f"{name}_bias"]  # (B, L, D)
        return y.reshape(*x.shape[:2], heads, depth).transpose(0, 2, 1, 3)  # (B, H, L, K)

    q, k, v = project("query"), project("key"), project("value")
    if scheme == "rotary":
        q, k = numpy_rotation(q), numpy_rotation(k)
    logits = np.einsum("bhik,bhjk->bhij", q, k)
    if scheme == "relative":
        clip = layer.max_relative_position
        rows = np.clip(np.arange(length)[None, :] - np.arange(length)[:, None], -clip, clip)
        key_vectors = weights["relative_keys"][rows + clip]  # (L, L, K): a^K_ij
        value_vectors = weights["relative_values"][rows + clip]
        logits += np.einsum("bhik,ijk->bhij", q, key_vectors)
    logits = np.where(mask[:, None], logits / np.sqrt(depth), -1e9)  # (B, H, L, L)
    attention = np.exp(logits - logits.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    attended = np.einsum("bhij,bhjk->bhik", attention, v)
    if scheme == "relative":
        attended += np.einsum("bhij,ijk->bhik", attention, value_vectors)
    attended = attended.transpose(0, 2, 1, 3).reshape(x.shape[0], length, -1)
    return attended @ weights["output_kernel"] + weights["output_bias"]


@pytest.mark.parametrize(
    "scheme, options", [("rotary", {}), ("relative", {"max_relative_position": 2})]
)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_positions_is_the_papers_attention_in_numpy(scheme, options, causal):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 7, 16)).astype("float32")
    key_mask = np.array([[True] * 7, [True] * 5 + [False] * 2])
    mask = np.broadcast_to(key_mask[:, None, :], (2, 7, 7))
    if causal:
        mask = mask & np.tril(np.ones((7, 7), bool))
    layer = kt.layers.MultiHeadAttention(
        16, 4, positions=scheme, bias_initializer="normal", **options
    )
    outputs = np.asarray(layer(x, x, value_mask=key_mask, use_causal_mask=causal))
    expected = numpy_self_attention(layer, x, mask, scheme)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    plain = kt.layers.MultiHeadAttention(16, 4)  # the same projections, no positions
    plain.build(x.shape, x.shape)
    plain.set_weights(layer.get_weights()[:8])
    unplaced = np.asarray(plain(x, x, value_mask=key_mask, use_causal_mask=causal))
    assert np.abs(unplaced - outputs).max() > 0.01


def test_relative_indices_clip_the_distance_from_query_to_key():
    np.testing.assert_array_equal(
        np.asarray(relative_indices(np.arange(4), np.arange(5), 2)),
        np.clip(np.arange(5)[None] - np.arange(4)[:, None], -2, 2) + 2,
    )
    assert np.asarray(relative_indices(np.array([3]), np.arange(5), 2)).tolist() == [
        [0, 0, 1, 2, 3]
    ]  # a query at 3, keys at 0..4 (one step of incremental decoding)


@pytest.mark.parametrize(
    "scheme, options", [("rotary", {}), ("relative", {"max_relative_position": 3})]
)
def test_positions_in_attention_enter_self_attention_only_and_round_trip_the_config(
    scheme, options
):
    model = kt.Transformer(
        2, 16, 2, 32, 30, 30, positions=scheme, shared_embeddings="all", **options
    )
    source, target = np.array([[4, 9, 7, 0]]), np.array([[2, 5, 8]])
    logits = np.asarray(model((source, target)))
    for stack in (model.encoder, model.decoder):
        assert stack.embedding.position_encoding is None  # no table, no weights for one
        assert [block.self_attention.positions for block in stack.blocks] == [scheme] * 2
    assert [block.cross_attention.positions for block in model.decoder.blocks] == [None] * 2
    again = kt.Transformer.from_config(model.get_config())
    again((source, target))
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(np.asarray(again((source, target))), logits, atol=1e-6)


def test_positions_in_attention_refuse_what_they_cannot_do():
    with pytest.raises(ArgumentError, match=r"head depth d_model / num_heads must be even"):
        kt.layers.MultiHeadAttention(12, 4, positions="rotary")
    with pytest.raises(ArgumentError, match=r"positions='rotary' has none"):
        kt.layers.Encoder(2, 16, 2, 32, 30, positions="rotary", add_positions="every_layer")
    with pytest.raises(ArgumentError, match=r"needs the `step` being decoded"):
        layer = kt.layers.MultiHeadAttention(16, 2, positions="rotary")
        keys = np.zeros((1, 2, 3, 8), "float32")
        layer.build((1, 1, 16), (1, 3, 16))
        layer.call_with_cache(np.zeros((1, 1, 16), "float32"), (keys, keys))
    with pytest.raises(ArgumentError, match=r"`max_relative_position` is the clipping distance"):
        kt.Transformer(2, 16, 2, 32, 30, 30, positions="relative")
    with pytest.raises(ArgumentError, match=r"max_relative_position=4"):
        kt.layers.MultiHeadAttention(16, 2, max_relative_position=4)
    with pytest.raises(ArgumentError, match=r"positions='relative' has none"):
        kt.layers.Decoder(
            2,
            16,
            2,
            32,
            30,
            positions="relative",
            max_relative_position=4,
            add_positions="every_layer",
        )
