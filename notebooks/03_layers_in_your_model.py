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
# # Using the layers in your own Keras model
#
# The layers are ordinary Keras layers: here a text classifier made of `PositionalEmbedding`,
# two `EncoderLayer`s, mask-aware pooling and a `Dense` head. The padding mask that
# `PositionalEmbedding` computes flows through the encoder layers and the pooling without
# being passed by hand. The task: does an English number word sentence name a number of at
# least one thousand? The model has to find the word "thousand" anywhere in the sentence.

# %%
import os

import keras
import numpy as np

import keras_transformer as kt
from keras_transformer.datasets import numbers_corpus
from keras_transformer.text import SentencePieceTokenizer

TINY = os.environ.get("KT_TINY") == "1"
keras.utils.set_random_seed(0)
corpus = numbers_corpus("train", limit=2_000 if TINY else 20_000)
test = numbers_corpus("test")
tokenizer = SentencePieceTokenizer.train(corpus.sources, vocab_size=200)


def encode(texts, length=32):
    return tokenizer.tokenize(texts)[:, :length].to_tensor(0, shape=[None, length]).numpy()


def labels(texts):
    return np.array(["thousand" in t for t in texts], "int32")


x_train, y_train = encode(corpus.sources), labels(corpus.sources)
x_test, y_test = encode(test.sources), labels(test.sources)
print(x_train.shape, y_train.mean())

# %%
inputs = keras.Input(shape=(None,), dtype="int32")
x = kt.layers.PositionalEmbedding(tokenizer.vocab_size, 64)(inputs)  # sets the padding mask
x = kt.layers.EncoderLayer(d_model=64, num_heads=4, dff=128)(x)
x = kt.layers.EncoderLayer(d_model=64, num_heads=4, dff=128)(x)
x = keras.layers.GlobalAveragePooling1D()(x)  # averages real positions only
outputs = keras.layers.Dense(1, activation="sigmoid")(x)
classifier = keras.Model(inputs, outputs)
classifier.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
classifier.summary()

# %%
classifier.fit(x_train, y_train, batch_size=64, epochs=1 if TINY else 3, validation_split=0.1)
loss, accuracy = classifier.evaluate(x_test, y_test, verbose=0)
print(f"test accuracy: {accuracy:.3f}")

# %% [markdown]
# Padding does not change a prediction: the same sentences padded to 48 tokens give the
# same outputs.

# %%
padded = np.pad(x_test[:16], ((0, 0), (0, 16)))
np.testing.assert_allclose(classifier(padded), classifier(x_test[:16]), atol=1e-5)

# %% [markdown]
# It saves and loads like any Keras model, without `custom_objects`.

# %%
classifier.save("classifier.keras")
reloaded = keras.models.load_model("classifier.keras")
np.testing.assert_allclose(reloaded(x_test[:16]), classifier(x_test[:16]), atol=1e-6)
os.remove("classifier.keras")
