"""Decoding in bfloat16: `Transformer.dtype_copy` and `Translator(compute_dtype="bfloat16")`."""

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from conftest import load_tiny_translation

import keras_transformer as kt
from keras_transformer.cli import main
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError
from keras_transformer.inference import Ensemble, Translator

SENTENCES = numbers_corpus("test", source_lang="en", target_lang="de", limit=60).sources


@pytest.fixture(scope="module")
def parts(tiny_translation):
    """One model and tokenizer for the module's tests, which only read them."""
    return load_tiny_translation(tiny_translation)


def test_a_bfloat16_copy_holds_the_rounded_weights_and_computes_the_same_logits(parts):
    """Every weight of the copy is the float32 weight rounded to bfloat16 (NumPy's
    ml_dtypes as the reference); its logits are those of a float32 model holding the
    rounded weights, within bfloat16's error of the activations."""
    model, tokenizer = parts
    assert model.dtype_copy("float32") is model
    half = model.dtype_copy("bfloat16")
    assert half.dtype_policy.name == "bfloat16" and half is not model
    rounded = [w.astype(ml_dtypes.bfloat16) for w in model.get_weights()]
    for theirs, ours in zip(rounded, half.get_weights(), strict=True):
        assert ours.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(ours.view(np.uint16), theirs.view(np.uint16))

    reference = kt.Transformer.from_config(model.get_config())  # float32, rounded weights
    reference((tf.ones([1, 2], tf.int32), tf.ones([1, 2], tf.int32)))
    reference.set_weights([w.astype(np.float32) for w in rounded])
    source = tokenizer.tokenize(tf.constant(SENTENCES[:8])).to_tensor()
    target = tf.concat([tf.fill([8, 1], tokenizer.bos_id), source[:, :-1]], axis=1)
    expected = reference((source, target)).numpy()
    got = tf.cast(half((source, target)), tf.float32).numpy()
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() < 0.05 * scale, np.abs(got - expected).max() / scale
    assert (got.argmax(-1) == expected.argmax(-1)).mean() > 0.95


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_bfloat16_translator_translates_as_the_float32_one(parts, beam_size):
    """The bfloat16 search writes the float32 search's translation for at least 85% of the
    sentences of this briefly trained model (57 and 58 of 60 on the Intel AMX VM; all of
    the README main job's 1,000 test sentences, docs/guides/decoding.md); a batch of one,
    empty and whitespace-only sources translate as in float32; copies keep the dtype, and
    an ensemble runs each member in bfloat16."""
    model, tokenizer = parts
    single = Translator(model, tokenizer, tokenizer, max_length=30, jit_compile=False)
    single = single.copy(beam_size=beam_size)
    half = single.copy(compute_dtype="bfloat16")
    assert half.model.dtype_policy.name == "bfloat16" and single.model is model
    assert half.copy(alpha=0.8).compute_dtype == "bfloat16"
    sentences = SENTENCES + ["", "   "]
    ours = half.translate(sentences).best
    theirs = single.translate(sentences).best
    same = [a == b for a, b in zip(ours, theirs, strict=True)]
    assert sum(same) >= 0.85 * len(sentences), [
        s for s, ok in zip(sentences, same, strict=True) if not ok
    ]
    assert ours[-2:] == ["", ""]
    assert half.translate(sentences[:1]).best[0] == ours[0]

    pair = Translator(
        Ensemble([model, model]),
        tokenizer,
        tokenizer,
        max_length=30,
        jit_compile=False,
        beam_size=beam_size,
        compute_dtype="bfloat16",
    )
    assert all(m.dtype_policy.name == "bfloat16" for m in pair.model.models)
    assert pair.translate(sentences[:10]).best == ours[:10]


def test_other_compute_dtypes_and_models_are_refused(parts, capsys):
    model, tokenizer = parts
    with pytest.raises(ArgumentError, match=r"`compute_dtype` must be one of .*float16'"):
        Translator(model, tokenizer, tokenizer, compute_dtype="float16")
    with pytest.raises(ArgumentError, match="copies a keras_transformer.Transformer"):
        Translator(kt.models.StepWrapper(model), tokenizer, tokenizer, compute_dtype="bfloat16")
    args = ["export", "--run-dir", "runs/none", "--format", "litert", "--compute-dtype", "bfloat16"]
    assert main(args) == 2
    error = capsys.readouterr().err.strip()
    assert "--compute-dtype is for SavedModel exports" in error and "\n" not in error
