"""Rotary position embeddings (RoPE; Su et al., 2021, "RoFormer").

Queries and keys are rotated by their position before their dot product:
the pair of features `(x_i, x_{i + K/2})` of the vector at position m is
turned by the angle `m * theta_i`, with `theta_i = max_wavelength^(-2i / K)`
(the sinusoidal table's frequencies). Seen as the complex number
`z_i = x_i + 1j * x_{i + K/2}`, the rotation is `z_i * exp(1j * m * theta_i)`,
so the product of a query at m and a key at n depends on `m - n` only.

The features are paired across the two halves of a head (GPT-NeoX, LLaMA,
`keras_hub.layers.RotaryEmbedding`, CTranslate2's `rotary_interleave=False`),
not side by side as in the RoFormer paper; the two pairings differ by a fixed
permutation of the features, which the projections learn as easily.
"""

import math

from keras import ops

MAX_WAVELENGTH = 10000


def rotary_positions(x, start=0, max_wavelength=MAX_WAVELENGTH):
    """Rotates each vector of `x` by its position.

    Args:
        x: `(..., L, K)` with K even: L vectors of one sequence, position
            `start + l` at index l (e.g. a head's queries `(B, H, L, K)`).
        start: position of the first vector (a Python int or scalar tensor),
            the step being decoded in incremental decoding.
        max_wavelength: the 10000 of the frequencies.

    Returns:
        `x` rotated, same shape and dtype; the angles are computed in float32.

    Examples:
        ```python
        q = np.random.rand(2, 4, 5, 8).astype("float32")  # (B, H, L, K)
        rotated = rotary_positions(q)  # position 0 unchanged
        # rotated[:, :, 1:] equals rotary_positions(q[:, :, 1:], start=1)
        ```
    """
    depth = x.shape[-1]
    half = depth // 2
    positions = ops.cast(ops.arange(ops.shape(x)[-2]) + start, "float32")  # (L,)
    exponents = ops.cast(ops.arange(half), "float32") * (2.0 / depth)  # 2i / K
    inverse_freq = ops.exp(-math.log(max_wavelength) * exponents)  # (K/2,)
    angles = positions[:, None] * inverse_freq[None, :]  # (L, K/2)
    cos = ops.cast(ops.cos(angles), x.dtype)
    sin = ops.cast(ops.sin(angles), x.dtype)
    first, second = x[..., :half], x[..., half:]  # (..., L, K/2) each
    return ops.concatenate(
        [first * cos - second * sin, first * sin + second * cos], axis=-1
    )  # (..., L, K)
