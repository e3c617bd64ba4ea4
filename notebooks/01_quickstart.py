# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Quickstart: a Transformer that translates numbers
#
# We build the pieces of "Attention Is All You Need", look at the positional encoding and
# the masks, train a small model with `model.fit` on the built-in corpus (English number
# words to German ones), plot the learning-rate schedule, the loss curves and the attention
# weights, translate, and export a SavedModel for TF Serving.
#
# Set `KT_TINY=1` to run everything in a minute on a tiny configuration (CI does).

# %%
import os

import keras
import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.export import export_translator
from keras_transformer.inference import Translator
from keras_transformer.text import SentencePieceTokenizer, make_batches

TINY = os.environ.get("KT_TINY") == "1"
TRAIN_PAIRS = 1_000 if TINY else 30_000
EPOCHS = 1 if TINY else 8
D_MODEL, LAYERS = (32, 1) if TINY else (128, 3)
keras.utils.set_random_seed(0)

# %% [markdown]
# ## Positional encoding
# PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same angle): each pair of
# dimensions is a clock of its own wavelength.

# %%
table = kt.layers.PositionalEncoding()(np.zeros((1, 64, 128), "float32"))[0]
plt.figure(figsize=(8, 3))
plt.pcolormesh(np.asarray(table).T, cmap="RdBu")
plt.xlabel("position")
plt.ylabel("dimension")
plt.colorbar()
plt.title("Sinusoidal positional encoding (interleaved sin/cos)")
plt.show()

# %% [markdown]
# ## Masks
# True means "may attend". The padding mask hides padded keys; the look-ahead mask hides
# the future from each target position; the decoder uses both, combined with AND.

# %%
token_ids = np.array([[5, 7, 9, 0, 0]])
padding = np.asarray(kt.layers.padding_mask(token_ids))[0, 0, 0]  # (S,)
look_ahead = np.asarray(kt.layers.look_ahead_mask(5))  # (T, T)
fig, axes = plt.subplots(1, 3, figsize=(9, 3))
for ax, mask, title in [
    (axes[0], padding[None], "padding (keys)"),
    (axes[1], look_ahead, "look-ahead"),
    (axes[2], look_ahead & padding[None], "decoder self-attention"),
]:
    ax.imshow(mask, cmap="Greys", vmin=0, vmax=1)
    ax.set_title(title)
plt.show()

# %% [markdown]
# ## Data: the built-in numbers corpus
# "three hundred and twenty-one" -> "dreihunderteinundzwanzig": German puts the units before
# the tens, so the model has to reorder. One SentencePiece vocabulary covers both languages.

# %%
train = numbers_corpus("train", limit=TRAIN_PAIRS)
val = numbers_corpus("val")
test = numbers_corpus("test")
print(train[0])
tokenizer = SentencePieceTokenizer.train(train.sources + train.targets, vocab_size=500)
print("vocabulary:", tokenizer.vocab_size)
print(tokenizer.tokenize([train.targets[0]]).to_list())
train_batches = make_batches(train, tokenizer, tokenizer, tokens_per_batch=2048, seed=0)
val_batches = make_batches(val, tokenizer, tokenizer, tokens_per_batch=2048, shuffle=False)
print(train_batches)

# %% [markdown]
# ## The model, the schedule and `model.fit`

# %%
model = kt.Transformer(
    num_layers=LAYERS,
    d_model=D_MODEL,
    num_heads=4,
    dff=4 * D_MODEL,
    input_vocab_size=tokenizer.vocab_size,
    target_vocab_size=tokenizer.vocab_size,
)
model.compile(
    optimizer=kt.transformer_optimizer(D_MODEL, warmup_steps=500),
    loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
    metrics=[kt.MaskedAccuracy()],
)
schedule = kt.TransformerSchedule(D_MODEL, warmup_steps=500)  # the optimizer's
steps = np.arange(1, 4000)
plt.figure(figsize=(6, 3))
plt.plot(steps, [float(schedule(s)) for s in steps])
plt.xlabel("step")
plt.ylabel("learning rate")
plt.title("d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)")
plt.show()

# %%
history = model.fit(
    train_batches.dataset, validation_data=val_batches.dataset, epochs=EPOCHS, shuffle=False
)
model.summary()

# %%
plt.figure(figsize=(6, 3))
plt.plot(history.history["loss"], label="train")
plt.plot(history.history["val_loss"], label="validation")
plt.xlabel("epoch")
plt.ylabel("masked loss")
plt.legend()
plt.show()

# %% [markdown]
# ## Translate
# The `Translator` tokenizes, runs beam search with cached keys and values, and detokenizes,
# all in TensorFlow.

# %%
translator = Translator(model, tokenizer, tokenizer, max_length=48, beam_size=4)
sources = test.sources[:8]
for source, output, reference in zip(
    sources, translator(tf.constant(sources)).numpy(), test.targets[:8], strict=True
):
    verdict = "ok" if output.decode() == reference else f"reference: {reference}"
    print(f"{source:60s} -> {output.decode():45s} {verdict}")

# %% [markdown]
# ## Attention weights
# Cross-attention of the last decoder layer, for a few heads: which source pieces each
# generated piece looks at.

# %%
source_text = "seven hundred and forty-two thousand, one hundred and thirty-six"
source_ids = translator.source_ids(tf.constant([source_text]))
target_ids = translator.translate_ids(source_ids)
target = [i for i in target_ids[0].numpy() if i != 0]
target_in = np.array([[tokenizer.bos_id] + target[:-1]], "int32")
context = model.encoder(source_ids)
_, scores = model.decoder(target_in, context, return_attention_scores=True)
weights = np.asarray(scores[-1]["cross_attention"][0])  # (H, T, S)


def pieces(ids):
    return [tokenizer.detokenize([[i]]).numpy()[0].decode() or "</s>" for i in ids]


source_pieces, target_pieces = pieces(source_ids[0].numpy()), pieces(target)
fig, axes = plt.subplots(1, 4, figsize=(16, 4))
for head, ax in enumerate(axes):
    ax.imshow(weights[head], cmap="viridis")
    ax.set_xticks(range(len(source_pieces)), source_pieces, rotation=90)
    ax.set_yticks(range(len(target_pieces)), target_pieces)
    ax.set_title(f"head {head}")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Export for TF Serving
# `saved_models/<name>/<version>/` with a strings-in, strings-out `serving_default`
# signature; it loads with `tensorflow` and `tensorflow_text` alone.

# %%
path = export_translator(translator, "quickstart_numbers")
reloaded = tf.saved_model.load(path)
print(path, reloaded.signatures["serving_default"](inputs=tf.constant(["twenty-one"])))
