"""The encoder-decoder Transformer model (Vaswani et al., 2017, §3)."""

import warnings
from collections.abc import Callable

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import positions as position_schemes
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
        num_layers: layers N of the encoder and of the decoder, or a pair
            `(encoder_layers, decoder_layers)`. A deep encoder with a shallow
            decoder decodes faster for the same size (Kasai et al., 2021): the
            encoder runs once per sentence, the decoder once per output token.
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
        shared_embeddings: which weight matrices are one `(V, D)` matrix.
            None (default): the source embedding, the target embedding and
            the pre-softmax projection are separate. `"output"`: the target
            embedding is also the pre-softmax projection (transposed; the
            projection keeps its own bias). `"all"`: the source embedding
            too, as in the paper (§3.4); needs
            `input_vocab_size == target_vocab_size`, i.e. a shared vocabulary.
        positions: how the model tells where a token is, a position scheme
            of `layers.positions` or its shorthand: `Sinusoidal()` (the
            paper's fixed table, `"sinusoidal"`, default; its `layout` is
            `"interleaved"` as in the paper or `"concatenated"` as in the TF
            tutorial), `Learned(n)` (a trained table of n rows per side, the
            longest source or target the model reads), `Rotary()` (the
            queries and keys of every self-attention rotated by their
            positions), `ShawRelative(k)` (learned vectors per distance,
            clipped at k, added to the keys and values of every
            self-attention), `T5Bias()` (a learned scalar per head and
            distance bucket, added to the logits) or `ALiBi()` (a fixed
            slope per head times the distance, added to the logits). A
            table's `placement` says where it enters each stack: `"input"`
            (the embeddings), `"every_layer"` or `"queries_and_keys"`.
        start_from_zero_embedding: whether the decoder's first position
            embeds as a zero vector instead of BOS's embedding, as Marian's
            models (OPUS-MT) start. Defaults to False.
        **kwargs: base model arguments (`name`, `dtype`, ...). The older
            `num_encoder_layers=`, `num_decoder_layers=`, `max_positions=`,
            `add_positions=`, `max_relative_position=` and
            `positional_encoding_layout=` still work, with a
            `DeprecationWarning`; models saved with them load as they are.

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
        deep_shallow = Transformer(num_layers=(6, 1), d_model=64, num_heads=4, dff=128,
                                   input_vocab_size=1000, target_vocab_size=1200,
                                   positions=positions.Learned(256))
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
        shared_embeddings: str | None = None,
        positions: position_schemes.PositionScheme | str = "sinusoidal",
        start_from_zero_embedding: bool = False,
        **kwargs,
    ):
        num_layers = _layers_from_arguments(num_layers, kwargs)
        positions = position_schemes.from_arguments(positions, kwargs, "Transformer")
        super().__init__(**kwargs)
        encoder_layers, decoder_layers = _stack_depths(num_layers)
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
        self.num_layers = (
            encoder_layers if encoder_layers == decoder_layers else (encoder_layers, decoder_layers)
        )
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
        self.shared_embeddings = shared_embeddings
        self.positions = positions
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
            encoder_layers,
            vocab_size=input_vocab_size,
            name="encoder",
            **shared,
        )
        embedding = self.encoder.embedding if shared_embeddings == "all" else None
        self.decoder = Decoder(
            decoder_layers,
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

    @property
    def max_positions(self):
        """The longest source or target the model reads (its scheme's), or None."""
        return self.positions.max_positions

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
        return self.dtype_copy("float32")

    def dtype_copy(self, dtype):
        """This model under the dtype policy `dtype`, its weights cast to the policy's.

        `dtype_copy("bfloat16")` holds every weight in bfloat16 and computes in
        it (layer normalization and the softmax of attention widen to float32
        inside), so a decoding step reads half the bytes of weights; the
        searches still rank in float32 (`decode_step` widens the logits).

        Args:
            dtype: a Keras dtype policy name (`"float32"`, `"bfloat16"`,
                `"mixed_bfloat16"`, ...).

        Returns:
            A new built `Transformer`, or this model if its policy is `dtype`.

        Examples:
            ```python
            half = model.dtype_copy("bfloat16")
            ```
        """
        if self.dtype_policy.name == dtype:
            return self
        copy = type(self).from_config({**self.get_config(), "dtype": dtype})
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

    @classmethod
    def from_config(cls, config):
        config = position_schemes.upgrade_config(config)
        depths = [config.pop(name, None) for name in LEGACY_DEPTHS]
        if any(depth is not None for depth in depths):
            config["num_layers"] = _folded_depths(config["num_layers"], *depths)
        return super().from_config(config)


LEGACY_DEPTHS = ("num_encoder_layers", "num_decoder_layers")  # older arguments, now in `num_layers`


def _stack_depths(num_layers):
    """`(encoder_layers, decoder_layers)` of `num_layers`, an int or a pair; checked."""
    if isinstance(num_layers, int) and not isinstance(num_layers, bool):
        num_layers = (num_layers, num_layers)
    if not isinstance(num_layers, (tuple, list)) or len(num_layers) != 2:
        raise ArgumentError(
            "`num_layers` must be a positive integer or a pair (encoder_layers, "
            f"decoder_layers). Received: num_layers={num_layers!r}"
        )
    for depth in num_layers:
        check_positive_int("num_layers", depth)
    return tuple(num_layers)


def _folded_depths(num_layers, encoder_layers, decoder_layers):
    """The older three arguments as one pair; None means `num_layers`."""
    return _stack_depths(
        tuple(num_layers if depth is None else depth for depth in (encoder_layers, decoder_layers))
    )


def _layers_from_arguments(num_layers, arguments):
    """`num_layers` with the older `num_encoder_layers` / `num_decoder_layers` among
    `arguments` (popped) folded in, warning that they moved."""
    depths = [arguments.pop(name, None) for name in LEGACY_DEPTHS]
    if all(depth is None for depth in depths):
        return num_layers
    depths = _folded_depths(num_layers, *depths)
    warnings.warn(
        "Transformer's `num_encoder_layers` and `num_decoder_layers` are one argument now: "
        f"pass num_layers={depths!r} instead.",
        DeprecationWarning,
        stacklevel=3,
    )
    return depths
