"""The decoder's self-attention cache: its layout, and every operation on it.

Incremental decoding keeps, per decoder layer, the keys and values of the
target positions decoded so far. The k hypotheses of a sentence (k = 1 for
greedy decoding, the beam size for beam search) share one cache row:

    entry p * k + s  holds position p of hypothesis slot s    (B, H, L * k, K)
    lineage[b, j, p] the slot whose entry at position p is    (B, k, L)
                     part of hypothesis j's history

A hypothesis that takes over another's history (beam search) reads it where
it was written, through its lineage, so reordering hypotheses moves the
small lineage table and never the keys and values. At any length L the
layout is the same, so a cache grows by appending entries.

This module is the only place that knows the layout: the decoder creates,
grows and reorders caches with it, attention writes and masks with it.

Examples:
    ```python
    cache = empty_cache(batch=2, num_layers=3, num_heads=4, depth=16, max_length=8, beams=2)
    cache = reorder(cache, np.array([[1, 1], [0, 1]]))  # both hypotheses of sentence 0 go on from 1
    cache = grow(cache, max_length=16)                  # room for 16 positions
    ```
"""

from typing import NamedTuple

from keras import ops

from keras_transformer.errors import ArgumentError


class SelfAttentionCache(NamedTuple):
    """The self-attention cache of a decoder stack.

    Attributes:
        layers: per decoder layer a pair `(keys, values)`, each
            `(B, H, L * k, K)`.
        lineage: int32 `(B, k, L)`, the slot holding each hypothesis' entry
            of each position.
    """

    layers: list
    lineage: object


def empty_cache(batch, num_layers, num_heads, depth, max_length, beams=1, dtype="float32"):
    """An all-zero cache of `max_length` positions for `beams` hypotheses per row.

    Args:
        batch: rows B (sentences).
        num_layers: decoder layers N.
        num_heads: attention heads H.
        depth: size K of a head's keys and values.
        max_length: positions L each hypothesis can decode.
        beams: hypotheses per row, k.
        dtype: dtype of the keys and values.

    Returns:
        A `SelfAttentionCache`.
    """
    shape = (batch, num_heads, max_length * beams, depth)  # (B, H, L * k, K)
    return SelfAttentionCache(
        layers=[(ops.zeros(shape, dtype), ops.zeros(shape, dtype)) for _ in range(num_layers)],
        lineage=ops.zeros((batch, beams, max_length), "int32"),
    )


def positions(cache):
    """The positions L a cache holds: a Python int, or a scalar tensor where the
    length is not static (a step traced once for every cache length)."""
    return ops.shape(cache.lineage)[2]


def grow(cache, max_length):
    """`cache` with room for `max_length` positions, what it holds kept.

    Position p of slot s is entry `p * k + s` at any length, so growing
    appends zero entries (and zero lineage) after the last position.

    Args:
        cache: a `SelfAttentionCache` of L positions.
        max_length: positions the grown cache holds, at least L.

    Returns:
        The cache `empty_cache(..., max_length, k)` would be after the same
        steps.

    Raises:
        ArgumentError: if `max_length` is shorter than the cache.
    """
    beams, length = cache.lineage.shape[1], positions(cache)
    if max_length < length:
        raise ArgumentError(
            "A cache can only grow. "
            f"Received: max_length={max_length} for a cache of {length} positions"
        )
    more = max_length - length
    entries = [(0, 0), (0, 0), (0, more * beams), (0, 0)]

    def grow_pair(pair):
        return tuple(ops.pad(t, entries) for t in pair)  # (B, H, max_length * k, K)

    return SelfAttentionCache(
        layers=[grow_pair(pair) for pair in cache.layers],
        lineage=ops.pad(cache.lineage, [(0, 0), (0, 0), (0, more)]),  # (B, k, max_length)
    )


