"""Incremental decoding of the Transformer: the step interface the searches decode through.

`IncrementalDecoding` gives `Transformer` the methods of `models.step.StepModel`:
the encoder runs once per batch (`encode`), and each `decode_step` runs the
decoder on one target position against the self-attention cache of the
positions before it (`layers.cache`), giving the logits the full forward pass
gives at that position.
"""

from keras import ops

from keras_transformer.layers import cache as cache_layout
from keras_transformer.models.step import Step, StepModel

# The state's keys of a copy of the tied projection, transposed before a search's loop.
TRANSPOSED_OUTPUTS = ("one_row_output", "transposed_output")


class IncrementalDecoding(StepModel):
    """Mixin of `Transformer` (its `encoder`, `decoder`, `final_layer` and
    `output_logits`): the step interface, cached."""

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

    def one_row_projection(self, state):
        """The state with the tied pre-softmax projection transposed once, for XLA.

        XLA multiplies one row by the transposed embeddings inside a search's
        loop about 3x slower than by a transposed copy made before the loop,
        and several rows faster without the copy: `decode_step` then takes
        the copy for a single row (greedy search of one sentence) and the
        embeddings otherwise. As `transposed_projection` otherwise, under the
        key `"one_row_output"`.

        Examples:
            ```python
            state = model.one_row_projection(model.encode(source_ids[:1]))
            logits, cache, _ = model.decode_step(tokens[:1], 0, cache, state)  # (1, V)
            ```
        """
        if self.final_layer is not None:
            return state
        return {**state, "one_row_output": self.transposed_output()}

    def transposed_projection(self, state):
        """The state with the tied pre-softmax projection transposed once, for a graph
        without XLA.

        TensorFlow's graph multiplies rows by the embeddings transposed inside
        the loop more slowly than by a transposed copy made before it, for
        one row and for many: `decode_step` then takes the copy at every
        step. Without tied embeddings the state is unchanged. The logits are
        the same.

        Args:
            state: the dict from `encode`.

        Returns:
            The state, with tied embeddings also holding `"transposed_output"`,
            `(kernel (D, V), bias (V,))`.

        Examples:
            ```python
            state = model.transposed_projection(model.encode(source_ids))
            logits, cache, _ = model.decode_step(tokens, 0, cache, state)  # (B, V)
            ```
        """
        if self.final_layer is not None:
            return state
        return {**state, "transposed_output": self.transposed_output()}

    def transposed_output(self):
        """The tied pre-softmax projection as `(kernel (D, V), bias (V,))`: `output_logits(x)`
        is `x @ kernel + bias`. The kernel is in the compute dtype, cast once here rather
        than at every step under mixed precision."""
        embeddings = self.decoder.embedding.token_embedding.embeddings  # (V, D)
        return ops.transpose(ops.cast(embeddings, self.compute_dtype)), self.output_bias

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
        elif "transposed_output" in state:  # see `transposed_projection`
            kernel, bias = (ops.cast(w, x.dtype) for w in state["transposed_output"])
            logits = ops.matmul(x, kernel) + bias  # (B * k, D) x (D, V) + (V,)
        elif "one_row_output" in state:  # see `one_row_projection`
            rows = ops.shape(x)[0]
            kernel, bias = (ops.cast(w, x.dtype) for w in state["one_row_output"])  # (D, V), (V,)
            one_row = lambda: ops.matmul(x, kernel) + bias  # noqa: E731
            if isinstance(rows, int):
                logits = one_row() if rows == 1 else self.output_logits(x)
            else:
                logits = ops.cond(rows == 1, one_row, lambda: self.output_logits(x))
        else:
            logits = self.output_logits(x)  # (B * k, V)
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
        state = {k: v for k, v in state.items() if k not in TRANSPOSED_OUTPUTS}
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
