"""Multi-head attention (Vaswani et al., 2017, §3.2.2)."""

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import cache as cache_layout
from keras_transformer.layers import masks
from keras_transformer.layers import positions as position_schemes
from keras_transformer.layers.dot_product import scaled_dot_product_attention
from keras_transformer.validation import check_positive_int, check_rate


@keras.saving.register_keras_serializable(package="keras_transformer")
class MultiHeadAttention(position_schemes.PositionsFromConfig, keras.layers.Layer):
    """Multi-head attention with learned projections W_Q, W_K, W_V and W_O.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O, where
    head_i = Attention(Q W_Q_i, K W_K_i, V W_V_i) (Vaswani et al., 2017, §3.2.2).
    `h = num_heads` heads each of depth `d_k = d_model / num_heads`.

    The weights are those of `keras.layers.MultiHeadAttention` with
    `key_dim = d_model // num_heads`, reshaped: `query_kernel` `(D_q, D)` is
    Keras' `(D_q, H, K)` kernel flattened over its last two axes, and
    `output_kernel` `(D, D_out)` is Keras' `(H, K, D_out)`.

    Masks follow Keras: True = may attend. The Keras mask of `value` (and of
    `key`, if different) blocks padded keys; `attention_mask` and
    `use_causal_mask` add further blocks; all are combined with AND. Unlike
    `keras.layers.MultiHeadAttention`, the query's Keras mask does not block
    whole rows: padded query positions compute ordinary attention and are
    marked by the output mask (the query's mask), which the loss and later
    layers honour. An explicit `value_mask`/`key_mask` wins over the implicit
    Keras mask.

    Args:
        d_model: size D of the projected queries, keys and values (all heads
            together) and of the output unless `output_dim` is given.
        num_heads: number of heads H; must divide `d_model`.
        dropout_rate: dropout on the attention weights. Defaults to 0.
        use_bias: whether the projections have biases. Defaults to True.
        output_dim: size of the output; defaults to the query's last dim.
        kernel_initializer: initializer of the four kernels.
        bias_initializer: initializer of the four biases.
        positions: None (default: positions, if any, are in the inputs), or a
            position scheme that acts in attention (`layers.positions`), or
            its shorthand: `Rotary()` (`"rotary"`) rotates queries and keys,
            `ShawRelative(k)` (`"relative"`) adds a learned vector per clipped
            distance to keys and values, `T5Bias()` (`"relative_bias"`) a
            learned scalar per head and distance bucket to the logits
            (bidirectional buckets, or with `use_causal_mask` and in
            `call_with_cache` the decoder's unidirectional ones), `ALiBi()`
            (`"alibi"`) a fixed slope per head times the distance. Each way
            the logits see the distance between query and key. For
            self-attention, where query t and key t stand at the same position.
        **kwargs: base layer arguments (`name`, `dtype`, ...); the older
            `max_relative_position=k` still builds `ShawRelative(k)`, with a
            `DeprecationWarning`.

    Call arguments:
        query: `(B, T, D_q)`.
        value: `(B, S, D_v)`.
        key: optional `(B, S, D_k)`; defaults to `value`.
        value_mask, key_mask: optional boolean `(B, S)`, True at real
            keys; filled from the inputs' Keras masks. There is no
            `query_mask`: padded query rows are not blocked (see above).
        attention_mask: optional boolean `(T, S)`, `(B, T, S)` or a rank-4
            mask broadcastable to `(B, H, T, S)`; True = may attend.
        use_causal_mask: whether query t may only attend to keys 0..t.
        return_attention_scores: whether to also return the weights.
        training: whether dropout is active.

    Returns:
        `(B, T, D_out)`, or `((B, T, D_out), (B, H, T, S))` with
        `return_attention_scores=True`.

    Raises:
        ValueError: on non-positive sizes, `num_heads` not dividing `d_model`,
            a dropout rate outside [0, 1), inputs that are not rank 3, or an
            `attention_mask` that cannot broadcast.

    Examples:
        ```python
        mha = MultiHeadAttention(d_model=64, num_heads=8)
        x = np.random.rand(2, 10, 64).astype("float32")
        y, scores = mha(x, x, use_causal_mask=True, return_attention_scores=True)
        # y (2, 10, 64), scores (2, 8, 10, 10)
        ```
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout_rate: float = 0.0,
        use_bias: bool = True,
        output_dim: int | None = None,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        positions: position_schemes.PositionScheme | str | None = None,
        **kwargs,
    ):
        positions = position_schemes.from_arguments(positions, kwargs, "MultiHeadAttention")
        super().__init__(**kwargs)
        check_positive_int("d_model", d_model)
        check_positive_int("num_heads", num_heads)
        if d_model % num_heads:
            raise ArgumentError(
                "`num_heads` must divide `d_model`. "
                f"Received: d_model={d_model}, num_heads={num_heads}"
            )
        if positions is not None:
            if not positions.in_attention:
                raise ArgumentError(
                    f"positions={positions!r} adds a table to the inputs, not to attention; "
                    "give it to the embedding (`PositionalEmbedding`)."
                )
            positions.check(d_model, num_heads)
        check_rate("dropout_rate", dropout_rate)
        if output_dim is not None:
            check_positive_int("output_dim", output_dim)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout_rate = dropout_rate
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.positions = positions
        self.position_weights = ()
        self.depth = d_model // num_heads
        self.attention_dropout = keras.layers.Dropout(
            dropout_rate, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (
            ("query", query_shape),
            ("value", value_shape),
            ("key", key_shape),
        ):
            if len(shape) != 3 or shape[-1] is None:
                raise ArgumentError(
                    f"`{name}` must have rank 3, (batch, seq, features), with "
                    f"known features. Received: {name} with shape={tuple(shape)}"
                )
        out_dim = self.output_dim or query_shape[-1]
        self.query_kernel, self.query_bias = self._projection(
            "query", query_shape[-1], self.d_model
        )
        self.key_kernel, self.key_bias = self._projection("key", key_shape[-1], self.d_model)
        self.value_kernel, self.value_bias = self._projection(
            "value", value_shape[-1], self.d_model
        )
        self.output_kernel, self.output_bias = self._projection("output", self.d_model, out_dim)
        if self.positions is not None:
            self.position_weights = self.positions.attention_weights(self)
        self.attention_dropout.build(None)

    def _projection(self, name, input_dim, units):
        kernel = self.add_weight(
            name=f"{name}_kernel",
            shape=(input_dim, units),
            initializer=self.kernel_initializer,
        )
        bias = None
        if self.use_bias:
            bias = self.add_weight(
                name=f"{name}_bias", shape=(units,), initializer=self.bias_initializer
            )
        return kernel, bias

    def call(
        self,
        query,
        value,
        key=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        # 1. Project to queries, keys and values and split the heads.
        q = self._project(query, self.query_kernel, self.query_bias)
        k, v = self.project_key_value(value, key)
        q, k = self._rotated(q), self._rotated(k)
        # q (B, H, T, K); k, v (B, H, S, K)

        # 2. One boolean mask, broadcastable to (B, H, T, S).
        mask = self._attention_mask(
            q,
            k,
            value_mask,
            key_mask if key is not None else None,
            attention_mask,
            use_causal_mask,
        )

        # 3. Attention in every head, then concatenate the heads and apply W_O.
        positions = (ops.arange(ops.shape(q)[2]), ops.arange(ops.shape(k)[2]))
        outputs, scores = self._attend(
            q, k, v, mask, training, positions, bidirectional=not use_causal_mask
        )
        if return_attention_scores:
            return outputs, scores
        return outputs

    def project_key_value(self, value, key=None):
        """The keys and values that `call` would attend to, split into heads.

        Computed once per source sentence, they are the cross-attention cache
        of incremental decoding.

        Args:
            value: `(B, S, D_v)`.
            key: optional `(B, S, D_k)`; defaults to `value`.

        Returns:
            A pair `(keys, values)`, each `(B, H, S, K)`.
        """
        k = self._project(value if key is None else key, self.key_kernel, self.key_bias)
        v = self._project(value, self.value_kernel, self.value_bias)
        return k, v

    def call_with_cache(
        self,
        query,
        cache,
        step=None,
        value_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        value=None,
        hypotheses=None,
    ):
        """Attention of one decoding step to cached keys and values.

        The cache has B rows and the query B * k: k hypotheses per row (the
        beams of one sentence, rows of the query in sentence-major order;
        k = 1 for greedy decoding). The k queries of a row attend together,
        to one copy of its keys and values.

        Self-attention (`step` given): the keys and values of `query` are
        written into the cache at position `step`, one slot per hypothesis
        (`layers.cache`), and each query attends to the entries
        `attention_mask` allows; without it, to positions 0..step of its
        own slot (`cache.own_slot_mask`). Cross-attention
        (`step=None`): the queries attend to the cache as it is, e.g.
        `project_key_value(encoder_output)`.

        Args:
            query: `(B * k, 1, D_q)`, the position being decoded.
            cache: pair `(keys, values)`, each `(B, H, L, K)`; for
                self-attention L = max_length * k.
            step: scalar int, the position of `query`, or None.
            value_mask: optional boolean `(B, L)`, True at real keys.
            attention_mask: optional boolean `(B, 1, k, L)`, True where a
                hypothesis may attend (`cache.lineage_mask`).
            return_attention_scores: whether to also return the weights.
            value: optional `(B * k, 1, D_v)`, the input the new entry's value
                is projected from (its key is projected from `query`);
                defaults to `query`.
            hypotheses: optional int, k, where the caller knows it when it
                traces: the queries of a row then have a static shape, and one
                query a row attends through `layers.single_query`.

        Returns:
            `(outputs (B * k, 1, D_out), cache)`, the cache updated when
            `step` is given; with `return_attention_scores=True`, also the
            weights `(B * k, H, 1, L)`.

        Examples:
            ```python
            cache = (np.zeros((2, 8, 10, 8)), np.zeros((2, 8, 10, 8)))  # L = 10
            y, cache = mha.call_with_cache(x[:, :1], cache, step=0)
            ```
        """
        if self.positions is not None and step is None:
            raise ArgumentError(
                f"Attention with positions={self.positions.name!r} attends to its own "
                "sequence: `call_with_cache` needs the `step` being decoded."
            )
        keys, values = cache
        rows = ops.shape(keys)[0]
        q = self._project(query, self.query_kernel, self.query_bias)  # (B * k, H, 1, K)
        q = self._per_row(self._rotated(q, step), rows, hypotheses)  # (B, H, k, K)
        mask, positions = attention_mask, None
        if step is not None:
            k, v = self.project_key_value(query if value is None else value, key=query)
            k = self._per_row(self._rotated(k, step), rows, hypotheses)
            v = self._per_row(v, rows, hypotheses)
            keys, values = cache_layout.write(keys, values, k, v, step)
            beams = ops.shape(q)[2]
            if mask is None:  # (1, 1, k, L)
                mask = cache_layout.own_slot_mask(ops.shape(keys)[2], step, beams)
            positions = (  # the k queries all stand at `step`; entries at their positions
                ops.reshape(ops.cast(step, "int32"), (1,)),
                cache_layout.entry_positions(ops.shape(keys)[2], beams),
            )
        if value_mask is not None:
            mask = masks.merge_masks(mask, masks.key_mask_to_attention_mask(value_mask))
        outputs, scores = self._attend(q, keys, values, mask, False, positions, False)
        # outputs (B, k, D_out), scores (B, H, k, L)
        outputs = ops.reshape(outputs, (-1, 1, ops.shape(outputs)[-1]))  # (B * k, 1, D_out)
        if return_attention_scores:
            scores = ops.transpose(scores, (0, 2, 1, 3))  # (B, k, H, L)
            scores = ops.reshape(scores, (-1, self.num_heads, 1, ops.shape(scores)[-1]))
            return outputs, (keys, values), scores  # scores (B * k, H, 1, L)
        return outputs, (keys, values)

    def _rotated(self, x, start=0):
        """`x` `(B, H, L, K)` at positions `start..start + L - 1`, as the scheme compares
        them (rotated with rotary positions)."""
        return x if self.positions is None else self.positions.rotate(x, start)

    def _per_row(self, x, rows, hypotheses=None):
        """`(B * k, H, 1, K)` -> `(B, H, k, K)`: the k hypotheses of a row as its queries
        (k static where `hypotheses` gives it)."""
        x = ops.reshape(x, (rows, hypotheses or -1, self.num_heads, self.depth))  # (B, k, H, K)
        return ops.transpose(x, (0, 2, 1, 3))  # (B, H, k, K)

    def _attend(self, q, k, v, mask, training, positions=None, bidirectional=True):
        """Scaled dot-product attention per head, heads concatenated, then W_O.

        `positions`, a pair of integer `(T,)` (or `(1,)`: every query at one
        position) and `(S,)`, places queries and keys for the scheme's terms;
        `bidirectional` is False where a query sees only keys before it."""
        terms = {}
        if self.positions is not None:
            terms = self.positions.attention_terms(self.position_weights, *positions, bidirectional)
        attended, scores = scaled_dot_product_attention(
            q,
            k,
            v,
            mask,
            dropout=lambda w: self.attention_dropout(w, training=training),
            **terms,
        )  # (B, H, T, K), (B, H, T, S)
        attended = ops.transpose(attended, (0, 2, 1, 3))  # (B, T, H, K)
        batch, length = ops.shape(attended)[:2]
        rows = ops.reshape(attended, (-1, self.d_model))  # (B * T, D)
        outputs = self._dense(rows, self.output_kernel, self.output_bias)  # (B * T, D_out)
        return ops.reshape(outputs, (batch, length, outputs.shape[-1])), scores

    def _project(self, x, kernel, bias):
        """x W (+ b), split into heads: (B, L, D_in) -> (B, H, L, K)."""
        batch, length = ops.shape(x)[:2]
        rows = self._dense(ops.reshape(x, (-1, x.shape[-1])), kernel, bias)  # (B * L, D)
        heads = ops.reshape(rows, (batch, length, self.num_heads, self.depth))  # (B, L, H, K)
        return ops.transpose(heads, (0, 2, 1, 3))  # (B, H, L, K)

    def _dense(self, rows, kernel, bias):
        """rows W (+ b): (N, D_in) -> (N, D_out), one matrix product (see `over_rows`)."""
        y = ops.matmul(rows, ops.cast(kernel, rows.dtype))
        return y if bias is None else y + ops.cast(bias, rows.dtype)

    def _attention_mask(self, q, k, value_mask, key_mask, attention_mask, use_causal_mask):
        target_shape = (q.shape[0], self.num_heads, q.shape[2], k.shape[2])
        if attention_mask is not None:
            attention_mask = masks.as_attention_mask(
                attention_mask, target_shape, name="attention_mask"
            )
        causal = None
        if use_causal_mask:
            causal = masks.look_ahead_mask(ops.shape(q)[2])  # (T, T)
        return masks.merge_masks(
            None if value_mask is None else masks.key_mask_to_attention_mask(value_mask),
            None if key_mask is None else masks.key_mask_to_attention_mask(key_mask),
            attention_mask,
            causal,
        )

    def get_config(self):
        config = {
            "d_model": self.d_model,
            "num_heads": self.num_heads,
            "dropout_rate": self.dropout_rate,
            "use_bias": self.use_bias,
            "output_dim": self.output_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "positions": position_schemes.serialize(self.positions),
        }
        return {**super().get_config(), **config}
