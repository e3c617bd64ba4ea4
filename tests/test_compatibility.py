"""Files written by keras_transformer 0.1.0 (a `.keras` model and a run directory,
`tests/data/run_0_1_0/`) load and translate as they did when they were written.

`expected.json` holds what that release printed for ten sentences (greedy and
beam 2 with 2-best lists, scores, and the teacher-forced scores of six given
translations): the referee is the code that wrote the files, not this one, except
for the empty sentence, which now translates as "".
"""

import json
import os

import keras
import numpy as np
import pytest
from conftest import RUN_0_1_0 as DATA

import keras_transformer as kt
from keras_transformer import run as runs
from keras_transformer.model_section import model_section


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(DATA, "expected.json"), encoding="utf-8") as f:
        return json.load(f)


def test_a_keras_file_of_0_1_0_loads_as_a_transformer_with_its_config():
    model = keras.models.load_model(os.path.join(DATA, "model.keras"))
    assert isinstance(model, kt.Transformer)
    with open(os.path.join(DATA, "config.json"), encoding="utf-8") as f:
        saved = json.load(f)["model"]
    section = model_section(model)  # the model's arguments as a run's keys
    assert {key: section[key] for key in saved} == saved


@pytest.mark.parametrize("beam_size", [1, 2])
def test_a_run_directory_of_0_1_0_translates_as_it_did(run_0_1_0, expected, beam_size):
    translator = runs.make_translator(
        run_0_1_0, beam_size=beam_size, n_best=beam_size, jit_compile=False
    )
    result = translator.translate(expected["sentences"])
    texts = result.translations.tolist()
    reference = expected[f"beam{beam_size}"]
    # Empty and whitespace-only sentences translate as "" now; 0.1.0 made up a number.
    empty = [i for i, sentence in enumerate(expected["sentences"]) if not sentence.strip()]
    assert empty and all(texts[i][0] == "" for i in empty)
    kept = [i for i in range(len(texts)) if i not in empty]
    assert [texts[i] for i in kept] == [reference["translations"][i] for i in kept]
    np.testing.assert_allclose(result.scores[kept], np.array(reference["scores"])[kept], atol=1e-5)


def test_a_run_directory_of_0_1_0_scores_given_translations_as_it_did(run_0_1_0, expected):
    targets = ["one", "two", "three hundred and twenty-one", "seventeen", "nine", "forty thousand"]
    scored = runs.score_pairs(run_0_1_0, expected["sentences"][:6], targets)
    for got, reference in zip(scored, expected["score"], strict=True):
        assert got["tokens"] == reference["tokens"]
        np.testing.assert_allclose(got["log_prob"], reference["log_prob"], atol=1e-5)


def test_the_runtimes_import_from_the_export_modules_that_held_them_before():
    from keras_transformer.export import ctranslate2, ctranslate2_runtime, litert, litert_runtime

    assert ctranslate2.CTranslate2Translator is ctranslate2_runtime.CTranslate2Translator
    assert litert.LiteRTTranslator is litert_runtime.LiteRTTranslator
    with pytest.raises(AttributeError, match="no attribute 'CTranslate2Model'"):
        ctranslate2.CTranslate2Model  # noqa: B018
