"""Positions inside attention against the papers' formulas written in NumPy: rotary
positions (Su et al., 2021), relative position representations (Shaw et al., 2018),
T5's relative attention bias (Raffel et al., 2020) and ALiBi (Press et al., 2022), and the
options that go with them.

The cached steps of such models are checked against their full passes in
`test_search.py`, CTranslate2's scores in `test_ctranslate2.py`, the exports in
`test_positions.py`.
"""

import numpy as np
import pytest

import keras_transformer as kt
from keras_transformer.errors import ArgumentError
from keras_transformer.layers import ALiBi, Rotary, ShawRelative, T5Bias, rotary_positions
from keras_transformer.layers.positions import alibi_slopes
from keras_transformer.layers.relative import relative_buckets, relative_indices


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


def numpy_t5_bucket(query, key, bidirectional, num_buckets=32, max_distance=128):
    """T5's `_relative_position_bucket` (Mesh TensorFlow), for one pair, in plain Python:
    n = query - key, the distance back to the key."""
    n, bucket = query - key, 0
    if bidirectional:
        num_buckets //= 2
        bucket += num_buckets if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return bucket + n
    large = max_exact + int(
        np.log(n / max_exact) / np.log(max_distance / max_exact) * (num_buckets - max_exact)
    )
    return bucket + min(large, num_buckets - 1)


def test_t5_buckets_are_the_papers_for_near_far_and_future_keys():
    queries, keys = np.array([0, 7, 40, 300]), np.arange(0, 400, 3)
    for bidirectional in (True, False):
        expected = [[numpy_t5_bucket(i, j, bidirectional) for j in keys] for i in queries]
        got = np.asarray(relative_buckets(queries, keys, bidirectional))
        np.testing.assert_array_equal(got, expected, err_msg=f"bidirectional={bidirectional}")