def reorder(cache, beams):
    """The cache after hypothesis j of row b took over the history of hypothesis `beams[b, j]`.

    Args:
        cache: a `SelfAttentionCache`.
        beams: integer `(B, k)`, indices in [0, k).

    Returns:
        The cache with its lineage reordered; keys and values stay in place.
    """
    lineage = cache.lineage  # (B, k, L)
    batch, k, length = ops.shape(lineage)
    first_row = ops.arange(batch, dtype="int32")[:, None] * k  # (B, 1): row b's beam 0
    parents = first_row + ops.cast(beams, "int32")  # (B, k), rows of the flat lineage
    flat = ops.reshape(lineage, (-1, length))  # (B * k, L)
    return cache._replace(lineage=ops.take(flat, parents, axis=0))  # (B, k, L)


def claim_position(lineage, step):
    """The lineage with each hypothesis' own slot at position `step`, where it writes.

    Args:
        lineage: int32 `(B, k, L)`.
        step: the position being decoded.

    Returns:
        int32 `(B, k, L)`.
    """
    beams, length = ops.shape(lineage)[1:]
    at_step = ops.arange(length)[None, None, :] == step  # (1, 1, L)
    return ops.where(at_step, ops.arange(beams)[None, :, None], lineage)


def write(keys, values, new_keys, new_values, step):
    """Writes the k hypotheses' keys and values of position `step` into their entries.

    Args:
        keys, values: one layer's cache, each `(B, H, L * k, K)`.
        new_keys, new_values: `(B, H, k, K)`, slot s in column s.
        step: the position being decoded.

    Returns:
        The pair `(keys, values)` with entries `step * k .. step * k + k - 1` written.
    """
    start = (0, 0, step * ops.shape(new_keys)[2], 0)
    keys = ops.slice_update(keys, start, ops.cast(new_keys, keys.dtype))
    values = ops.slice_update(values, start, ops.cast(new_values, values.dtype))
    return keys, values


def entry_positions(length, beams=1):
    """The position each entry of a cache holds: entry `p * k + s` holds position p.

    Args:
        length: number of cache entries, L * k.
        beams: hypotheses sharing the cache, k.

    Returns:
        int32 `(L * k,)`.
    """
    return ops.arange(length, dtype="int32") // beams


def own_slot_mask(length, step, beams=1):
    """Self-attention mask of step `step` when each hypothesis reads only its own slot.

    Greedy decoding and sampling (`beams=1`), or k hypotheses that never
    take over one another's histories. Beam search uses `lineage_mask`.

    Args:
        length: number of cache entries, L * k (a Python int or a scalar tensor).
        step: the position being decoded; positions 0..step are written.
        beams: hypotheses sharing the cache, k.

    Returns:
        Boolean tensor `(1, 1, k, L * k)`: True for hypothesis j at the
        entries of positions 0..step in slot j.

    Examples:
        >>> own_slot_mask(4, 1)
        [[[[True, True, False, False]]]]
    """
    entry = ops.arange(length)
    own = entry % beams == ops.arange(beams)[:, None]  # (k, L * k)
    return ((entry_positions(length, beams) <= step) & own)[None, None]  # (1, 1, k, L * k)


def lineage_mask(lineage, step):
    """Self-attention mask of step `step` over a cache that k hypotheses share.

    Args:
        lineage: integer `(B, k, L)`: `lineage[b, j, p]` is the slot whose
            entry at position p belongs to the history of hypothesis j, for
            positions 0..step.
        step: the position being decoded.

    Returns:
        Boolean tensor `(B, 1, k, L * k)`: hypothesis j may attend to entry
        `p * k + s` iff `p <= step` and `s == lineage[b, j, p]`.

    Examples:
        >>> lineage_mask(np.array([[[0, 1], [0, 0]]]), 1)  # k = 2, L = 2
        [[[[True, False, False, True], [True, False, True, False]]]]
    """
    lineage = ops.cast(lineage, "int32")
    beams, length = ops.shape(lineage)[1:]
    entry = ops.arange(length * beams, dtype="int32")
    position, slot = entry_positions(length * beams, beams), entry % beams  # (L * k,) each
    owner = ops.take(lineage, position, axis=2)  # (B, k, L * k)
    return ((position <= step) & (slot == owner))[:, None]  # (B, 1, k, L * k)
