"""The TensorFlow tutorial's Transformer, built on `keras.layers.MultiHeadAttention`.

The architecture of the "Neural machine translation with a Transformer and
Keras" tutorial, in Keras 3: post-LN residual blocks around
`keras.layers.MultiHeadAttention` (attention dropout inside it), a feed-forward
block with dropout, an embedding with `mask_zero=True` scaled by sqrt(d_model)
plus the concatenated sinusoidal encoding. One change: `key_dim` is
`d_model // num_heads` (the paper's d_k), so the model has the same size as
the package's `Transformer`. `masked_loss` and `masked_accuracy` are the
tutorial's training loss and metric. The benchmarks compare against all of it.
"""

import keras
import numpy as np
from keras import ops


def positional_encoding(length, depth):
    half = depth / 2
    positions = np.arange(length)[:, np.newaxis]  # (L, 1)
    depths = np.arange(half)[np.newaxis, :] / half  # (1, D/2)
    angle_rads = positions / (10000**depths)  # (L, D/2)
    table = np.concatenate([np.sin(angle_rads), np.cos(angle_rads)], axis=-1)
    return table.astype("float32")


class PositionalEmbedding(keras.layers.Layer):
    def __init__(self, vocab_size, d_model, max_length=2048):
        super().__init__()
        self.d_model = d_model
        self.embedding = keras.layers.Embedding(vocab_size, d_model, mask_zero=True)
        self.pos_encoding = positional_encoding(max_length, d_model)

    def compute_mask(self, *args, **kwargs):
        return self.embedding.compute_mask(*args, **kwargs)

    def call(self, x):
        length = ops.shape(x)[1]
        x = self.embedding(x) * ops.sqrt(ops.cast(self.d_model, "float32"))
        return x + self.pos_encoding[None, :length, :]


class BaseAttention(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__()
        self.mha = keras.layers.MultiHeadAttention(**kwargs)
        self.layernorm = keras.layers.LayerNormalization()
        self.add = keras.layers.Add()


class CrossAttention(BaseAttention):
    def call(self, x, context):
        attn_output = self.mha(query=x, key=context, value=context)
        return self.layernorm(self.add([x, attn_output]))


class GlobalSelfAttention(BaseAttention):
    def call(self, x):
        attn_output = self.mha(query=x, value=x, key=x)
        return self.layernorm(self.add([x, attn_output]))


class CausalSelfAttention(BaseAttention):
    def call(self, x):
        attn_output = self.mha(query=x, value=x, key=x, use_causal_mask=True)
        return self.layernorm(self.add([x, attn_output]))


class FeedForward(keras.layers.Layer):
    def __init__(self, d_model, dff, dropout_rate=0.1):
        super().__init__()
        self.seq = keras.Sequential(
            [
                keras.layers.Dense(dff, activation="relu"),
                keras.layers.Dense(d_model),
                keras.layers.Dropout(dropout_rate),
            ]
        )
        self.add = keras.layers.Add()
        self.layer_norm = keras.layers.LayerNormalization()

    def call(self, x):
        return self.layer_norm(self.add([x, self.seq(x)]))


class EncoderLayer(keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        self.self_attention = GlobalSelfAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate
        )
        self.ffn = FeedForward(d_model, dff)

    def call(self, x):
        return self.ffn(self.self_attention(x))


class Encoder(keras.layers.Layer):
    def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
        super().__init__()
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        self.enc_layers = [
            EncoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate)
            for _ in range(num_layers)
        ]
        self.dropout = keras.layers.Dropout(dropout_rate)

    def call(self, x):
        x = self.dropout(self.pos_embedding(x))
        for layer in self.enc_layers:
            x = layer(x)
        return x


class DecoderLayer(keras.layers.Layer):
    def __init__(self, *, d_model, num_heads, dff, dropout_rate=0.1):
        super().__init__()
        self.causal_self_attention = CausalSelfAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate
        )
        self.cross_attention = CrossAttention(
            num_heads=num_heads, key_dim=d_model // num_heads, dropout=dropout_rate
        )
        self.ffn = FeedForward(d_model, dff)

    def call(self, x, context):
        x = self.causal_self_attention(x=x)
        x = self.cross_attention(x=x, context=context)
        return self.ffn(x)


class Decoder(keras.layers.Layer):
    def __init__(self, *, num_layers, d_model, num_heads, dff, vocab_size, dropout_rate=0.1):
        super().__init__()
        self.pos_embedding = PositionalEmbedding(vocab_size=vocab_size, d_model=d_model)
        self.dropout = keras.layers.Dropout(dropout_rate)
        self.dec_layers = [
            DecoderLayer(d_model=d_model, num_heads=num_heads, dff=dff, dropout_rate=dropout_rate)
            for _ in range(num_layers)
        ]

    def call(self, x, context):
        x = self.dropout(self.pos_embedding(x))
        for layer in self.dec_layers:
            x = layer(x, context)
        return x


class ReferenceTransformer(keras.Model):
    def __init__(
        self,
        *,
        num_layers,
        d_model,
        num_heads,
        dff,
        input_vocab_size,
        target_vocab_size,
        dropout_rate=0.1,
    ):
        super().__init__()
        kwargs = dict(
            num_layers=num_layers,
            d_model=d_model,
            num_heads=num_heads,
            dff=dff,
            dropout_rate=dropout_rate,
        )
        self.encoder = Encoder(vocab_size=input_vocab_size, **kwargs)
        self.decoder = Decoder(vocab_size=target_vocab_size, **kwargs)
        self.final_layer = keras.layers.Dense(target_vocab_size)

    def call(self, inputs):
        context, x = inputs
        context = self.encoder(context)
        x = self.decoder(x, context)
        return self.final_layer(x)


def masked_loss(label, pred):
    mask = label != 0
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    loss = loss_object(label, pred)
    mask = ops.cast(mask, dtype=loss.dtype)
    loss *= mask
    return ops.sum(loss) / ops.sum(mask)


def masked_accuracy(label, pred):
    pred = ops.argmax(pred, axis=2)
    label = ops.cast(label, pred.dtype)
    match = label == pred
    mask = label != 0
    match = match & mask
    match = ops.cast(match, dtype="float32")
    mask = ops.cast(mask, dtype="float32")
    return ops.sum(match) / ops.sum(mask)