def test_alibi_slopes_are_the_papers_geometric_sequences():
    """Press et al. (2022), §3: for 8 heads 1/2, 1/4, ..., 1/256; for a head count that is
    not a power of two, the slopes of the power below, then every other slope of twice it."""
    np.testing.assert_allclose(alibi_slopes(8), [2.0**-h for h in range(1, 9)])
    np.testing.assert_allclose(alibi_slopes(4), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    np.testing.assert_allclose(
        alibi_slopes(6), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    )


def numpy_self_attention(layer, x, key_mask, causal, scheme):
    """Multi-head self-attention from NumPy: queries and keys rotated before their product
    (`Rotary`), or Shaw et al.'s eqs. 3-5 with `a_ij = w[clip(j - i, -k, k) + k]`
    (`ShawRelative`), or T5's bias per head and bucket added to the logits (`T5Bias`,
    unidirectional buckets when `causal`), or ALiBi's `-m_h |i - j|` with the paper's slopes
    for 4 heads (`ALiBi`). `key_mask` `(B, L)`: True at the keys every query may attend
    to; with `causal`, those up to its own position."""
    weights = {w.path.split("/")[-1]: np.asarray(w) for w in layer.weights}
    heads, depth, length = layer.num_heads, layer.depth, x.shape[1]
    mask = np.broadcast_to(key_mask[:, None, :], (x.shape[0], length, length))
    if causal:
        mask = mask & np.tril(np.ones((length, length), bool))

    def project(name):
        y = x @ weights[f"{name}_kernel"] + weights[f"{name}_bias"]  # (B, L, D)
        return y.reshape(*x.shape[:2], heads, depth).transpose(0, 2, 1, 3)  # (B, H, L, K)

    q, k, v = project("query"), project("key"), project("value")
    if scheme == "rotary":
        q, k = numpy_rotation(q), numpy_rotation(k)
    logits = np.einsum("bhik,bhjk->bhij", q, k)
    if scheme == "relative":
        clip = layer.positions.max_distance
        rows = np.clip(np.arange(length)[None, :] - np.arange(length)[:, None], -clip, clip)
        key_vectors = weights["relative_keys"][rows + clip]  # (L, L, K): a^K_ij
        value_vectors = weights["relative_values"][rows + clip]
        logits += np.einsum("bhik,ijk->bhij", q, key_vectors)
    logits = logits / np.sqrt(depth)
    if scheme == "relative_bias":
        buckets = [
            [numpy_t5_bucket(i, j, not causal) for j in range(length)] for i in range(length)
        ]
        logits += weights["relative_attention_bias"][np.array(buckets)].transpose(2, 0, 1)
    if scheme == "alibi":
        assert heads == 4
        slopes = np.array([1 / 4, 1 / 16, 1 / 64, 1 / 256])  # 2^(-8h/H), h = 1..4
        distance = np.abs(np.arange(length)[None, :] - np.arange(length)[:, None])
        logits -= slopes[:, None, None] * distance
    logits = np.where(mask[:, None], logits, -1e9)  # (B, H, L, L)
    attention = np.exp(logits - logits.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    attended = np.einsum("bhij,bhjk->bhik", attention, v)
    if scheme == "relative":
        attended += np.einsum("bhij,ijk->bhik", attention, value_vectors)
    attended = attended.transpose(0, 2, 1, 3).reshape(x.shape[0], length, -1)
    return attended @ weights["output_kernel"] + weights["output_bias"]


SCHEMES = [Rotary(), ShawRelative(2), T5Bias(), ALiBi()]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda scheme: scheme.name)
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_positions_is_the_papers_attention_in_numpy(scheme, causal):
    rng = np.random.default_rng(1)
    length = 20  # T5's buckets differ each way beyond distance 8
    x = rng.normal(size=(2, length, 16)).astype("float32")
    key_mask = np.array([[True] * length, [True] * (length - 3) + [False] * 3])
    layer = kt.layers.MultiHeadAttention(16, 4, positions=scheme, bias_initializer="normal")
    outputs = np.asarray(layer(x, x, value_mask=key_mask, use_causal_mask=causal))
    expected = numpy_self_attention(layer, x, key_mask, causal, scheme.name)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    plain = kt.layers.MultiHeadAttention(16, 4)  # the same projections, no positions
    plain.build(x.shape, x.shape)
    plain.set_weights(layer.get_weights()[:8])
    unplaced = np.asarray(plain(x, x, value_mask=key_mask, use_causal_mask=causal))
    assert np.abs(unplaced - outputs).max() > 0.01


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda scheme: scheme.name)
def test_a_cached_step_attends_as_the_causal_full_pass_at_every_position(scheme):
    """Twenty steps, far enough for T5's unidirectional buckets to leave the exact ones."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 20, 16)).astype("float32")
    layer = kt.layers.MultiHeadAttention(16, 4, positions=scheme)
    full = np.asarray(layer(x, x, use_causal_mask=True))
    keys = np.zeros((2, 4, 20, 4), "float32")  # (B, H, L, K)
    cache, steps = (keys, keys), []
    for t in range(20):
        y, cache = layer.call_with_cache(x[:, t : t + 1], cache, step=t)
        steps.append(np.asarray(y)[:, 0])
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-5)


def test_relative_indices_clip_the_distance_from_query_to_key():
    np.testing.assert_array_equal(
        np.asarray(relative_indices(np.arange(4), np.arange(5), 2)),
        np.clip(np.arange(5)[None] - np.arange(4)[:, None], -2, 2) + 2,
    )
    assert np.asarray(relative_indices(np.array([3]), np.arange(5), 2)).tolist() == [
        [0, 0, 1, 2, 3]
    ]  # a query at 3, keys at 0..4 (one step of incremental decoding)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda scheme: scheme.name)
def test_positions_in_attention_enter_self_attention_only_and_round_trip_the_config(scheme):
    model = kt.Transformer(2, 16, 2, 32, 30, 30, positions=scheme, shared_embeddings="all")
    source, target = np.array([[4, 9, 7, 0]]), np.array([[2, 5, 8]])
    logits = np.asarray(model((source, target)))
    for stack in (model.encoder, model.decoder):
        assert stack.embedding.position_encoding is None  # no table, no weights for one
        assert [block.self_attention.positions for block in stack.blocks] == [scheme] * 2
    assert [block.cross_attention.positions for block in model.decoder.blocks] == [None] * 2
    again = kt.Transformer.from_config(model.get_config())
    assert again.positions == scheme
    again((source, target))
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(np.asarray(again((source, target))), logits, atol=1e-6)


def test_positions_in_attention_refuse_what_they_cannot_do():
    with pytest.raises(ArgumentError, match=r"head depth d_model / num_heads must be even"):
        kt.layers.MultiHeadAttention(12, 4, positions="rotary")
    with pytest.raises(ArgumentError, match=r"adds a table to the inputs, not to attention"):
        kt.layers.MultiHeadAttention(16, 2, positions="sinusoidal")
    with pytest.raises(ArgumentError, match=r"`add_positions` is a setting of.*not of "):
        kt.layers.Encoder(2, 16, 2, 32, 30, positions="rotary", add_positions="every_layer")
    with pytest.raises(ArgumentError, match=r"needs the `step` being decoded"):
        layer = kt.layers.MultiHeadAttention(16, 2, positions="rotary")
        keys = np.zeros((1, 2, 3, 8), "float32")
        layer.build((1, 1, 16), (1, 3, 16))
        layer.call_with_cache(np.zeros((1, 1, 16), "float32"), (keys, keys))
    with pytest.raises(ArgumentError, match=r"needs `max_relative_position`"):
        kt.Transformer(2, 16, 2, 32, 30, 30, positions="relative")
    with pytest.raises(ArgumentError, match=r"\['max_relative_position'\] go with a scheme's name"):
        kt.layers.MultiHeadAttention(16, 2, max_relative_position=4)
    with pytest.raises(ArgumentError, match=r"`num_buckets` must be even and at least 4"):
        T5Bias(num_buckets=3)
