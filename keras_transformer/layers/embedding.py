"""Token embedding scaled by sqrt(d_model), plus the position scheme's table (§3.4, §3.5)."""

import math

import keras
from keras import ops

from keras_transformer.constants import PAD_ID
from keras_transformer.layers import positions as position_schemes
from keras_transformer.validation import (
    check_positive_int,
    check_rate,
    check_token_ids,
    check_token_ids_shape,
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionalEmbedding(position_schemes.PositionsFromConfig, keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model), plus positional encoding, then dropout.

    x = Dropout(Embedding(ids) * sqrt(d_model) + PE)  (§3.4, §3.5, §5.4)

    PE is the position scheme's table (`positions.Sinusoidal`, the paper's,
    or `positions.Learned`), kept as `position_encoding`; schemes that act
    in attention (rotary, relative, ALiBi) have none, and the layer embeds
    the tokens alone (`position_encoding` is None).

    Token id 0 is padding: the layer's output carries the Keras mask
    `token_ids != 0` (True = real token), which attention layers downstream
    pick up without the user passing it.

    Args:
        vocab_size: number of token ids V.
        d_model: embedding size D (even for the sinusoidal table).
        dropout_rate: dropout on the sum. Defaults to 0.
        embeddings_initializer: defaults to a normal with stddev
            d_model^-0.5, so the scaled embeddings have unit variance like the
            positional encoding.
        positions: a position scheme (`layers.positions`) or its shorthand.
            Defaults to `"sinusoidal"`, the paper's table.
        **kwargs: base layer arguments (`name`, `dtype`, ...); the older
            `layout=`, `max_wavelength=` and `max_positions=` still build the
            scheme, with a `DeprecationWarning`.

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
            sinusoidal table, a bad rate or scheme, or token ids that are not
            an integer `(B, L)` tensor.

    Examples:
        ```python
        embed = PositionalEmbedding(vocab_size=1000, d_model=64)
        x = embed(np.array([[5, 8, 2, 0, 0]]))  # (1, 5, 64), x._keras_mask (1, 5)
        learned = PositionalEmbedding(1000, 64, positions=positions.Learned(256))
        ```
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        dropout_rate: float = 0.0,
        embeddings_initializer: str | keras.initializers.Initializer | None = None,
        positions: position_schemes.PositionScheme | str = "sinusoidal",
        **kwargs,
    ):
        positions = position_schemes.from_arguments(positions, kwargs, "PositionalEmbedding")
        super().__init__(**kwargs)
        check_positive_int("vocab_size", vocab_size)
        check_positive_int("d_model", d_model)
        check_rate("dropout_rate", dropout_rate)
        positions.check(d_model)
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.dropout_rate = dropout_rate
        self.positions = positions
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
        self.position_encoding = positions.table(
            dtype=self.dtype_policy, name="position_encoding"
        )  # None for the schemes that act in attention
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
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "positions": position_schemes.serialize(self.positions),
        }
        return {**super().get_config(), **config}
