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
# score the test set with sacreBLEU, following the package's committed recipe: mixed bfloat16,
# and a learning rate that cools down to 0 over the last epochs. As for the recipe's figure
# (docs/guides/multi30k.md), the epoch with the lowest validation loss translates (what
# `keras-transformer evaluate` does with the CLI's `best` checkpoint).
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
import tensorflow as tf

import keras_transformer as kt
from keras_transformer.config import load_config
from keras_transformer.run import (
    build_model,
    compile_from_config,
    corpus_split,
    score_translations,
    set_precision,
    training_and_validation_batches,
)
from keras_transformer.text import padding_fraction, train_tokenizer

# %% [markdown]
# ## The recipe
# The committed recipe, `keras_transformer/configs/multi30k_de_en.yaml`, is what the CLI
# trains; this notebook runs the same steps in the open. `KT_TINY=1` shrinks it.

# %%
TINY = os.environ.get("KT_TINY") == "1"
overrides = [
    "data.train_limit=2000",
    "tokenizer.vocab_size=1000",
    "model.num_layers=1",
    "model.d_model=64",
    "model.dff=256",
    "train.epochs=1",
    "train.cooldown_epochs=1",
    "train.warmup_steps=100",
]
config = load_config("multi30k_de_en", overrides if TINY else [])
data, train_options, decode = config["data"], config["train"], config["decode"]
for section in ("tokenizer", "model", "train", "decode"):
    print(section, config[section])

keras.utils.set_random_seed(train_options["seed"])
train = corpus_split(data, data["train_split"])[: data["train_limit"]]
val = corpus_split(data, data["val_split"])
test = corpus_split(data, data["test_split"])
if TINY:
    val, test = val[:200], test[:100]
print(len(train), len(val), len(test))
print(train[0])

# %% [markdown]
# ## Tokenizer and batches
# One SentencePiece model for both languages; it detokenizes losslessly, which cased
# BLEU on raw text needs. `training_and_validation_batches` builds the batches as the CLI
# does (`text.make_batches` with the config's options): sentences of similar length under a
# token budget, and each epoch the training pairs segmented anew by sampling (subword
# regularization, `tokenizer.sampling_alpha`); validation and translation use the best
# segmentation.

# %%
tokenizer = train_tokenizer(
    config["tokenizer"]["type"], train.sources + train.targets, config["tokenizer"]["vocab_size"]
)
print(tokenizer.tokenize(["Ein Mann fährt Fahrrad."]).to_list())
sampler = tokenizer.sampler(
    config["tokenizer"]["sampling_alpha"], config["tokenizer"]["sampling_nbest_size"]
)
best, drawn = (segment(train.sources[:200]).to_list() for segment in (tokenizer.tokenize, sampler))
changed = sum(a != b for a, b in zip(best, drawn, strict=True))
print(f"one draw segments {changed} of the first 200 training sources otherwise than the best")
train_batches, val_batches = training_and_validation_batches(
    config, train, val, (tokenizer, tokenizer)
)
print(train_batches)
print(f"padding in the training batches: {padding_fraction(train_batches.dataset):.1%}")

# %% [markdown]
# ## Train
# The recipe trains in mixed bfloat16 (`train.mixed_precision`): float32 weights, bfloat16
# matrix products, fast on a CPU with bfloat16 instructions. `set_precision` sets that policy
# and, on a CPU without them, returns the warning `train` gives, which says how to train in
# float32.
# `build_model` passes the config's `model` section to `kt.Transformer`; `compile_from_config` sets
# the paper's Adam and warm-up schedule (`kt.transformer_optimizer`), falling in a line to 0
# over the last `train.cooldown_epochs` (it needs the steps of an epoch to place them), the
# label-smoothed masked loss, the recipe's R-Drop (`train.r_drop`: each batch runs twice, with a
# KL term between the two dropout passes) and the masked accuracy. `EarlyStopping` keeps the
# weights of the epoch with the lowest validation loss; after the cool-down that is the last.

# %%
warning = set_precision(train_options)
print(warning or f"training under {keras.config.dtype_policy().name}")
model = build_model(config, tokenizer.vocab_size, tokenizer.vocab_size)
compile_from_config(model, train_options, train_batches.num_batches)
best_epoch = keras.callbacks.EarlyStopping(
    patience=train_options["patience"], restore_best_weights=True
)
history = model.fit(
    train_batches.dataset,
    validation_data=val_batches.dataset,
    epochs=train_options["epochs"],
    shuffle=False,  # the pipeline shuffles
    callbacks=[best_epoch],
)
keras.config.set_dtype_policy("float32")
model = model.float32_copy()  # decodes in float32, as the CLI's checkpoints do
print(f"translating with the weights of epoch {best_epoch.best_epoch + 1}")

# %%
plt.figure(figsize=(6, 3))
plt.plot(history.history["loss"], label="train")
plt.plot(history.history["val_loss"], label="validation")
plt.xlabel("epoch")
plt.legend()
plt.show()

# %% [markdown]
# ## BLEU on test_2016_flickr
# Cased, detokenized sacreBLEU (the standard signature), plus lowercased BLEU, BLEU with
# sacreBLEU's `intl` tokenization (lowercased: the figure to set beside published tokenized,
# lowercased Multi30k results) and chrF.

# %%
translator = kt.Translator(
    model,
    tokenizer,
    tokenizer,
    max_length=decode["max_length"],
    beam_size=decode["beam_size"],
    alpha=decode["alpha"],
    no_repeat_ngram_size=decode["no_repeat_ngram_size"],
)
hypotheses = kt.inference.translate_lines(translator, test.sources, decode["batch_size"])
scores = score_translations(hypotheses, test.targets)
print(f"BLEU {scores['bleu']} ({scores['signature']})")
print(f"lowercased BLEU {scores['bleu_lowercase']}, chrF {scores['chrf']}")
print(f"intl BLEU {scores['bleu_intl']}, intl lowercased {scores['bleu_intl_lowercase']}")
for source, hypothesis, reference in zip(
    test[:5].sources, hypotheses[:5], test[:5].targets, strict=True
):
    print(f"DE  {source}\nOUT {hypothesis}\nREF {reference}\n")

# %% [markdown]
# ## Attention
# Cross-attention of the last decoder layer, averaged over heads, for one test sentence: the
# search collects it while it decodes (`attention_layer=-1`), without running the model again.

# %%
source_ids = translator.source_ids(tf.constant([test.sources[0]]))
target_ids, _, attention = kt.inference.greedy_search(
    model, source_ids, tokenizer.bos_id, tokenizer.eos_id, decode["max_length"], attention_layer=-1
)
target = [i for i in target_ids[0].numpy() if i != tokenizer.pad_id]
weights = attention[0, : len(target)].numpy()  # (T, S)


def pieces(ids):
    return [tokenizer.detokenize([[i]]).numpy()[0].decode() or "</s>" for i in ids]


plt.figure(figsize=(8, 6))
plt.imshow(weights, cmap="viridis")
plt.xticks(range(weights.shape[1]), pieces(source_ids[0].numpy()), rotation=90)
plt.yticks(range(weights.shape[0]), pieces(target))
plt.show()
