"""The encoder-decoder Transformer model (Vaswani et al., 2017, §3)."""

from collections.abc import Callable

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import cache as cache_layout
from keras_transformer.layers.base import TransformerStack, arguments_of, serialized_arguments
from keras_transformer.layers.decoder import Decoder
from keras_transformer.layers.encoder import Encoder
from keras_transformer.models.step import Step, StepModel
from keras_transformer.models.train_step import PackedTraining
from keras_transformer.validation import check_positive_int, check_token_ids_shape

SHARED_EMBEDDINGS = (None, "output", "all")


@keras.saving.register_keras_serializable(package="keras_transformer")
class Transformer(PackedTraining, keras.Model, StepModel):
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
        activation: activation of the feed-forward networks. Defaults to relu.
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
            (the paper's fixed table, default) or `"learned"` (a trained
            table of `max_positions` rows per side).
        max_positions: rows of the learned table, the longest source or
            target the model reads; required with `positions="learned"`.
        add_positions: where the positions enter each stack: `"input"` (the
            embeddings, default) or `"every_layer"` (every layer's input too).
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
        self.activation = keras.activations.get(activation)
        self.positional_encoding_layout = positional_encoding_layout
        self.shared_embeddings = shared_embeddings
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.positions = positions
        self.max_positions = max_positions
        self.add_positions = add_positions
        shared = dict(
            arguments_of(self, TransformerStack, exclude=("num_layers", "vocab_size", "embedding")),
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
            return self.final_layer(x)
        embeddings = self.decoder.embedding.token_embedding.embeddings  # (V, D)
        logits = ops.matmul(x, ops.transpose(ops.cast(embeddings, x.dtype)))
        return logits + ops.cast(self.output_bias, x.dtype)

    # Incremental decoding: the step interface (`models.step.StepModel`) the
    # searches of `keras_transformer.inference` decode through.

    grows_cache = True
    restricts_vocabulary = True

    def encode(self, source_ids):
        """Runs the encoder once and prepares what every decoding step reads.

        Args:
            source_ids: integer `(B, S)`, 0-padded.

        Returns:
            The decoding state, a dict of tensors whose first axis is the
            batch: `"context_mask"` boolean `(B, S)`, True at real source
            tokens; `"cross"`, per decoder layer the cross-attention pair
            `(keys, values)`, each `(B, H, S, K)`.
        """
        if not self.built:
            self.build((tuple(source_ids.shape), (source_ids.shape[0], 1)))
        context = self.encoder(source_ids, training=False)  # (B, S, D)
        return {
            "context_mask": self.encoder.embedding.compute_mask(source_ids),
            "cross": self.decoder.cross_cache(context),
        }

    def initial_cache(self, state, max_length, beam_size=1):
        """The empty self-attention cache for `max_length` target positions.

        Args:
            state: the dict from `encode`, of B sentences.
            max_length: most target positions a search decodes.
            beam_size: hypotheses decoded per sentence, k: `decode_step`
                then takes B * k tokens, the k of each sentence together.

        Returns:
            An empty `layers.cache.SelfAttentionCache` (`Decoder.self_cache`).
        """
        batch = ops.shape(state["context_mask"])[0]
        return self.decoder.self_cache(batch, max_length, beam_size)

    def grow_cache(self, cache, max_length):
        """The cache with room for `max_length` positions, what it holds kept.

        A step attends over every entry of its cache, written or not (masked),
        so the searches start with a short cache and grow it as the output
        grows (`inference.loop.cache_lengths`).

        Args:
            cache: from `initial_cache` or `decode_step`.
            max_length: positions the grown cache holds, at least its own.

        Returns:
            The cache `initial_cache(state, max_length, k)` would give after
            the same steps (`layers.cache.grow`).

        Examples:
            ```python
            cache = model.initial_cache(state, max_length=16)
            # ... 16 calls of decode_step, then:
            cache = model.grow_cache(cache, max_length=32)
            ```
        """
        return cache_layout.grow(cache, max_length)

    def decode_step(self, token_ids, step, cache, state, attention_layer=None):
        """Next-token logits after the target token at position `step`.

        Gives the logits of the full forward pass at position `step` (dropout
        off) from one token per hypothesis and the cache.

        Args:
            token_ids: integer `(B * k,)`, the target tokens at position
                `step`: the k hypotheses of sentence 0, then of sentence 1, ...
            step: scalar int, the position being decoded.
            cache: from `initial_cache`, filled up to `step - 1` by earlier
                calls.
            state: the dict from `encode`.
            attention_layer: optional index of a decoder layer (-1: the last)
                whose cross-attention weights, averaged over heads, to return
                too (an alignment of this position to the source).

        Returns:
            A `Step`: logits `(B * k, V)` float32 (`(B * k, n)` under a
            `restrict_vocabulary` state), the cache with position `step`
            written, and with `attention_layer` the weights `(B * k, S)`
            float32 (else None).

        Examples:
            ```python
            state = model.encode(source_ids)
            cache = model.initial_cache(state, max_length=32)
            logits, cache, _ = model.decode_step(np.full([batch], bos_id), 0, cache, state)
            ```
        """
        x, cache, attention = self.decode_hidden(token_ids, step, cache, state, attention_layer)
        if "output" in state:  # from restrict_vocabulary: the listed pieces' rows alone
            kernel, bias = (ops.cast(w, x.dtype) for w in state["output"])  # (n, D), (n,)
            logits = ops.matmul(x, ops.transpose(kernel)) + bias  # (B * k, n)
        else:
            logits = self.output_logits(x[:, None])[:, 0]  # (B * k, V)
        return Step(ops.cast(logits, "float32"), cache, attention)

    def restrict_vocabulary(self, state, ids):
        """The state under which `decode_step` scores only the target pieces `ids`.

        Each step then projects onto the `n` listed rows of the pre-softmax
        projection instead of all `V` (a lexical shortlist's saving).

        Args:
            state: the dict from `encode`.
            ids: int `(n,)`, target pieces.

        Returns:
            The state with the projection's rows for `ids` (`output_weights`):
            `decode_step` then gives logits `(B * k, n)`, column j the logit
            of `ids[j]`.

        Examples:
            ```python
            state = model.restrict_vocabulary(model.encode(source_ids), ids)
            logits, cache, _ = model.decode_step(tokens, 0, cache, state)  # (B * k, n)
            ```
        """
        return {**state, "output": self.output_weights(ids)}

    def decode_hidden(self, token_ids, step, cache, state, attention_layer=None):
        """`decode_step` before the pre-softmax projection.

        Returns:
            `(x, cache, attention)`: the decoder's output `(B * k, D)` in the
            compute dtype, and the cache and attention of `decode_step`.
        """
        x, cache, attention = self.decoder.call_with_cache(
            token_ids[:, None],
            step,
            cache,
            state["cross"],
            state["context_mask"],
            attention_layer,
        )  # (B * k, 1, D)
        if attention is not None:
            attention = ops.cast(attention, "float32")
        return x[:, 0], cache, attention

    def output_weights(self, ids):
        """The pre-softmax projection's rows for target pieces `ids` `(n,)`.

        Returns:
            `(kernel (n, D), bias (n,))`: `output_logits(x)[..., ids]` is
            `x @ kernel.T + bias`.
        """
        if self.final_layer is not None:
            kernel = ops.transpose(ops.take(self.final_layer.kernel, ids, axis=1))
            return kernel, ops.take(self.final_layer.bias, ids)
        embeddings = self.decoder.embedding.token_embedding.embeddings  # (V, D)
        return ops.take(embeddings, ids, axis=0), ops.take(self.output_bias, ids)

    def reorder_cache(self, cache, beams):
        """The cache after beam search chose which hypotheses go on.

        Hypothesis j of sentence b continues the history of that sentence's
        hypothesis `beams[b, j]`. Only the lineage `(B, k, L)` is reordered:
        the keys and values stay where they were written, and each
        hypothesis reads its own through the lineage (`layers.cache`).

        Args:
            cache: from `initial_cache` or `decode_step`.
            beams: integer `(B, k)`, indices in [0, k).

        Returns:
            The reordered cache.

        Examples:
            ```python
            cache = model.initial_cache(state, max_length=32, beam_size=2)
            step = model.decode_step(np.full([2 * batch], bos_id), 0, cache, state)
            cache = model.reorder_cache(step.cache, np.zeros([batch, 2]))  # both from beam 0
            ```
        """
        return cache_layout.reorder(cache, beams)

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
