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
# # Multi30k German → English
#
# Multi30k task 1 (Elliott et al., 2016): 29,000 training, 1,014 validation and 1,000 test
# (test_2016_flickr) image captions in German and English. We train a shared SentencePiece
# vocabulary, batch with length buckets, train with `model.fit` and the paper's schedule, and
# score the test set with sacreBLEU.
#
# **Data.** Set `MULTI30K_DIR` to a directory holding `train.de.gz`, `train.en.gz`,
# `val.de.gz`, `val.en.gz`, `test_2016_flickr.de.gz`, `test_2016_flickr.en.gz` (one
# sentence a line; from https://github.com/multi30k/dataset, `data/task1/raw`). Nothing is
# downloaded here. `KT_TINY=1` runs a tiny configuration in a minute.

# %%
import os
import sys

DATA_DIR = os.environ.get("MULTI30K_DIR", "")
if not os.path.isfile(os.path.join(DATA_DIR, "train.de.gz")):
    print(
        "Multi30k not found. Download data/task1/raw from https://github.com/multi30k/dataset "
        "(train, val and test_2016_flickr, .de.gz and .en.gz) into a directory and set "
        "MULTI30K_DIR to it. Stopping here."
    )
    sys.exit(0)

# %%
import keras
import matplotlib.pyplot as plt
import numpy as np
import sacrebleu
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.datasets import load_split
from keras_transformer.inference import Translator
from keras_transformer.text import SentencePieceTokenizer, make_batches, padding_fraction

TINY = os.environ.get("KT_TINY") == "1"
keras.utils.set_random_seed(0)
train = load_split(DATA_DIR, "train", "de", "en")
val = load_split(DATA_DIR, "val", "de", "en")
test = load_split(DATA_DIR, "test_2016_flickr", "de", "en")
if TINY:
    train, val, test = train[:2000], val[:200], test[:100]
print(len(train), len(val), len(test))
print(train[0])

# %% [markdown]
# ## Tokenizer and batches
# One 8k SentencePiece model for both languages; it detokenizes losslessly, which cased
# BLEU on raw text needs. Batches hold sentences of similar length under a token budget.

# %%
tokenizer = SentencePieceTokenizer.train(
    train.sources + train.targets, vocab_size=1000 if TINY else 8000
)
print(tokenizer.tokenize(["Ein Mann fährt Fahrrad."]).to_list())
train_batches = make_batches(train, tokenizer, tokenizer, max_length=64, tokens_per_batch=4096)
val_batches = make_batches(val, tokenizer, tokenizer, max_length=64, shuffle=False)
print(train_batches)
print(f"padding in the training batches: {padding_fraction(train_batches.dataset):.1%}")

# %% [markdown]
# ## Train

# %%
D_MODEL = 64 if TINY else 256
model = kt.Transformer(
    num_layers=1 if TINY else 3,
    d_model=D_MODEL,
    num_heads=4,
    dff=4 * D_MODEL,
    input_vocab_size=tokenizer.vocab_size,
    target_vocab_size=tokenizer.vocab_size,
    dropout_rate=0.1 if TINY else 0.3,
)
model.compile(
    optimizer=keras.optimizers.Adam(
        kt.TransformerSchedule(D_MODEL, warmup_steps=100 if TINY else 2000),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
    ),
    loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
    metrics=[kt.MaskedAccuracy()],
)
history = model.fit(
    train_batches.dataset,
    validation_data=val_batches.dataset,
    epochs=1 if TINY else 20,
    shuffle=False,
    callbacks=[keras.callbacks.EarlyStopping(patience=3, restore_best_weights=True)],
)

# %%
plt.figure(figsize=(6, 3))
plt.plot(history.history["loss"], label="train")
plt.plot(history.history["val_loss"], label="validation")
plt.xlabel("epoch")
plt.legend()
plt.show()

# %% [markdown]
# ## BLEU on test_2016_flickr
# Cased, detokenized sacreBLEU (the standard signature), plus lowercased BLEU and chrF.

# %%
translator = Translator(model, tokenizer, tokenizer, max_length=64, beam_size=4)
hypotheses = []
for start in range(0, len(test), 64):
    batch = tf.constant(test.sources[start : start + 64])
    hypotheses += [h.decode() for h in translator(batch).numpy()]
bleu = sacrebleu.metrics.BLEU()
print(bleu.corpus_score(hypotheses, [test.targets]), bleu.get_signature())
print(sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hypotheses, [test.targets]))
print(sacrebleu.metrics.CHRF().corpus_score(hypotheses, [test.targets]))
for source, hypothesis, reference in list(zip(test.sources, hypotheses, test.targets, strict=True))[
    :5
]:
    print(f"DE  {source}\nOUT {hypothesis}\nREF {reference}\n")

# %% [markdown]
# ## Attention
# Cross-attention of the last decoder layer, averaged over heads, for one test sentence.

# %%
source_ids = translator.source_ids(tf.constant([test.sources[0]]))
target = [i for i in translator.translate_ids(source_ids)[0].numpy() if i != 0]
target_in = np.array([[tokenizer.bos_id] + target[:-1]], "int32")
_, scores = model.decoder(target_in, model.encoder(source_ids), return_attention_scores=True)
weights = np.asarray(scores[-1]["cross_attention"][0]).mean(axis=0)  # (T, S)


def pieces(ids):
    return [tokenizer.detokenize([[i]]).numpy()[0].decode() or "</s>" for i in ids]


plt.figure(figsize=(8, 6))
plt.imshow(weights, cmap="viridis")
plt.xticks(range(weights.shape[1]), pieces(source_ids[0].numpy()), rotation=90)
plt.yticks(range(weights.shape[0]), pieces(target))
plt.show()
