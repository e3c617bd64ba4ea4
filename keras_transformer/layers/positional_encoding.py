"""Position tables added to vectors: the paper's sinusoidal one (§3.5), or learned.

The schemes `positions.Sinusoidal` and `positions.Learned` add them; the
other schemes add no table and act in attention instead.
"""

import math

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.validation import check_choice, check_positive_int

LAYOUTS = ("interleaved", "concatenated")


def positional_encoding(length, depth, layout="interleaved", start=0, max_wavelength=10000):
    """The sinusoidal position table of the paper, computed in float32.

    PE(pos, 2i)   = sin(pos / max_wavelength^(2i / depth))
    PE(pos, 2i+1) = cos(pos / max_wavelength^(2i / depth))

    Args:
        length: number of positions L.
        depth: encoding size D (even).
        layout: `"interleaved"` puts sin and cos of one frequency side by side
            (the paper, the default); `"concatenated"` puts all sines first,
            then all cosines (the TensorFlow tutorial's `[sin | cos]`).
        start: position of the first row (for step-by-step decoding).
        max_wavelength: the 10000 of the formula.

    Returns:
        float32 tensor `(L, D)`.

    Examples:
        ```python
        table = positional_encoding(50, 128)  # (50, 128); table[0, 0::2] == 0
        ```
    """
    half = depth // 2
    positions = ops.cast(ops.arange(length) + start, "float32")  # (L,)
    exponents = ops.cast(ops.arange(half), "float32") * (2.0 / depth)  # 2i / D
    inverse_freq = ops.exp(-math.log(max_wavelength) * exponents)  # (D/2,)
    angles = positions[:, None] * inverse_freq[None, :]  # (L, D/2)
    if layout == "interleaved":
        table = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)  # (L, D/2, 2)
        return ops.reshape(table, (-1, 2 * half))  # (L, D)
    return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)  # (L, D)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEncoding(keras.layers.Layer):
    """Adds the sinusoidal positional encoding to a sequence of vectors.

    See `positional_encoding` for the formula and the two layouts. The table is
    computed for the actual sequence length on every call, so there is no
    maximum length; it is computed in float32 and cast to the layer's compute
    dtype.

    Args:
        layout: `"interleaved"` (paper, default) or `"concatenated"` (TF
            tutorial).
        max_wavelength: the 10000 of the formula.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, L, D)` with D even.
        start_index: position of the first element (for step-by-step
            decoding). Defaults to 0.

    Returns:
        `(B, L, D)`: inputs + PE; the input's Keras mask passes through.

    Raises:
        ValueError: on an unknown layout, a non-positive `max_wavelength`, or
            inputs whose last dimension is not even.

    Examples:
        ```python
        x = np.zeros((2, 10, 64), "float32")
        PositionalEncoding()(x)  # (2, 10, 64), equal to positional_encoding(10, 64)
        ```
    """

    def __init__(self, layout: str = "interleaved", max_wavelength: int = 10000, **kwargs):
        super().__init__(**kwargs)
        check_choice("layout", layout, LAYOUTS)
        check_positive_int("max_wavelength", max_wavelength)
        self.layout = layout
        self.max_wavelength = max_wavelength
        self.supports_masking = True

    def build(self, inputs_shape):
        depth = inputs_shape[-1]
        if depth is None or depth % 2:
            raise ArgumentError(
                "The last dimension of the inputs of `PositionalEncoding` must "
                f"be known and even. Received: inputs with shape={inputs_shape}"
            )

    def call(self, inputs, start_index=0):
        table = positional_encoding(
            ops.shape(inputs)[1],
            inputs.shape[-1],
            layout=self.layout,
            start=start_index,
            max_wavelength=self.max_wavelength,
        )  # (L, D)
        return inputs + ops.cast(table, inputs.dtype)[None]  # (B, L, D)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = {"layout": self.layout, "max_wavelength": self.max_wavelength}
        return {**super().get_config(), **config}


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEncoding(keras.layers.Layer):
    """Adds a trained position table to a sequence of vectors.

    x[:, t] + P[start_index + t], with P a `(max_positions, D)` weight learned
    with the model, as in BERT, Marian's `Wpos` or OpenNMT's learned position
    embeddings. Unlike the sinusoidal table, it holds no position beyond
    `max_positions - 1`: a longer input is an error (named here where its
    length is known; a search checks its lengths before it starts).

    Args:
        max_positions: rows of the table, the longest sequence the layer reads.
        embeddings_initializer: initializer of the table. Defaults to Keras'
            `Embedding` default, uniform in [-0.05, 0.05].
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, L, D)`.
        start_index: position of the first element (for step-by-step
            decoding). Defaults to 0.

    Returns:
        `(B, L, D)`: inputs + P[start_index : start_index + L]; the input's
        Keras mask passes through.

    Raises:
        ValueError: on a non-positive `max_positions`, or an input of known
            length that reaches past the table.

    Examples:
        ```python
        x = np.zeros((2, 10, 64), "float32")
        LearnedPositionalEncoding(max_positions=128)(x)  # (2, 10, 64): rows 0..9 of the table
        ```
    """

    def __init__(
        self,
        max_positions: int,
        embeddings_initializer: str | keras.initializers.Initializer = "uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("max_positions", max_positions)
        self.max_positions = max_positions
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        if self.built:  # shared by two stacks, built by the first
            return
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.max_positions, inputs_shape[-1]),
            initializer=self.embeddings_initializer,
        )  # (P, D)

    def call(self, inputs, start_index=0):
        length = inputs.shape[1]
        if isinstance(length, int) and isinstance(start_index, int):
            if start_index + length > self.max_positions:
                raise ArgumentError(
                    f"The learned position table has {self.max_positions} positions "
                    f"(`max_positions`); the inputs reach position {start_index + length - 1}."
                )
        positions = ops.arange(ops.shape(inputs)[1]) + start_index  # (L,)
        table = ops.take(self.embeddings, positions, axis=0)  # (L, D)
        return inputs + ops.cast(table, inputs.dtype)[None]  # (B, L, D)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = {
            "max_positions": self.max_positions,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        }
        return {**super().get_config(), **config}
