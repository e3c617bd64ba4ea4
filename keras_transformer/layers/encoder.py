"""The encoder layer and the encoder stack (Vaswani et al., 2017, §3.1)."""

import keras

from keras_transformer.layers.base import TransformerBlock, TransformerStack
from keras_transformer.layers.residual import residual, sublayer_input
from keras_transformer.validation import check_token_ids


@keras.saving.register_keras_serializable(package="keras_transformer")
class EncoderLayer(TransformerBlock):
    """Self-attention then a feed-forward network, each a residual sublayer.

    Post-LN (the paper, default): x = LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (`norm_first=True`):   x = x + Dropout(Sublayer(LayerNorm(x))).

    Args:
        d_model: model width D.
        num_heads: attention heads H; must divide `d_model`.
        dff: inner size of the feed-forward network.
        dropout_rate: dropout on each sublayer's output before the residual
            add. Defaults to 0.1 (the paper's P_drop).
        attention_dropout_rate: dropout on the attention weights. Defaults to
            0 (the paper drops only sublayer outputs and embeddings).
        norm_first: pre-LN instead of post-LN. Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward network. Defaults to relu.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(B, S, D)`.
        mask: optional boolean `(B, S)`, True at real tokens (they may be
            attended to); taken from the inputs' Keras mask when not given
            (an explicit mask wins).
        training: whether dropout is active.
        query_key_positions: optional `(1, S, D)`, position rows added to
            the queries' and keys' input of self-attention, not the values'.

    Returns:
        `(B, S, D)`, carrying the input's Keras mask.

    Raises:
        ValueError: on non-positive sizes, `num_heads` not dividing
            `d_model`, or rates outside [0, 1).

    Examples:
        ```python
        layer = EncoderLayer(d_model=64, num_heads=4, dff=128)
        x = PositionalEmbedding(1000, 64)(np.array([[4, 9, 0]]))
        layer(x).shape  # (1, 3, 64); the padding mask flows in with x
        ```
    """

    attention_sublayers = ("self_attention",)

    def build(self, inputs_shape):
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm.build(inputs_shape)
        self._build_feed_forward(inputs_shape)

    def call(self, inputs, mask=None, training=None, query_key_positions=None):
        # 1. Self-attention; `mask` blocks attention to padding.
        y = sublayer_input(inputs, self.self_attention_norm, self.norm_first)
        query, value, key = self._self_attention_inputs(y, query_key_positions)
        y = self.self_attention(
            query, value, key=key, value_mask=mask, training=training
        )  # (B, S, D)
        x = residual(inputs, y, self.dropout, self.self_attention_norm, self.norm_first, training)
        # 2. Feed-forward.
        y = sublayer_input(x, self.feed_forward_norm, self.norm_first)
        y = self.feed_forward(y)  # (B, S, D)
        return residual(x, y, self.dropout, self.feed_forward_norm, self.norm_first, training)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape


@keras.saving.register_keras_serializable(package="keras_transformer")
class Encoder(TransformerStack):
    """Positional embedding followed by N encoder layers.

    With `norm_first=True` a final layer norm follows the stack, as pre-LN
    Transformers need.

    Args:
        num_layers: number of encoder layers N.
        d_model: model width D.
        num_heads: attention heads H.
        dff: inner size of the feed-forward networks.
        vocab_size: number of source token ids.
        dropout_rate: dropout on embeddings and sublayer outputs. Defaults
            to 0.1.
        attention_dropout_rate: dropout on attention weights. Defaults to 0.
        norm_first: pre-LN instead of post-LN. Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward networks.
        embedding: optional `PositionalEmbedding` to share with another
            stack instead of a new one (not part of `get_config`).
        positions: the position scheme (`layers.positions`) or its
            shorthand; defaults to `"sinusoidal"`, the paper's table.
        start_from_zero_embedding: whether position 0 embeds as a zero
            vector (a decoder's option, `TransformerStack`). Defaults to False.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        token_ids: integer `(B, S)`, 0 = padding.
        training: whether dropout is active.

    Returns:
        `(B, S, D)`, carrying the Keras mask `token_ids != 0`.

    Raises:
        ValueError: on bad sizes or rates, or token ids that are not an
            integer `(B, S)` tensor.

    Examples:
        ```python
        encoder = Encoder(num_layers=2, d_model=64, num_heads=4, dff=128,
                          vocab_size=1000)
        memory = encoder(np.array([[4, 9, 2, 0]]))  # (1, 4, 64)
        ```
    """

    block_class = EncoderLayer

    def build(self, token_ids_shape):
        hidden_shape = self._build_embedding_and_norm(token_ids_shape)
        for block in self.blocks:
            block.build(hidden_shape)

    def call(self, token_ids, training=None):
        check_token_ids("token_ids", token_ids)
        mask = self.embedding.compute_mask(token_ids)  # (B, S)
        x, rows = self._embed(token_ids, training=training)  # (B, S, D), None or (1, S, D)
        for index, block in enumerate(self.blocks):
            x = block(
                self._layer_input(x, index), mask=mask, training=training, query_key_positions=rows
            )  # (B, S, D)
        return self._final(x)

    def compute_output_shape(self, token_ids_shape):
        return (*token_ids_shape, self.d_model)
