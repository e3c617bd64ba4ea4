"""Positional encodings, sinusoidal (§3.5) or learned, and token + position embedding (§3.4).

Three more schemes add no table: rotary positions rotate attention's queries and
keys (`layers.rotary`), relative positions add a vector per distance to its keys
and values, and T5's relative bias a scalar per distance bucket to its logits
(`layers.relative`); with them `PositionalEmbedding` embeds the tokens alone.
"""

import math

import keras
from keras import ops

from keras_transformer.constants import PAD_ID
from keras_transformer.errors import ArgumentError
from keras_transformer.validation import (
    check_choice,
    check_positive_int,
    check_rate,
    check_token_ids,
    check_token_ids_shape,
)

LAYOUTS = ("interleaved", "concatenated")
POSITIONS = ("sinusoidal", "learned", "rotary", "relative", "relative_bias")
# `"rotary"`, `"relative"` and `"relative_bias"` enter attention (`attention.ATTENTION_POSITIONS`)
TABLE_POSITIONS = ("sinusoidal", "learned")  # the schemes that add a table to the embeddings
ADD_POSITIONS = ("input", "every_layer", "queries_and_keys")


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


def check_positions(positions, max_positions, add_positions="input"):
    """A `ValueError` unless the position options go together: `positions` is a scheme of
    `POSITIONS`; `max_positions`, the learned table's rows, is given with `"learned"` and
    only then; and `add_positions` is `"input"` or, for a scheme with a table,
    `"every_layer"` or `"queries_and_keys"`."""
    check_choice("positions", positions, POSITIONS)
    check_choice("add_positions", add_positions, ADD_POSITIONS)
    if (positions == "learned") != (max_positions is not None):
        raise ArgumentError(
            "`max_positions` sizes the learned position table: give it with "
            '`positions="learned"` and only then. '
            f"Received: positions={positions!r}, max_positions={max_positions!r}"
        )
    if add_positions != "input" and positions not in TABLE_POSITIONS:
        raise ArgumentError(
            f"`add_positions` places a table of positions; positions={positions!r} has "
            "none and enters every layer's attention already. "
            f"Received: add_positions={add_positions!r}"
        )


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


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEmbedding(keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model), plus positional encoding, then dropout.

    x = Dropout(Embedding(ids) * sqrt(d_model) + PE)  (§3.4, §3.5, §5.4)

    PE is the paper's sinusoidal table (`PositionalEncoding`) or, with
    `positions="learned"`, a trained table of `max_positions` rows
    (`LearnedPositionalEncoding`). With `positions="rotary"`, `"relative"` or
    `"relative_bias"` there is no PE: the positions enter attention instead, and
    `position_encoding` is None.

    Token id 0 is padding: the layer's output carries the Keras mask
    `token_ids != 0` (True = real token), which attention layers downstream
    pick up without the user passing it.

    Args:
        vocab_size: number of token ids V.
        d_model: embedding size D (even for the sinusoidal table).
        dropout_rate: dropout on the sum. Defaults to 0.
        layout: positional-encoding layout, `"interleaved"` (paper, default)
            or `"concatenated"` (TF tutorial).
        max_wavelength: the 10000 of the positional-encoding formula.
        embeddings_initializer: defaults to a normal with stddev
            d_model^-0.5, so the scaled embeddings have unit variance like the
            positional encoding.
        positions: `"sinusoidal"` (the paper's table, default), `"learned"`
            (a trained table), or `"rotary"`, `"relative"` or
            `"relative_bias"` (no table; positions enter attention).
        max_positions: rows of the learned table, the longest sequence the
            layer reads; required with `positions="learned"`, None otherwise.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        token_ids: integer tensor `(B, L)`.
        start_index: position of the first token (for step-by-step decoding).
        training: whether dropout is active.
        add_positions: whether to add PE. Defaults to True; a stack that
            adds the table elsewhere (to attention's queries and keys) passes
            False.
        zero_start: whether the token at position 0 embeds as a zero vector
            (PE is still added), as Marian's decoder starts. Defaults to False.

    Returns:
        `(B, L, D)` with Keras mask `(B, L)`.

    Raises:
        ValueError: on non-positive sizes, an odd `d_model` with the
            sinusoidal table, a bad rate, layout or `positions`, a learned
            table without `max_positions`, or token ids that are not an
            integer `(B, L)` tensor.

    Examples:
        ```python
        embed = PositionalEmbedding(vocab_size=1000, d_model=64)
        x = embed(np.array([[5, 8, 2, 0, 0]]))  # (1, 5, 64), x._keras_mask (1, 5)
        learned = PositionalEmbedding(1000, 64, positions="learned", max_positions=256)
        ```
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        dropout_rate: float = 0.0,
        layout: str = "interleaved",
        max_wavelength: int = 10000,
        embeddings_initializer: str | keras.initializers.Initializer | None = None,
        positions: str = "sinusoidal",
        max_positions: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("d_model", d_model)
        check_positions(positions, max_positions)
        if positions == "sinusoidal" and d_model % 2:
            raise ArgumentError(
                f"`d_model` must be even for the sinusoidal positional encoding. "
                f"Received: d_model={d_model}"
            )
        check_rate("dropout_rate", dropout_rate)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.dropout_rate = dropout_rate
        self.layout = layout
        self.max_wavelength = max_wavelength
        self.positions = positions
        self.max_positions = max_positions
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.RandomNormal(stddev=d_model**-0.5)
        )
        self.token_embedding = keras.layers.Embedding(
            vocab_size,
            d_model,
            embeddings_initializer=self.embeddings_initializer,
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.position_encoding = None  # rotary and relative positions have no table
        if positions == "learned":
            self.position_encoding = LearnedPositionalEncoding(
                max_positions, dtype=self.dtype_policy, name="position_encoding"
            )
        elif positions == "sinusoidal":
            self.position_encoding = PositionalEncoding(
                layout=layout,
                max_wavelength=max_wavelength,
                dtype=self.dtype_policy,
                name="position_encoding",
            )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")

    def build(self, token_ids_shape):
        check_token_ids_shape("token_ids", token_ids_shape)
        self.token_embedding.build(token_ids_shape)
        if self.position_encoding is not None:
            self.position_encoding.build((*token_ids_shape, self.d_model))
        self.dropout.build(None)

    def call(self, token_ids, start_index=0, training=None, add_positions=True, zero_start=False):
        check_token_ids("token_ids", token_ids)
        x = self.token_embedding(token_ids)  # (B, L, D)
        x = x * ops.cast(math.sqrt(self.d_model), x.dtype)
        if zero_start:  # position 0 embeds as zeros, whatever its token
            position = ops.arange(ops.shape(token_ids)[1]) + start_index  # (L,)
            x = x * ops.cast(position > 0, x.dtype)[None, :, None]
        if self.position_encoding is not None and add_positions:
            x = self.position_encoding(x, start_index=start_index)
        return self.dropout(x, training=training)

    def compute_mask(self, token_ids, mask=None):
        return ops.not_equal(token_ids, PAD_ID)  # (B, L)

    def compute_output_shape(self, token_ids_shape):
        return (*token_ids_shape, self.d_model)

    def get_config(self):
        config = {
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "dropout_rate": self.dropout_rate,
            "layout": self.layout,
            "max_wavelength": self.max_wavelength,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "positions": self.positions,
            "max_positions": self.max_positions,
        }
        return {**super().get_config(), **config}
