"""The layers and the Transformer on Keras' JAX backend, against TensorFlow's.

Keras picks its backend when it is first imported, so the JAX side runs in a
process of its own (`KERAS_BACKEND=jax`), and this one is TensorFlow's. A
model saved here loads there and gives the same logits; it learns a batch by
heart there with the package's loss, metrics and schedule; what it saves there
loads here and gives its logits; and the TensorFlow-only parts refuse it with a
clear error.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from conftest import randomize_position_tables
from test_memory import REUSE_FAULTS

import keras_transformer as kt

pytest.importorskip("jax")

JAX_SIDE = REUSE_FAULTS + textwrap.dedent(
    """
    import json, os, sys

    import keras
    import numpy as np

    import keras_transformer as kt
    from keras_transformer.errors import BackendError

    directory = sys.argv[1]
    batch = np.load(os.path.join(directory, "batch.npz"))
    x, y = (batch["source"], batch["target_in"]), batch["target_out"]
    model = keras.models.load_model(os.path.join(directory, "tensorflow.keras"))
    np.save(os.path.join(directory, "jax_logits.npy"), np.asarray(model(x)))
    for scheme in ("learned", "rotary", "relative", "relative_bias", "alibi", "queries_and_keys"):
        other = keras.models.load_model(os.path.join(directory, f"{scheme}.keras"))
        np.save(os.path.join(directory, f"jax_{scheme}_logits.npy"), np.asarray(other(x)))
    keras.utils.set_random_seed(0)
    model.compile(
        optimizer=kt.transformer_optimizer(32, warmup_steps=4, scale=0.1),
        loss=kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.1),
        metrics=[kt.MaskedAccuracy()],
    )
    before = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    history = model.fit(x, y, batch_size=8, epochs=30, shuffle=False, verbose=0)
    after = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    model.save(os.path.join(directory, "jax.keras"))
    np.save(os.path.join(directory, "jax_trained_logits.npy"), np.asarray(model(x)))
    errors = []
    for refused in [
        lambda: kt.Translator(model, None, None),
        lambda: kt.inference.greedy_search(model, batch["source"], 2, 3),
        lambda: model.compile(loss="mse", micro_batches=2),
        lambda: model.compile(loss="mse", r_drop=5.0),
    ]:
        try:
            refused()
        except (BackendError, ValueError) as error:
            errors.append(str(error))
    report = {"backend": keras.backend.backend(), "errors": errors, "faults": reuse_faults()}

    import contextlib, io
    from keras_transformer.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        status = main(["train", "--run-dir", os.path.join(directory, "run")])
    report["cli"] = {"status": status, "stderr": printed.getvalue()}
    print(json.dumps({**report, "before": before, "after": after, **history.history}))
    """
)


def on_jax(*args):
    """`python *args` with `KERAS_BACKEND=jax`."""
    return subprocess.run(
        [sys.executable, *args],
        env={**os.environ, "KERAS_BACKEND": "jax"},
        capture_output=True,
        text=True,
        timeout=600,
    )


def masked_accuracy(logits, labels):
    """The share of non-padding labels that are the logits' argmax, in NumPy."""
    kept = labels != 0
    return float(np.mean(logits.argmax(-1)[kept] == labels[kept]))


def test_a_transformer_moves_between_tensorflow_and_jax(tmp_path):
    keras.utils.set_random_seed(1)
    model = kt.Transformer(2, 32, 4, 64, 40, 50, dropout_rate=0.1)
    rng = np.random.default_rng(0)
    source = rng.integers(4, 40, (8, 7)).astype("int32")
    target = rng.integers(4, 50, (8, 7)).astype("int32")
    source[:, 5:], target[::2, 4:] = 0, 0  # padding, which the masks must hide
    x, y = (source, target[:, :-1]), target[:, 1:]
    np.savez(tmp_path / "batch.npz", source=source, target_in=x[1], target_out=y)
    expected = np.asarray(model(x))
    model.save(tmp_path / "tensorflow.keras")
    schemes = {
        "learned": kt.Transformer(2, 32, 4, 64, 40, 50, positions=kt.layers.Learned(8)),
        "rotary": kt.Transformer(2, 32, 4, 64, 40, 50, positions="rotary"),
        "relative": kt.Transformer(2, 32, 4, 64, 40, 50, positions=kt.layers.ShawRelative(3)),
        "relative_bias": kt.Transformer(2, 32, 4, 64, 40, 50, positions="relative_bias"),
        "alibi": kt.Transformer(2, 32, 4, 64, 40, 50, positions="alibi"),
        "queries_and_keys": kt.Transformer(
            2, 32, 4, 64, 40, 50, positions=kt.layers.Sinusoidal(placement="queries_and_keys")
        ),
    }
    for scheme, other in schemes.items():
        other(x)
        randomize_position_tables(other)
        other.save(tmp_path / f"{scheme}.keras")

    done = on_jax("-c", JAX_SIDE, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["backend"] == "jax"
    # The command line refuses the backend in one line, before it writes anything
    # (was `test_the_command_line_refuses_another_backend_in_one_line`, a process of its own).
    cli = report["cli"]
    assert cli["status"] == 2, cli["stderr"][-3000:]
    last_line = cli["stderr"].strip().splitlines()[-1]
    assert last_line.startswith("error: keras-transformer runs in TensorFlow graphs"), last_line
    assert "Traceback" not in cli["stderr"] and not (tmp_path / "run").exists()
    assert report["faults"] < 30, report["faults"]  # the package kept freed memory for reuse
    np.testing.assert_allclose(np.load(tmp_path / "jax_logits.npy"), expected, atol=1e-5)
    for scheme, other in schemes.items():
        on_jax_logits = np.load(tmp_path / f"jax_{scheme}_logits.npy")
        np.testing.assert_allclose(on_jax_logits, np.asarray(other(x)), atol=1e-5, err_msg=scheme)
    losses = report["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 2.0, losses
    trained_logits = np.load(tmp_path / "jax_trained_logits.npy")
    for logits, evaluated in [(expected, report["before"]), (trained_logits, report["after"])]:
        np.testing.assert_allclose(
            evaluated["masked_accuracy"], masked_accuracy(logits, y), atol=1e-6
        )
    assert report["after"]["masked_accuracy"] > 0.9, report  # the 36 tokens learnt

    trained = keras.models.load_model(tmp_path / "jax.keras")
    np.testing.assert_allclose(np.asarray(trained(x)), trained_logits, atol=1e-5)
    translator, greedy, micro_batches, r_drop = report["errors"]
    assert "Translator runs in TensorFlow graphs" in translator and "'jax'" in translator
    assert "Greedy search or sampling runs in TensorFlow graphs" in greedy
    assert "`micro_batches` needs the TensorFlow backend" in micro_batches
    assert "`r_drop` needs the TensorFlow backend" in r_drop and "r_drop=5.0" in r_drop
