"""The decoder layer and the decoder stack (Vaswani et al., 2017, §3.1)."""

import keras
from keras import ops

from keras_transformer.errors import ArgumentError
from keras_transformer.layers import cache as cache_layout
from keras_transformer.layers.base import TransformerBlock, TransformerStack
from keras_transformer.layers.residual import residual, sublayer_input
from keras_transformer.validation import check_token_ids


@keras.saving.register_keras_serializable(package="keras_transformer")
class DecoderLayer(TransformerBlock):
    """Causal self-attention, cross-attention to the encoder, feed-forward.

    Each of the three is a residual sublayer: post-LN (the paper, default)
    x = LayerNorm(x + Dropout(Sublayer(x))); pre-LN (`norm_first=True`)
    x = x + Dropout(Sublayer(LayerNorm(x))). Position t of the target attends
    only to positions 0..t (look-ahead mask AND target padding mask) and to
    every real position of the context (context padding mask).

    Args:
        d_model: model width D.
        num_heads: attention heads H; must divide `d_model`.
        dff: inner size of the feed-forward network.
        dropout_rate: dropout on each sublayer's output before the residual
            add. Defaults to 0.1 (the paper's P_drop).
        attention_dropout_rate: dropout on the attention weights. Defaults
            to 0.
        norm_first: pre-LN instead of post-LN. Defaults to False.
        layer_norm_epsilon: epsilon of the layer norms. Defaults to 1e-6.
        activation: activation of the feed-forward network. Defaults to relu.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: target sequence `(B, T, D)`.
        context: encoder output `(B, S, D)`.
        inputs_mask: optional boolean `(B, T)`, True at real target tokens;
            taken from the inputs' Keras mask when not given.
        context_mask: optional boolean `(B, S)`, True at real source tokens;
            taken from the context's Keras mask when not given.
        training: whether dropout is active.
        return_attention_scores: whether to also return the attention weights.
        query_key_positions: optional `(1, T, D)`, position rows added to the
            queries' and keys' input of self-attention, not the values'.

    Returns:
        `(B, T, D)` carrying the inputs' Keras mask; with
        `return_attention_scores=True`, also a dict with `"self_attention"`
        `(B, H, T, T)` and `"cross_attention"` `(B, H, T, S)`.

    Raises:
        ValueError: on non-positive sizes, `num_heads` not dividing
            `d_model`, or rates outside [0, 1).

    Examples:
        ```python
        layer = DecoderLayer(d_model=64, num_heads=4, dff=128)
        target = np.random.rand(2, 7, 64).astype("float32")
        memory = np.random.rand(2, 9, 64).astype("float32")
        layer(target, memory).shape  # (2, 7, 64)
        ```
    """

    attention_sublayers = ("self_attention", "cross_attention")

    def build(self, inputs_shape, context_shape):
        self.self_attention.build(inputs_shape, inputs_shape)
        self.self_attention_norm.build(inputs_shape)
        self.cross_attention.build(inputs_shape, context_shape)
        self.cross_attention_norm.build(inputs_shape)
        self._build_feed_forward(inputs_shape)

    def call(
        self,
        inputs,
        context,
        inputs_mask=None,
        context_mask=None,
        training=None,
        return_attention_scores=False,
        query_key_positions=None,
    ):
        def attend_to_target(y):  # causal self-attention over the target
            query, value, key = self._self_attention_inputs(y, query_key_positions)
            return self.self_attention(
                query,
                value,
                key=key,
                value_mask=inputs_mask,
                use_causal_mask=True,
                return_attention_scores=True,
                training=training,
            )  # (B, T, D), (B, H, T, T)

        def attend_to_context(y):  # target queries, encoder keys and values
            return self.cross_attention(
                y, context, value_mask=context_mask, return_attention_scores=True, training=training
            )  # (B, T, D), (B, H, T, S)

        x, self_scores, cross_scores = self._sublayers(
            inputs, attend_to_target, attend_to_context, training
        )
        if return_attention_scores:
            return x, {"self_attention": self_scores, "cross_attention": cross_scores}
        return x

    def call_with_cache(
        self,
        inputs,
        step,
        self_cache,
        cross_cache,
        context_mask=None,
        self_mask=None,
        query_key_positions=None,
        hypotheses=None,
    ):
        """Decodes one position from cached keys and values, as `call` would.

        The caches have B rows and `inputs` B * k: k hypotheses per row
        (see `MultiHeadAttention.call_with_cache`).

        Args:
            inputs: `(B * k, 1, D)`, the target position `step`.
            step: scalar int, the position being decoded.
            self_cache: pair `(keys, values)` of self-attention, each
                `(B, H, L * k, K)`; positions 0..step-1 filled by earlier steps.
            cross_cache: pair `(keys, values)` of cross-attention, each
                `(B, H, S, K)`, from `cross_attention.project_key_value`.
            context_mask: optional boolean `(B, S)`, True at real source tokens.
            self_mask: optional boolean `(B, 1, k, L * k)`, which self-attention
                entries each hypothesis sees (`cache.lineage_mask`); without
                it, positions 0..step of its own slot.
            query_key_positions: optional `(1, 1, D)`, the position row of
                `step` for self-attention's query and key.
            hypotheses: optional int, k where it is known when tracing
                (see `MultiHeadAttention.call_with_cache`).

        Returns:
            `(outputs (B * k, 1, D), self_cache, cross_attention)`: the cache
            with position `step` written, and the cross-attention weights
            `(B * k, H, 1, S)`.
        """

        def attend_to_target(y):  # to the cache up to `step`, which `y` is written into
            query, value, _ = self._self_attention_inputs(y, query_key_positions)
            return self.self_attention.call_with_cache(
                query,
                self_cache,
                step=step,
                attention_mask=self_mask,
                value=value,
                hypotheses=hypotheses,
            )

        def attend_to_context(y):  # to the encoder's cached keys and values
            y, _, scores = self.cross_attention.call_with_cache(
                y,
                cross_cache,
                value_mask=context_mask,
                return_attention_scores=True,
                hypotheses=hypotheses,
            )
            return y, scores

        return self._sublayers(inputs, attend_to_target, attend_to_context, False)

    def _sublayers(self, inputs, attend_to_target, attend_to_context, training):
        """The three residual sublayers around two attention functions.

        `call` and `call_with_cache` differ only in how they attend; each
        attention function maps the sublayer's input `(B, T, D)` to
        `(outputs (B, T, D), extra)`, and the two extras are returned.
        """
        y = sublayer_input(inputs, self.self_attention_norm, self.norm_first)
        y, self_extra = attend_to_target(y)
        x = residual(inputs, y, self.dropout, self.self_attention_norm, self.norm_first, training)
        y = sublayer_input(x, self.cross_attention_norm, self.norm_first)
        y, cross_extra = attend_to_context(y)
        x = residual(x, y, self.dropout, self.cross_attention_norm, self.norm_first, training)
        y = sublayer_input(x, self.feed_forward_norm, self.norm_first)
        y = self.feed_forward(y)  # (B, T, D)
        x = residual(x, y, self.dropout, self.feed_forward_norm, self.norm_first, training)
        return x, self_extra, cross_extra


