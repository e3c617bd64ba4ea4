"""The same encoder-decoder built from keras-hub's layers, as a benchmark peer.

`keras_hub.layers.TokenAndPositionEmbedding` (mask_zero, so padding flows as
a Keras mask), N `TransformerEncoder` and N `TransformerDecoder` layers
(post-LN, relu, causal self-attention), and a Dense projection to the
vocabulary: the matrix products of `keras_transformer.Transformer` of the same
size, with learned instead of sinusoidal positions. Needs the `[bench]` extra
(`keras-hub`).
"""

import keras
import keras_hub


def kerashub_transformer(
    num_layers, d_model, num_heads, dff, input_vocab_size, target_vocab_size, length, dropout=0.1
):
    """A functional `keras.Model` `(source_ids, target_ids) -> logits (B, T, V)`.

    Args:
        num_layers: encoder and decoder layers each.
        d_model: model width.
        num_heads: attention heads.
        dff: feed-forward inner size.
        input_vocab_size, target_vocab_size: vocabularies; id 0 is padding.
        length: longest sequence (the learned position table's size).
        dropout: keras-hub's dropout rate (sublayer outputs and attention).
    """

    def embed(ids, vocab_size, name):  # token + learned position, then dropout
        embedding = keras_hub.layers.TokenAndPositionEmbedding(
            vocab_size, length, d_model, mask_zero=True, name=name
        )
        return keras.layers.Dropout(dropout)(embedding(ids))

    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    x = embed(source, input_vocab_size, "source_embedding")  # (B, S, D)
    for index in range(num_layers):
        x = keras_hub.layers.TransformerEncoder(
            dff, num_heads, dropout=dropout, name=f"encoder_{index}"
        )(x)  # (B, S, D)
    y = embed(target, target_vocab_size, "target_embedding")  # (B, T, D)
    for index in range(num_layers):
        y = keras_hub.layers.TransformerDecoder(
            dff, num_heads, dropout=dropout, name=f"decoder_{index}"
        )(y, x)  # (B, T, D)
    logits = keras.layers.Dense(target_vocab_size, name="logits")(y)  # (B, T, V)
    return keras.Model((source, target), logits, name="kerashub_transformer")


def kerashub_greedy(model, source_ids, new_tokens, bos_id, num_layers, num_heads):
    """Cached greedy decoding with keras-hub's own caches, as its seq2seq models decode.

    The encoder runs once; each `TransformerDecoder` keeps a self-attention
    cache `(B, 2, L, H, K)` updated at the step index and a cross-attention
    cache `(B, 2, S, H, K)` computed at the first step and reused, the calls
    `keras_hub.models.BartSeq2SeqLM.call_decoder_with_cache` makes. Writes
    `new_tokens` tokens (no EOS), so it does the work of the package's
    greedy search with an EOS it never meets.

    Args:
        model: from `kerashub_transformer`.
        source_ids: int32 `(B, S)`, 0-padded.
        new_tokens: tokens to generate, L.
        bos_id: the first target token.
        num_layers, num_heads: the model's sizes.

    Returns:
        int32 `(B, L)` token ids.
    """
    import tensorflow as tf

    source_embedding = model.get_layer("source_embedding")
    target_embedding = model.get_layer("target_embedding")
    encoders = [model.get_layer(f"encoder_{index}") for index in range(num_layers)]
    decoders = [model.get_layer(f"decoder_{index}") for index in range(num_layers)]
    logits_layer = model.get_layer("logits")
    source_mask = source_ids != 0
    memory = source_embedding(source_ids)
    for encoder in encoders:
        memory = encoder(memory, padding_mask=source_mask)  # (B, S, D)
    batch, source_length = tf.shape(source_ids)[0], tf.shape(source_ids)[1]
    depth = memory.shape[-1] // num_heads
    self_cache = tf.zeros([batch, num_layers, 2, new_tokens, num_heads, depth])
    cross_cache = tf.zeros([batch, num_layers, 2, source_length, num_heads, depth])

    def step(index, token, self_cache, cross_cache, cross_index):
        y = target_embedding(token[:, None], start_index=index)  # (B, 1, D)
        self_layers, cross_layers = [], []
        for layer, decoder in enumerate(decoders):
            y, own_self, own_cross = decoder(
                y,
                encoder_sequence=memory,
                encoder_padding_mask=source_mask,
                self_attention_cache=self_cache[:, layer],
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache[:, layer],
                cross_attention_cache_update_index=cross_index,
            )
            self_layers.append(own_self)
            cross_layers.append(own_cross)
        next_token = tf.argmax(logits_layer(y)[:, 0], axis=-1, output_type=tf.int32)  # (B,)
        return next_token, tf.stack(self_layers, axis=1), tf.stack(cross_layers, axis=1)

    bos = tf.fill([batch], bos_id)
    token, self_cache, cross_cache = step(0, bos, self_cache, cross_cache, 0)
    outputs = tf.TensorArray(tf.int32, size=new_tokens).write(0, token)

    def body(index, token, self_cache, outputs):
        token, self_cache, _ = step(index, token, self_cache, cross_cache, None)
        return index + 1, token, self_cache, outputs.write(index, token)

    _, _, _, outputs = tf.while_loop(
        lambda index, *_: index < new_tokens,
        body,
        (tf.constant(1), token, self_cache, outputs),
    )
    return tf.transpose(outputs.stack())  # (B, L)
