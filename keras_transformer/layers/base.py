"""What the encoder and decoder share: layer arguments and the stack around them."""

import inspect
from collections.abc import Callable

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import positions as position_schemes
from keras_transformer.layers.activations import get_activation, serialize_activation
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.embedding import PositionalEmbedding
from keras_transformer.layers.feed_forward import FeedForward
from keras_transformer.validation import check_positive_int, check_rate


def arguments_of(obj, cls, exclude=()):
    """`{name: obj.name}` for each named argument of `cls.__init__`, but `exclude`.

    The layers keep each constructor argument as an attribute of the same
    name, so this gives the arguments to pass on to a sublayer of class `cls`,
    or to return from `get_config` with `cls=type(obj)`.
    """
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {
        p.name: getattr(obj, p.name)
        for p in parameters
        if p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self" and p.name not in exclude
    }


def serialized_arguments(obj, cls, exclude=()):
    """`arguments_of`, with the activation (a name or a registered callable) and the
    position scheme serialized."""
    arguments = arguments_of(obj, cls, exclude)
    arguments["activation"] = serialize_activation(arguments["activation"])
    arguments["positions"] = position_schemes.serialize(arguments["positions"])
    return arguments


class TransformerBlock(position_schemes.PositionsFromConfig, keras.layers.Layer):
    """Base of `EncoderLayer` and `DecoderLayer`: arguments and shared sublayers.

    Creates the feed-forward sublayer, its layer norm and the residual dropout,
    and for each name in the subclass's `attention_sublayers` a `MultiHeadAttention`
    of that name with its layer norm (`self.self_attention`,
    `self.self_attention_norm`, ...).

    Args:
        d_model: model width D.
        num_heads: attention heads H; must divide `d_model`.
        dff: inner size of the feed-forward network.
        dropout_rate: dropout on each sublayer's output before the residual
            add. Defaults to 0.1 (the paper's P_drop).
        attention_dropout_rate: dropout on the attention weights. Defaults to
            0 (the paper drops only sublayer outputs and embeddings).
        norm_first: pre-LN instead of post-LN (the paper). Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward network. Defaults to relu.
        positions: the stack's position scheme (`layers.positions`) or its
            shorthand; the block gives those that act in attention to its
            self-attention. Defaults to `"sinusoidal"`, a table added outside
            the block.
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

    attention_sublayers = ()

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dff: int,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
        norm_first: bool = False,
        layer_norm_epsilon: float = 1e-6,
        activation: str | Callable = "relu",
        positions: position_schemes.PositionScheme | str = "sinusoidal",
        **kwargs,
    ):
        positions = position_schemes.from_arguments(positions, kwargs, type(self).__name__)
        super().__init__(**kwargs)
        check_rate("dropout_rate", dropout_rate)
        check_rate("attention_dropout_rate", attention_dropout_rate)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = get_activation(activation)
        self.positions = positions
        self.feed_forward = FeedForward(
            d_model, dff, self.activation, dtype=self.dtype_policy, name="feed_forward"
        )
        self.feed_forward_norm = self._norm("feed_forward_norm")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")
        for name in self.attention_sublayers:
            setattr(self, name, self._attention(name))
            setattr(self, f"{name}_norm", self._norm(f"{name}_norm"))
        self.supports_masking = True

    def _attention(self, name):
        in_attention = name == "self_attention" and self.positions.in_attention
        return MultiHeadAttention(
            self.d_model,
            self.num_heads,
            dropout_rate=self.attention_dropout_rate,
            positions=self.positions if in_attention else None,
            dtype=self.dtype_policy,
            name=name,
        )

    def _norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _self_attention_inputs(self, y, query_key_positions):
        """`(query, value, key)` of self-attention over `y` `(B, L, D)`: the position rows
        `(1, L, D)`, if given, added to the query and the key, never to the value."""
        if query_key_positions is None:
            return y, y, None
        placed = y + ops.cast(query_key_positions, y.dtype)
        return placed, y, placed

    def _build_feed_forward(self, inputs_shape):
        self.feed_forward.build(inputs_shape)
        self.feed_forward_norm.build(inputs_shape)
        self.dropout.build(None)

    def get_config(self):
        return {**super().get_config(), **serialized_arguments(self, TransformerBlock)}


class TransformerStack(position_schemes.PositionsFromConfig, keras.layers.Layer):
    """Base of `Encoder` and `Decoder`: positional embedding + N blocks.

    With `norm_first=True` a final layer norm follows the stack, as pre-LN
    Transformers need.

    Args:
        num_layers: number of layers N.
        d_model: model width D.
        num_heads: attention heads H.
        dff: inner size of the feed-forward networks.
        vocab_size: number of token ids of this side.
        dropout_rate: dropout on embeddings and sublayer outputs. Defaults
            to 0.1.
        attention_dropout_rate: dropout on attention weights. Defaults to 0.
        norm_first: pre-LN instead of post-LN. Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward networks.
        embedding: optional `PositionalEmbedding` to use instead of a new
            one, so that two stacks share it (`Transformer` does this with
            `shared_embeddings="all"`). It is not part of `get_config`.
        positions: the position scheme (`layers.positions`) or its shorthand:
            `Sinusoidal()` (`"sinusoidal"`, the paper's table, default),
            `Learned(n)` (a trained table of n rows), `Rotary()`,
            `ShawRelative(k)`, `T5Bias()` or `ALiBi()` (no table; every
            self-attention places the tokens). A table's `placement` says
            where it enters: `"input"` (the embeddings, as in the paper),
            `"every_layer"` (the embeddings and the input of every further
            layer, with no dropout there), or `"queries_and_keys"` (not the
            embeddings: the inputs of every self-attention's queries and
            keys, never its values, so positions steer where attention looks
            without entering what it reads).
        start_from_zero_embedding: whether position 0 embeds as a zero vector
            instead of its token's embedding (positions are still added), as
            the decoders of Marian's models start. Defaults to False.
        **kwargs: base layer arguments (`name`, `dtype`, ...).
    """

    block_class = None

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        dff: int,
        vocab_size: int,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
        norm_first: bool = False,
        layer_norm_epsilon: float = 1e-6,
        activation: str | Callable = "relu",
        embedding: PositionalEmbedding | None = None,
        positions: position_schemes.PositionScheme | str = "sinusoidal",
        start_from_zero_embedding: bool = False,
        **kwargs,
    ):
        positions = position_schemes.from_arguments(positions, kwargs, type(self).__name__)
        super().__init__(**kwargs)
        check_positive_int("num_layers", num_layers)
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.vocab_size = vocab_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = get_activation(activation)
        self.positions = positions
        self.start_from_zero_embedding = start_from_zero_embedding
        if embedding is None:
            embedding = PositionalEmbedding(
                vocab_size,
                d_model,
                dropout_rate=dropout_rate,
                positions=positions,
                dtype=self.dtype_policy,
                name="embedding",
            )
        elif (embedding.vocab_size, embedding.d_model, embedding.positions) != (
            vocab_size,
            d_model,
            positions,
        ):
            raise ArgumentError(
                "`embedding` must have this stack's vocab_size, d_model and positions. "
                f"Received: embedding with vocab_size={embedding.vocab_size}, "
                f"d_model={embedding.d_model}, positions={embedding.positions!r} for "
                f"vocab_size={vocab_size}, d_model={d_model}, positions={positions!r}"
            )
        self.embedding = embedding
        self.blocks = [
            self.block_class(
                **arguments_of(self, TransformerBlock), dtype=self.dtype_policy, name=f"layer_{i}"
            )
            for i in range(num_layers)
        ]
        self.final_norm = None
        if norm_first:
            self.final_norm = keras.layers.LayerNormalization(
                epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="final_norm"
            )

    def _build_embedding_and_norm(self, token_ids_shape):
        self.embedding.build(token_ids_shape)  # a shared one keeps its weights (Keras)
        hidden_shape = (*token_ids_shape, self.d_model)
        if self.final_norm is not None:
            self.final_norm.build(hidden_shape)
        return hidden_shape

    def _embed(self, token_ids, start_index=0, training=None):
        """The embedded tokens `(B, L, D)`, and the position rows `(1, L, D)` that every
        self-attention adds to its queries and keys (None unless they go there)."""
        to_attention = self.positions.placement == "queries_and_keys"
        x = self.embedding(
            token_ids,
            start_index=start_index,
            training=training,
            add_positions=not to_attention,
            zero_start=self.start_from_zero_embedding,
        )  # (B, L, D)
        if not to_attention:
            return x, None
        rows = self.embedding.position_encoding(ops.zeros_like(x[:1]), start_index=start_index)
        return x, rows  # (1, L, D)

    def _layer_input(self, x, index, start_index=0):
        """What block `index` reads: `x`, plus the positions from the second block on
        where they enter every layer."""
        if index == 0 or self.positions.placement != "every_layer":
            return x
        return self.embedding.position_encoding(x, start_index=start_index)  # (B, L, D)

    def _final(self, x):
        return x if self.final_norm is None else self.final_norm(x)

    def compute_mask(self, token_ids, *args, **kwargs):
        return self.embedding.compute_mask(token_ids)

    def get_config(self):
        arguments = serialized_arguments(self, TransformerStack, exclude=("embedding",))
        return {**super().get_config(), **arguments}