@keras.saving.register_keras_serializable(package="keras_transformer")
class Decoder(TransformerStack):
    """Positional embedding followed by N decoder layers.

    With `norm_first=True` a final layer norm follows the stack, as pre-LN
    Transformers need.

    Args:
        num_layers: number of decoder layers N.
        d_model: model width D.
        num_heads: attention heads H.
        dff: inner size of the feed-forward networks.
        vocab_size: number of target token ids.
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
        start_from_zero_embedding: whether position 0 embeds as a zero vector
            instead of its token's embedding (BOS), as Marian's decoder starts
            (positions are still added). Defaults to False.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        token_ids: integer `(B, T)`, 0 = padding.
        context: encoder output `(B, S, D)`.
        context_mask: optional boolean `(B, S)`, True at real source tokens;
            taken from the context's Keras mask when not given.
        training: whether dropout is active.
        return_attention_scores: whether to also return, per layer, the
            dict of attention weights that `DecoderLayer` returns.

    Returns:
        `(B, T, D)` carrying the Keras mask `token_ids != 0`; with
        `return_attention_scores=True`, also a list of N dicts.

    Raises:
        ValueError: on bad sizes or rates, or token ids that are not an
            integer `(B, T)` tensor.

    Examples:
        ```python
        decoder = Decoder(num_layers=2, d_model=64, num_heads=4, dff=128,
                          vocab_size=1000)
        memory = np.random.rand(1, 4, 64).astype("float32")
        decoder(np.array([[1, 7, 5]]), memory).shape  # (1, 3, 64)
        ```
    """

    block_class = DecoderLayer

    def build(self, token_ids_shape, context_shape):
        hidden_shape = self._build_embedding_and_norm(token_ids_shape)
        for block in self.blocks:
            block.build(hidden_shape, context_shape)

    def call(
        self,
        token_ids,
        context,
        context_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        check_token_ids("token_ids", token_ids)
        mask = self.embedding.compute_mask(token_ids)  # (B, T)
        x, rows = self._embed(token_ids, training=training)  # (B, T, D), None or (1, T, D)
        scores = []
        for index, block in enumerate(self.blocks):
            x, block_scores = block(
                self._layer_input(x, index),
                context,
                inputs_mask=mask,
                context_mask=context_mask,
                training=training,
                return_attention_scores=True,
                query_key_positions=rows,
            )  # (B, T, D)
            scores.append(block_scores)
        x = self._final(x)
        return (x, scores) if return_attention_scores else x

    def self_cache(self, batch_size, max_length, beam_size=1):
        """The empty self-attention cache of `beam_size` hypotheses per row.

        Args:
            batch_size: rows B (sentences).
            max_length: positions L each hypothesis can decode.
            beam_size: hypotheses per row, k, sharing the row (`layers.cache`).

        Returns:
            A `cache.SelfAttentionCache`: per layer an all-zero pair
            `(keys, values)`, each `(B, H, L * k, K)`, and a zero lineage
            `(B, k, L)`.
        """
        return cache_layout.empty_cache(
            batch_size,
            self.num_layers,
            self.num_heads,
            self.d_model // self.num_heads,
            max_length,
            beam_size,
            self.compute_dtype,
        )

    def cross_cache(self, context):
        """Per layer the cross-attention pair `(keys, values)` of `context`, each `(B, H, S, K)`."""
        return [block.cross_attention.project_key_value(context) for block in self.blocks]

    def call_with_cache(
        self, token_ids, step, self_cache, cross_cache, context_mask=None, attention_layer=None
    ):
        """Decodes position `step` from the token at that position and the caches.

        Gives the same output as `call` on the whole prefix, at position `step`,
        with dropout off, for each of the k hypotheses of every cache row.

        Args:
            token_ids: integer `(B * k, 1)`, the token of each hypothesis at
                position `step`, sentence-major.
            step: scalar int.
            self_cache: a `cache.SelfAttentionCache` from `self_cache`,
                filled up to `step - 1`.
            cross_cache: the list from `cross_cache`.
            context_mask: optional boolean `(B, S)`, True at real source tokens.
            attention_layer: optional index of a layer (-1: the last) whose
                cross-attention weights, averaged over heads, to return.

        Returns:
            `(outputs (B * k, 1, D), self_cache, attention)`: the cache with
            position `step` written (in slot j for hypothesis j), and the
            weights `(B * k, S)` of `attention_layer`, or None without it.

        Examples:
            ```python
            self_cache = decoder.self_cache(batch_size=1, max_length=16)
            x, self_cache, _ = decoder.call_with_cache(
                np.array([[bos_id]]), 0, self_cache, decoder.cross_cache(memory))
            ```
        """
        x, rows = self._embed(token_ids, start_index=step, training=False)  # (B * k, 1, D)
        chosen = None
        if attention_layer is not None:
            if not -self.num_layers <= attention_layer < self.num_layers:
                raise ArgumentError(
                    f"`attention_layer` must index one of the {self.num_layers} decoder "
                    f"layers. Received: attention_layer={attention_layer}"
                )
            chosen = range(self.num_layers)[attention_layer]
        lineage = cache_layout.claim_position(self_cache.lineage, step)  # (B, k, L)
        self_mask = cache_layout.lineage_mask(lineage, step)  # (B, 1, k, L * k)
        layers, attention = [], None
        for index, (block, pair, cross_pair) in enumerate(
            zip(self.blocks, self_cache.layers, cross_cache, strict=True)
        ):
            x, pair, scores = block.call_with_cache(
                self._layer_input(x, index, step),
                step,
                pair,
                cross_pair,
                context_mask,
                self_mask,
                query_key_positions=rows,
                hypotheses=self_cache.lineage.shape[1],  # k, static in a search
            )  # scores (B * k, H, 1, S)
            if index == chosen:
                attention = ops.mean(scores[:, :, 0], axis=1)  # (B * k, S)
            layers.append(pair)
        self_cache = cache_layout.SelfAttentionCache(layers=layers, lineage=lineage)
        return self._final(x), self_cache, attention
