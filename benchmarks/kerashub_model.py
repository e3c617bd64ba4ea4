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
    source = keras.Input((None,), dtype="int32", name="source_ids")
    target = keras.Input((None,), dtype="int32", name="target_ids")
    x = keras_hub.layers.TokenAndPositionEmbedding(
        input_vocab_size, length, d_model, mask_zero=True, name="source_embedding"
    )(source)
    x = keras.layers.Dropout(dropout)(x)
    for index in range(num_layers):
        x = keras_hub.layers.TransformerEncoder(
            dff, num_heads, dropout=dropout, name=f"encoder_{index}"
        )(x)  # (B, S, D)
    y = keras_hub.layers.TokenAndPositionEmbedding(
        target_vocab_size, length, d_model, mask_zero=True, name="target_embedding"
    )(target)
    y = keras.layers.Dropout(dropout)(y)
    for index in range(num_layers):
        y = keras_hub.layers.TransformerDecoder(
            dff, num_heads, dropout=dropout, name=f"decoder_{index}"
        )(y, x)  # (B, T, D)
    logits = keras.layers.Dense(target_vocab_size, name="logits")(y)  # (B, T, V)
    return keras.Model((source, target), logits, name="kerashub_transformer")
