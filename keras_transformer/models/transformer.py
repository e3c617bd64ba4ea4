"""The encoder-decoder Transformer model (Vaswani et al., 2017, §3)."""

from collections.abc import Callable

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers.activations import get_activation
from keras_transformer.layers.base import TransformerStack, arguments_of, serialized_arguments
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.encoder import Encoder
from keras_transformer.layers.rows import over_rows
from keras_transformer.models.incremental import IncrementalDecoding
from keras_transformer.models.train_step import PackedTraining
from keras_transformer.validation import check_positive_int, check_token_ids_shape

SHARED_EMBEDDINGS = (None, "output", "all")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(PackedTraining, IncrementalDecoding, keras.Model):
    """Encoder-decoder Transformer that maps token ids to next-token logits.

    source ids -> Encoder -> memory; target ids + memory -> Decoder ->
    linear projection to target_vocab_size -> logits. Token id 0 is padding on both sides:
    padded source tokens are never attended to, and target position t sees
    only target positions 0..t. Trained with teacher forcing on
    `((source_ids, target_in_ids), target_out_ids)` where
    `target_in = [BOS] + y` and `target_out = y + [EOS]`.

    Args:
        num_layers: encoder and decoder layers N (each, unless one of the
            next two arguments sets a side's own).
        d_model: model width D.
        num_heads: attention heads H; must divide `d_model`.
        dff: inner size of the feed-forward networks.
        input_vocab_size: number of source token ids.
        target_vocab_size: number of target token ids V.
        dropout_rate: dropout on embeddings and sublayer outputs. Defaults to
            0.1 (the paper's P_drop).
        attention_dropout_rate: dropout on attention weights. Defaults to 0,
            as in the paper.
        norm_first: pre-LN instead of post-LN (the paper). Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward networks: a Keras name
            (`"relu"`, `"gelu"`, `"silu"`, ...), `"gelu_sigmoid"` (Marian's GELU,
            `layers.activations`) or a callable. Defaults to relu.
        positional_encoding_layout: `"interleaved"` (paper, default) or
            `"concatenated"` (TF tutorial).
        shared_embeddings: which weight matrices are one `(V, D)` matrix.
            None (default): the source embedding, the target embedding and
            the pre-softmax projection are separate. `"output"`: the target
            embedding is also the pre-softmax projection (transposed; the
            projection keeps its own bias). `"all"`: the source embedding
            too, as in the paper (§3.4); needs
            `input_vocab_size == target_vocab_size`, i.e. a shared vocabulary.
        num_encoder_layers: encoder layers, if not `num_layers`. Defaults to
            None.
        num_decoder_layers: decoder layers, if not `num_layers`. Defaults to
            None. A deep encoder with a shallow decoder decodes faster for
            the same size (Kasai et al., 2021): the encoder runs once per
            sentence, the decoder once per output token.
        positions: how the model tells where a token is: `"sinusoidal"`
            (the paper's fixed table, default), `"learned"` (a trained
            table per side), `"rotary"` (the queries and keys of every
            self-attention rotated by their positions), `"relative"` (Shaw
            et al.'s learned vectors per distance, added to the keys and
            values of every self-attention) or `"relative_bias"` (T5's
            learned scalar per head and distance bucket, added to the
            logits of every self-attention).
        max_positions: rows of the learned table, the longest source or
            target the model reads; required with `positions="learned"`.
        add_positions: where a table of positions enters each stack:
            `"input"` (the embeddings, default), `"every_layer"` (every
            layer's input too) or `"queries_and_keys"` (the query and key
            inputs of every self-attention, never the values); `"input"` for
            the schemes without a table.
        max_relative_position: the distance k beyond which relative
            positions are clipped (2k + 1 vectors of keys and of values per
            layer); required with `positions="relative"`.
        start_from_zero_embedding: whether the decoder's first position
            embeds as a zero vector instead of BOS's embedding, as Marian's
            models (OPUS-MT) start. Defaults to False.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: a pair `(source_ids, target_ids)` of integer tensors
            `(B, S)` and `(B, T)`.
        training: whether dropout is active.

    Returns:
        float32 logits `(B, T, V)` (no softmax: losses take `from_logits`).

    Raises:
        ValueError: on bad sizes or rates, an unknown `shared_embeddings`,
            `shared_embeddings="all"` with two vocabulary sizes, inputs that
            are not a pair, or token ids that are not integer rank-2 tensors.

    Examples:
        ```python
        model = Transformer(num_layers=2, d_model=64, num_heads=4, dff=128,
                            input_vocab_size=1000, target_vocab_size=1200)
        logits = model((np.array([[5, 6, 7, 0]]), np.array([[1, 9, 0]])))
        # logits (1, 3, 1200)
        deep_shallow = Transformer(num_layers=6, num_decoder_layers=1, d_model=64,
                                   num_heads=4, dff=128, input_vocab_size=1000,
                                   target_vocab_size=1200)  # 6 encoder layers, 1 decoder layer
        ```
    """

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        num_heads: int,
        dff: int,
        input_vocab_size: int,
        target_vocab_size: int,
        dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.0,
        norm_first: bool = False,
        layer_norm_epsilon: float = 1e-6,
        activation: str | Callable = "relu",
        positional_encoding_layout: str = "interleaved",
        shared_embeddings: str | None = None,
        num_encoder_layers: int | None = None,
        num_decoder_layers: int | None = None,
        positions: str = "sinusoidal",
        max_positions: int | None = None,
        add_positions: str = "input",
        max_relative_position: int | None = None,
        start_from_zero_embedding: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, depth in (
            ("num_encoder_layers", num_encoder_layers),
            ("num_decoder_layers", num_decoder_layers),
        ):
            if depth is not None:
                check_positive_int(name, depth)
        if shared_embeddings not in SHARED_EMBEDDINGS:
            raise ArgumentError(
                f"`shared_embeddings` must be one of {SHARED_EMBEDDINGS}. "
                f"Received: shared_embeddings={shared_embeddings!r}"
            )
        if shared_embeddings == "all" and input_vocab_size != target_vocab_size:
            raise ArgumentError(
                '`shared_embeddings="all"` needs one vocabulary for both sides. Received: '
                f"input_vocab_size={input_vocab_size}, target_vocab_size={target_vocab_size}"
            )
        self.num_layers = num_layers
        self.d_model = d_model
        self.num_heads = num_heads
        self.dff = dff
        self.input_vocab_size = input_vocab_size
        self.target_vocab_size = target_vocab_size
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.norm_first = norm_first
        self.layer_norm_epsilon = layer_norm_epsilon
        self.activation = get_activation(activation)
        self.positional_encoding_layout = positional_encoding_layout
        self.shared_embeddings = shared_embeddings
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.positions = positions
        self.max_positions = max_positions
        self.add_positions = add_positions
        self.max_relative_position = max_relative_position
        self.start_from_zero_embedding = start_from_zero_embedding
        shared = dict(
            arguments_of(
                self,
                TransformerStack,
                exclude=("num_layers", "vocab_size", "embedding", "start_from_zero_embedding"),
            ),
            dtype=self.dtype_policy,
        )
        self.encoder = Encoder(
            num_encoder_layers or num_layers,
            vocab_size=input_vocab_size,
            name="encoder",
            **shared,
        )
        embedding = self.encoder.embedding if shared_embeddings == "all" else None
        self.decoder = Decoder(
            num_decoder_layers or num_layers,
            vocab_size=target_vocab_size,
            embedding=embedding,
            start_from_zero_embedding=start_from_zero_embedding,
            name="decoder",
            **shared,
        )
        self.final_layer = None
        if shared_embeddings is None:
            self.final_layer = keras.layers.Dense(
                target_vocab_size, dtype=self.dtype_policy, name="logits"
            )

    def build(self, inputs_shape):
        source_shape, target_shape = self._split(inputs_shape, "inputs")
        check_token_ids_shape("source_ids", source_shape)
        check_token_ids_shape("target_ids", target_shape)
        self.encoder.build(source_shape)
        context_shape = (*source_shape, self.d_model)
        self.decoder.build(target_shape, context_shape)
        if self.final_layer is None:
            self.output_bias = self.add_weight(
                name="output_bias", shape=(self.target_vocab_size,), initializer="zeros"
            )
        else:
            self.final_layer.build((*target_shape, self.d_model))

    def call(self, inputs, training=None):
        x = self.hidden_states(inputs, training=training)  # (B, T, D)
        return ops.cast(self.output_logits(x), "float32")  # (B, T, V)

    def hidden_states(self, inputs, training=None):
        """The decoder's outputs, before the pre-softmax projection.

        Training takes the projection only at real target tokens
        (`models.train_step`).

        Args:
            inputs: a pair `(source_ids, target_ids)`, `(B, S)` and `(B, T)`.
            training: whether dropout is active.

        Returns:
            `(B, T, D)` in the compute dtype.

        Examples:
            ```python
            hidden = model.hidden_states((source_ids, target_ids))  # (B, T, D)
            logits = model.output_logits(tf.boolean_mask(hidden, target_ids != 0))  # (N, V)
            ```
        """
        source_ids, target_ids = self._split(inputs, "inputs")
        context = self.encoder(source_ids, training=training)  # (B, S, D)
        return self.decoder(target_ids, context, training=training)  # (B, T, D)

    def output_logits(self, x):
        """The pre-softmax projection: decoder outputs to next-token logits.

        Args:
            x: decoder outputs `(..., D)`, e.g. `(B, T, D)`.

        Returns:
            logits `(..., V)` in the compute dtype.
        """
        if self.final_layer is not None:
            return over_rows(self.final_layer, x)
        embeddings = self.decoder.embedding.token_embedding.embeddings  # (V, D)
        kernel = ops.transpose(ops.cast(embeddings, x.dtype))  # (D, V)
        bias = ops.cast(self.output_bias, x.dtype)
        return over_rows(lambda rows: ops.matmul(rows, kernel) + bias, x)

    def float32_copy(self):
        """This model under the float32 dtype policy, with the same weights.

        A model trained under mixed precision (`mixed_bfloat16`,
        `mixed_float16`) holds float32 weights but computes in half precision,
        and keeps that dtype policy when saved and loaded. Its copy decodes,
        and exports (a LiteRT model converts only from a float32 graph), in
        float32.

        Returns:
            A new built `Transformer`, or this model if it computes in float32.

        Examples:
            ```python
            model = keras.models.load_model("runs/x/model.keras").float32_copy()
            ```
        """
        if self.compute_dtype == "float32":
            return self
        copy = type(self).from_config({**self.get_config(), "dtype": "float32"})
        one = ops.ones((1, 2), "int32")
        copy((one, one))  # build the weights
        copy.set_weights(self.get_weights())
        return copy

    @staticmethod
    def _split(inputs, name):
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ArgumentError(
                f"`{name}` must be a pair (source_ids, target_ids). "
                f"Received: {name} of type {type(inputs).__name__}"
            )
        return tuple(inputs)

    def get_config(self):
        return {**super().get_config(), **serialized_arguments(self, Transformer)}
