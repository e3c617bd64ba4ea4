"""What a user meets around a run directory: damaged files named, wrong counts
refused, a bug kept apart from a user's error, renamed options still read.

The run directory is `tests/data/run_0_1_0`, copied, so that no test trains."""

import json
import os
import warnings

import pytest
from conftest import RUN_0_1_0 as DATA

import keras_transformer as kt
from keras_transformer import run as runs
from keras_transformer.cli import main
from keras_transformer.config import load_config
from keras_transformer.errors import ArgumentError
from keras_transformer.run.train import long_warmup_warning


def cut_in_half(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    "damaged, what",
    [
        ("model.keras", "not a complete .keras archive"),
        ("tokenizers/source/sentencepiece.model", "is not a SentencePiece model"),
        ("config.json", "holds the run's configuration"),
    ],
)
def test_a_damaged_file_of_a_run_is_named_in_one_line(run_0_1_0, damaged, what, capsys):
    cut_in_half(run_0_1_0 / damaged)
    assert main(["translate", "--run-dir", str(run_0_1_0), "eins"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(run_0_1_0 / damaged) in err, err
    assert "damaged" in err and what in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_average_refuses_to_average_no_checkpoints_by_count(run_0_1_0, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["average", "--run-dir", str(run_0_1_0), "--last", "0"])
    assert exit_.value.code == 2
    assert "--last: give a positive integer. Received: '0'" in capsys.readouterr().err
    with pytest.raises(ArgumentError, match="`last` must be a positive integer"):
        runs.average_checkpoints(run_0_1_0, last=0)


def test_an_unexpected_error_is_reported_as_a_bug_with_its_traceback(
    run_0_1_0, capsys, monkeypatch
):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(runs, "evaluate", broken)
    assert main(["evaluate", "--run-dir", str(run_0_1_0)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError: a bug" in err
    assert "this is a bug in keras-transformer" in err


def test_the_renamed_accumulation_key_still_sets_micro_batches():
    with pytest.warns(FutureWarning, match="'train.micro_batches'"):
        config = load_config(overrides=["train.gradient_accumulation_steps=3"])
    assert config["train"]["micro_batches"] == 3
    assert "gradient_accumulation_steps" not in config["train"]
    with open(os.path.join(DATA, "config.json"), encoding="utf-8") as f:
        assert "gradient_accumulation_steps" in json.load(f)["train"]  # as 0.1.0 wrote it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a saved run's config is read without a warning
        assert runs.RunDirectory(DATA).read_config()["train"]["micro_batches"] == 1


def test_optimizer_level_accumulation_is_deprecated_for_micro_batches():
    with pytest.warns(DeprecationWarning, match=r"compile\(micro_batches=N\)"):
        optimizer = kt.transformer_optimizer(16, warmup_steps=4, gradient_accumulation_steps=2)
    assert optimizer.gradient_accumulation_steps == 2  # and it still accumulates


def test_a_model_trained_in_mixed_precision_loads_to_compute_in_float32(tmp_path):
    import keras
    import numpy as np

    sizes = dict(num_layers=1, d_model=16, num_heads=2, dff=32)
    source = np.array([[5, 6, 7, 2, 0]], "int32")  # (1, S)
    target = np.array([[1, 8, 9, 4]], "int32")  # (1, T)
    keras.utils.set_random_seed(0)
    mixed = kt.Transformer(**sizes, input_vocab_size=12, target_vocab_size=12)
    mixed = kt.Transformer.from_config({**mixed.get_config(), "dtype": "mixed_bfloat16"})
    mixed((source, target))
    mixed.save(tmp_path / "model.keras")
    loaded = runs.RunDirectory(tmp_path).load_model("best")
    assert loaded.dtype_policy.name == "float32"
    reference = kt.Transformer(**sizes, input_vocab_size=12, target_vocab_size=12)
    reference((source, target))
    reference.set_weights(mixed.get_weights())  # float32 weights, float32 compute
    logits = loaded((source, target))  # (1, T, 12)
    np.testing.assert_allclose(logits, reference((source, target)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, mixed((source, target)), atol=0.1)  # bfloat16's
    assert mixed.compute_dtype == "bfloat16"


def test_only_training_state_makes_a_run_started(tmp_path):
    """What evaluate, translate, score, export and plot write leaves a run unstarted; a
    trained run's tokenizers, checkpoints, metrics or backup make it started."""
    run = runs.RunDirectory(tmp_path / "run")
    run.save_config(load_config())
    for output in ["test.best.beam4.hyp.txt", "eval.test.best.beam4.json", "curves.png"]:
        (tmp_path / "run" / output).write_text("x")
    (tmp_path / "run" / "shortlist.k10.f100.npz").write_bytes(b"x")
    assert not run.has_started()
    changed = load_config(overrides=["train.epochs=3"])
    assert run.resolve_config(changed) == (changed, False)  # saved: the run had not started
    for state in ["metrics.csv", "checkpoints", "tokenizers", "backup"]:
        path = tmp_path / "run" / state
        path.mkdir() if state != "metrics.csv" else path.write_text("epoch\n")
        assert run.has_started(), state
        path.rmdir() if state != "metrics.csv" else path.unlink()


def test_a_warm_up_longer_than_the_run_is_named_with_a_schedule_that_fits():
    t = load_config()["train"] | {"warmup_steps": 500, "epochs": 2}
    warning = long_warmup_warning(t, 111)
    assert warning.startswith("train.warmup_steps=500 is more than the run's 222 optimizer")
    assert warning.endswith("--set train.warmup_steps=22")
    assert long_warmup_warning(t | {"warmup_steps": 222}, 111) is None
