import keras
import numpy as np
import pytest
from keras import ops

from keras_transformer import layers


def numpy_attention(q, k, v, allowed):
    """softmax(q k^T / sqrt(d_k) + (1 - allowed) * -1e9) v, in float64."""
    logits = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    logits = logits + (1.0 - allowed) * -1e9
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return weights @ v, weights


def random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_scaled_dot_product_attention_matches_numpy_with_padding_and_look_ahead():
    q, k, v = random(2, 3, 5, 4, seed=1), random(2, 3, 5, 4, seed=2), random(2, 3, 5, 6, seed=3)
    ids = np.array([[4, 8, 9, 2, 0], [7, 1, 0, 0, 0]])
    mask = ops.logical_and(layers.padding_mask(ids), layers.look_ahead_mask(5))
    outputs, weights = layers.scaled_dot_product_attention(q, k, v, mask=mask)
    allowed = (ids != 0)[:, None, None, :] & np.tril(np.ones((5, 5), bool))
    expected_out, expected_w = numpy_attention(q, k, v, allowed.astype("float64"))
    np.testing.assert_allclose(ops.convert_to_numpy(weights), expected_w, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected_out, atol=1e-5)
    # Blocked keys get exactly zero weight.
    assert np.all(ops.convert_to_numpy(weights)[~np.broadcast_to(allowed, (2, 3, 5, 5))] == 0)


def test_scaled_dot_product_attention_without_mask_matches_numpy():
    q, k, v = random(2, 5, 8, seed=4), random(2, 7, 8, seed=5), random(2, 7, 3, seed=6)
    outputs, _ = layers.scaled_dot_product_attention(q, k, v)
    expected, _ = numpy_attention(q, k, v, np.ones((2, 5, 7)))
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected, atol=1e-5)


