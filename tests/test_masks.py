import numpy as np
import pytest
from keras import ops

from keras_transformer.layers import cache, masks


def test_padding_mask_is_true_at_real_tokens_with_broadcast_shape():
    ids = np.array([[5, 7, 0, 0], [3, 0, 0, 0]])
    mask = ops.convert_to_numpy(masks.padding_mask(ids))
    assert mask.shape == (2, 1, 1, 4)
    np.testing.assert_array_equal(mask[:, 0, 0], ids != 0)


def test_look_ahead_mask_is_lower_triangular():
    mask = ops.convert_to_numpy(masks.look_ahead_mask(4))
    np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), bool)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_large_negative_is_finite_and_blocks_in_its_dtype(dtype):
    value = masks.large_negative(dtype)
    as_dtype = ops.convert_to_numpy(ops.cast(ops.cast(value, dtype), "float32"))
    assert np.isfinite(as_dtype)
    # Added to a typical logit it still drives exp() to exactly 0 in float32.
    assert np.exp(np.float32(as_dtype) + np.float32(10.0)) == 0.0


def test_float16_offset_leaves_room_for_the_logit():
    logits = ops.cast(np.array([-20.0, 0.0, 20.0]), "float16")
    shifted = ops.convert_to_numpy(logits + masks.large_negative("float16"))
    assert np.all(np.isfinite(shifted))


def test_a_float16_softmax_masked_with_the_offset_matches_float32():
    logits = np.array([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    mask = np.array([[True, True, False, False], [False, False, False, False]])

    def masked_softmax(dtype):
        x = ops.cast(logits, dtype)
        x = x + (1.0 - ops.cast(mask, dtype)) * masks.large_negative(dtype)
        return ops.convert_to_numpy(ops.cast(ops.softmax(x, axis=-1), "float32"))

    reference = masked_softmax("float32")
    np.testing.assert_allclose(reference[1], 0.25)  # a fully blocked row: uniform
    np.testing.assert_allclose(masked_softmax("float16"), reference, atol=1e-3)


def test_as_attention_mask_expands_each_rank():
    assert masks.as_attention_mask(np.ones((3, 5), bool)).shape == (1, 1, 3, 5)
    assert masks.as_attention_mask(np.ones((2, 3, 5), bool)).shape == (2, 1, 3, 5)
    assert masks.as_attention_mask(np.ones((2, 4, 3, 5), bool)).shape == (2, 4, 3, 5)


def test_as_attention_mask_rejects_bad_rank_and_unbroadcastable_shape():
    with pytest.raises(ValueError, match=r"`attention_mask` must have rank.*\(5,\)"):
        masks.as_attention_mask(np.ones((5,), bool))
    with pytest.raises(ValueError, match=r"`attention_mask` cannot broadcast.*\(2, 3, 4\)"):
        masks.as_attention_mask(np.ones((2, 3, 4), bool), target_shape=(2, 8, 3, 5))


def test_merge_masks_ands_and_skips_none():
    a = np.array([[True, True, False]])
    b = np.array([[True, False, True]])
    merged = ops.convert_to_numpy(masks.merge_masks(a, None, b))
    np.testing.assert_array_equal(merged, a & b)
    assert masks.merge_masks(None, None) is None


def test_cache_mask_opens_positions_up_to_the_step():
    mask = ops.convert_to_numpy(cache.own_slot_mask(5, 2))
    assert mask.shape == (1, 1, 1, 5)
    np.testing.assert_array_equal(mask[0, 0, 0], np.arange(5) <= 2)


def test_lineage_mask_opens_each_hypothesis_own_slot_at_each_position_up_to_the_step():
    rng = np.random.default_rng(0)
    batch, beams, length, step = 2, 3, 5, 3
    lineage = rng.integers(0, beams, (batch, beams, length)).astype("int32")
    mask = ops.convert_to_numpy(cache.lineage_mask(lineage, step))
    expected = np.zeros((batch, 1, beams, length * beams), bool)
    for b in range(batch):
        for j in range(beams):
            for p in range(step + 1):
                expected[b, 0, j, p * beams + lineage[b, j, p]] = True
    np.testing.assert_array_equal(mask, expected)


def test_cache_mask_of_several_hypotheses_opens_each_its_own_slot():
    mask = ops.convert_to_numpy(cache.own_slot_mask(8, 2, beams=2))  # 4 positions, 2 slots
    assert mask.shape == (1, 1, 2, 8)
    np.testing.assert_array_equal(mask[0, 0, 0], [1, 0, 1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(mask[0, 0, 1], [0, 1, 0, 1, 0, 1, 0, 0])
    own_slots = np.broadcast_to(np.arange(2)[None, :, None], (1, 2, 4))  # (B, k, L) lineage
    np.testing.assert_array_equal(mask, ops.convert_to_numpy(cache.lineage_mask(own_slots, 2)))