@pytest.mark.parametrize("masked", [True, False])
def test_scaled_dot_product_attention_in_a_while_loop_matches_numpy(masked):
    """The keys and mask stay the same through the loop, as a decoder's cross-attention
    to the source does: TensorFlow's graph with oneDNN once returned an empty tensor."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("a TensorFlow graph")
    import tensorflow as tf

    q, k = random(2, 4, 1, 16, seed=10), random(2, 4, 7, 16, seed=11)
    allowed = np.array([[True] * 7, [True] * 4 + [False] * 3])[:, None, None, :]
    mask = allowed if masked else None

    @tf.function
    def three_times(q, k):
        def attend(i, q):
            return i + 1, layers.scaled_dot_product_attention(q, k, k, mask=mask)[0]

        return tf.while_loop(lambda i, q: i < 3, attend, (0, q))[1]

    expected = q.astype("float64")
    for _ in range(3):
        expected, _ = numpy_attention(expected, k, k, allowed if masked else np.ones((1,)))
    outputs = three_times(tf.constant(q), tf.constant(k))
    assert outputs.shape == q.shape
    np.testing.assert_allclose(outputs.numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_query_a_row_matches_numpy(dtype):
    """A decoding step's single query per row, which TensorFlow runs on its own kernels
    (`layers.single_query`), as NumPy attends, in a graph too."""
    q, k, v = random(2, 3, 1, 4, seed=12), random(2, 3, 6, 4, seed=13), random(2, 3, 6, 5, seed=14)
    allowed = np.array([[True] * 6, [True] * 2 + [False] * 4])[:, None, None, :]

    def attend(q, k, v):
        return layers.scaled_dot_product_attention(
            ops.cast(q, dtype), ops.cast(k, dtype), ops.cast(v, dtype), mask=allowed
        )

    expected_out, expected_w = numpy_attention(q, k, v, allowed.astype("float64"))
    tolerance = 1e-5 if dtype == "float32" else 3e-2
    runs = [attend]
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        runs.append(tf.function(attend))
    for run in runs:
        outputs, weights = run(q, k, v)
        assert tuple(outputs.shape) == (2, 3, 1, 5)
        np.testing.assert_allclose(
            ops.convert_to_numpy(ops.cast(weights, "float32")), expected_w, atol=tolerance
        )
        np.testing.assert_allclose(
            ops.convert_to_numpy(ops.cast(outputs, "float32")), expected_out, atol=tolerance
        )


def test_scaled_dot_product_attention_rejects_unbroadcastable_mask():
    q = random(2, 5, 8)
    with pytest.raises(ValueError, match=r"`mask` cannot broadcast.*\(2, 4\)"):
        layers.scaled_dot_product_attention(q, q, q, mask=np.ones((2, 4), bool))


@pytest.mark.parametrize("allowed", [True, False])
def test_a_single_key_gets_all_the_weight_without_a_warning(allowed, recwarn):
    q, k, v = random(2, 3, 1, 4, seed=7), random(2, 3, 1, 4, seed=8), random(2, 3, 1, 6, seed=9)
    mask = np.full((2, 1, 1, 1), allowed)
    outputs, weights = layers.scaled_dot_product_attention(q, k, v, mask=mask)
    expected_out, expected_w = numpy_attention(q, k, v, mask.astype("float64"))
    np.testing.assert_allclose(ops.convert_to_numpy(weights), expected_w)
    np.testing.assert_allclose(ops.convert_to_numpy(outputs), expected_out, atol=1e-6)
    assert not [w for w in recwarn if "softmax" in str(w.message)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fully_masked_rows_stay_finite_in_low_precision_inputs(dtype):
    q = ops.cast(random(2, 2, 4, 8), dtype)
    mask = np.zeros((2, 1, 1, 4), bool)  # every key blocked
    outputs, weights = layers.scaled_dot_product_attention(q, q, q, mask=mask)
    assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(outputs, "float32"))))
    np.testing.assert_allclose(ops.convert_to_numpy(ops.cast(weights, "float32")), 0.25, atol=1e-2)


def copy_weights_to_keras(ours, theirs, heads, depth):
    """Sets `theirs` (keras.layers.MultiHeadAttention) to our weights."""
    weights = []
    for name in ("query", "key", "value"):
        kernel = ops.convert_to_numpy(getattr(ours, f"{name}_kernel"))
        bias = ops.convert_to_numpy(getattr(ours, f"{name}_bias"))
        weights += [kernel.reshape(-1, heads, depth), bias.reshape(heads, depth)]
    kernel = ops.convert_to_numpy(ours.output_kernel)
    weights += [kernel.reshape(heads, depth, -1), ops.convert_to_numpy(ours.output_bias)]
    theirs.set_weights(weights)


def keras_pair(d_model=32, heads=4, query_dim=32, value_dim=32):
    ours = layers.MultiHeadAttention(d_model, heads)
    theirs = keras.layers.MultiHeadAttention(heads, key_dim=d_model // heads)
    query, value = random(2, 5, query_dim, seed=7), random(2, 6, value_dim, seed=8)
    ours(query, value)
    theirs(query, value)
    for layer in (ours, theirs):
        for w in layer.weights:  # non-zero biases, so they are checked too
            w.assign(random(*w.shape, seed=len(w.path)) * 0.3)
    copy_weights_to_keras(ours, theirs, heads, d_model // heads)
    return ours, theirs


def test_multi_head_attention_equals_keras_self_attention_with_causal_mask():
    ours, theirs = keras_pair()
    x = random(2, 5, 32, seed=9)
    ours_out, ours_scores = ours(x, x, use_causal_mask=True, return_attention_scores=True)
    theirs_out, theirs_scores = theirs(x, x, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(ours_out), theirs_out, atol=1e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(ours_scores), theirs_scores, atol=1e-6)


def test_multi_head_attention_equals_keras_cross_attention_with_attention_mask():
    ours, theirs = keras_pair(query_dim=24, value_dim=40)
    query, value = random(2, 5, 24, seed=10), random(2, 6, 40, seed=11)
    attention_mask = np.random.default_rng(0).random((2, 5, 6)) > 0.3
    attention_mask[:, :, 0] = True
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(query, value, attention_mask=attention_mask)),
        theirs(query, value, attention_mask=attention_mask),
        atol=1e-5,
    )


def test_multi_head_attention_picks_up_the_keras_mask_of_value():
    ours, theirs = keras_pair()
    embed = keras.layers.Embedding(20, 32, mask_zero=True)
    query_ids = np.array([[3, 4, 5, 6, 7], [3, 4, 5, 0, 0]])
    query = embed(query_ids)
    value = embed(np.array([[1, 2, 3, 4, 0, 0], [5, 6, 0, 0, 0, 0]]))
    implicit = ops.convert_to_numpy(ours(query, value))
    explicit = ours(
        ops.convert_to_numpy(query),
        ops.convert_to_numpy(value),
        attention_mask=ops.convert_to_numpy(value._keras_mask)[:, None, :],
    )
    np.testing.assert_allclose(implicit, ops.convert_to_numpy(explicit), atol=1e-6)
    # Keras also blocks padded query rows; at real query positions both agree.
    expected = theirs(query, value)
    real = query_ids != 0
    np.testing.assert_allclose(implicit[real], ops.convert_to_numpy(expected)[real], atol=1e-5)


def test_the_query_mask_marks_the_output_and_is_not_an_argument():
    mha = layers.MultiHeadAttention(d_model=32, num_heads=4)
    query_ids = np.array([[3, 4, 5, 0, 0]])
    query = keras.layers.Embedding(20, 32, mask_zero=True)(query_ids)
    value = random(1, 6, 32, seed=3)
    outputs = mha(query, value)
    np.testing.assert_array_equal(ops.convert_to_numpy(outputs._keras_mask), query_ids != 0)
    with pytest.raises(TypeError, match="query_mask"):
        mha(query, value, query_mask=query_ids != 0)


def test_multi_head_attention_returns_per_head_scores():
    mha = layers.MultiHeadAttention(d_model=16, num_heads=4)
    x = random(3, 7, 16)
    outputs, scores = mha(x, x, return_attention_scores=True)
    assert outputs.shape == (3, 7, 16)
    assert scores.shape == (3, 4, 7, 7)
    np.testing.assert_allclose(ops.convert_to_numpy(ops.sum(scores, -1)), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(d_model=100, num_heads=8),
            r"`num_heads` must divide `d_model`.*d_model=100, num_heads=8",
        ),
        (dict(d_model=0, num_heads=1), r"`d_model` must be a positive integer.*d_model=0"),
        (dict(d_model=8, num_heads=-2), r"`num_heads` must be a positive integer.*num_heads=-2"),
        (dict(d_model=8, num_heads=2, dropout_rate=1.5), r"`dropout_rate`.*dropout_rate=1.5"),
    ],
)
def test_multi_head_attention_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        layers.MultiHeadAttention(**kwargs)


def test_multi_head_attention_rejects_mask_that_cannot_broadcast():
    mha = layers.MultiHeadAttention(d_model=16, num_heads=4)
    x = random(2, 5, 16)
    with pytest.raises(ValueError, match=r"`attention_mask` cannot broadcast.*\(2, 5, 4\)"):
        mha(x, x, attention_mask=np.ones((2, 5, 4), bool))


def test_multi_head_attention_rejects_wrong_rank():
    mha = layers.MultiHeadAttention(d_model=16, num_heads=4)
    with pytest.raises(ValueError, match=r"`query` must have rank 3.*\(5, 16\)"):
        mha(random(5, 16), random(2, 5, 16))


def test_hypotheses_sharing_cache_rows_attend_as_each_alone_over_its_whole_prefix():
    rng = np.random.default_rng(7)
    batch, beams, length, d_model = 2, 2, 3, 16
    mha = layers.MultiHeadAttention(d_model=d_model, num_heads=4)
    x = rng.normal(size=(batch * beams, length, d_model)).astype("float32")  # sentence-major
    full = ops.convert_to_numpy(mha(x, x, use_causal_mask=True))  # (B * k, T, D)
    shape = (batch, 4, length * beams, d_model // 4)  # (B, H, T * k, K)
    cache = (np.zeros(shape, "float32"), np.zeros(shape, "float32"))
    for step in range(length):
        y, cache = mha.call_with_cache(x[:, step : step + 1], cache, step=step)
        np.testing.assert_allclose(ops.convert_to_numpy(y)[:, 0], full[:, step], atol=1e-5)
