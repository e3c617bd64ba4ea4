import csv
import functools
import importlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest
from interrupted_train import InterruptAt

import keras_transformer as kt
from keras_transformer.cli import main
from keras_transformer.config import DECODE_OPTIONS
from keras_transformer.inference import DecodeOptions, Translator
from keras_transformer.run import RunDirectory

pytestmark = pytest.mark.xdist_group("cli_run")

# A vocabulary per side (the README's main job, which CI runs too, shares one), so that
# every command and runtime below reads each side with its own SentencePiece model.
TINY = [
    "data.train_limit=300",
    "data.tokens_per_batch=1024",
    "tokenizer.vocab_size=120",
    "tokenizer.shared=false",
    "model.num_layers=1",
    "model.d_model=32",
    "model.num_heads=2",
    "model.dff=64",
    "train.warmup_steps=50",
    "decode.max_length=24",
    "decode.beam_size=2",
]


def cli(*args):
    return main([str(a) for a in args])


def tiny_train(run_dir, *extra):
    args = ["train", "--run-dir", run_dir]
    for override in TINY + list(extra):
        args += ["--set", override]
    return cli(*args)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "numbers"
    assert tiny_train(run_dir, "train.epochs=3", "train.keep_checkpoints=2") == 0
    return run_dir


@pytest.fixture
def run(trained_run, tmp_path):
    """A private copy of the trained run."""
    copy = tmp_path / "numbers"
    shutil.copytree(trained_run, copy)
    return copy


@pytest.fixture(scope="module")
def exports(trained_run, tmp_path_factory):
    """The trained run exported once by the command line: a SavedModel, a LiteRT file that
    translates any number of sentences a call and a CTranslate2 model (float32),
    `{format: directory}`; tests read them, never change them."""
    base = tmp_path_factory.mktemp("exports")
    paths = {"saved_model": base / "numbers_en_de" / "1"}
    assert (
        cli("export", "--run-dir", trained_run, "--base-dir", base, "--name", "numbers_en_de") == 0
    )
    for name in ["litert", "ctranslate2"]:
        pytest.importorskip({"litert": "ai_edge_litert"}.get(name, name))
        paths[name] = base / name
        args = ["--format", name, "--output", paths[name]]
        args += ["--batch-size", "any"] if name == "litert" else []
        assert cli("export", "--run-dir", trained_run, *args) == 0
    return paths


@pytest.fixture
def built_options(monkeypatch):
    """The `DecodeOptions` of each `Translator` the run commands build, in order."""
    translators = importlib.import_module("keras_transformer.run.translators")  # the module
    built = []

    def recording(*args, **kwargs):
        made = Translator(*args, **kwargs)
        built.append(made.options)
        return made

    monkeypatch.setattr(translators, "Translator", recording)
    return built


def config_options(run_dir, **changes):
    """The options of the run's `decode` section, read from its config file, with `changes`."""
    config = RunDirectory(run_dir).read_config()
    return DecodeOptions(**{name: config["decode"][name] for name in DECODE_OPTIONS}).replace(
        **changes
    )


def stdin_of(data):
    """A standard input holding the bytes `data`."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def test_train_writes_the_run_directory(run, capsys):
    for name in ["config.json", "model.keras", "trained.json", "metrics.csv"]:
        assert (run / name).is_file(), name
    for side in ["source", "target"]:
        assert (run / "tokenizers" / side / "sentencepiece.model").is_file(), side
    assert sorted(os.listdir(run / "checkpoints")) == [
        "epoch-002.weights.h5",
        "epoch-003.weights.h5",
    ]
    assert os.listdir(run / "logs")
    assert not (run / "backup").exists()  # removed once training finished
    with open(run / "metrics.csv") as f:
        assert [row["epoch"] for row in csv.DictReader(f)] == ["0", "1", "2"]
    assert tiny_train(run, "train.epochs=3", "train.keep_checkpoints=2") == 0
    assert "nothing to do" in capsys.readouterr().out


def test_evaluate_reports_sacrebleu_and_writes_hypotheses(run, capsys, tmp_path):
    """Into the file `--output` names, which is the file itself for one beam size."""
    output = tmp_path / "greedy.txt"
    assert cli("evaluate", "--run-dir", run, "--beam-size", 1, "--output", output) == 0
    out = capsys.readouterr().out
    assert "BLEU (cased)" in out and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in out
    assert "chrF" in out and "BLEU (lowercased)" in out and "BLEU (intl, lc)" in out
    assert json.loads(out.splitlines()[-1])["hypotheses"] == str(output)
    assert not (tmp_path / "greedy.beam1.txt").exists()
    with open(output, encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 1000


def test_translation_scores_are_sacrebleus_with_each_tokenization():
    import sacrebleu

    from keras_transformer.run import score_translations

    hypotheses = ["„Ein Hund“ läuft—schnell.", "Zwei Kinder spielen im Park."]
    references = ["„Ein Hund“ rennt—schnell.", "zwei Kinder spielen im Garten."]
    scores = score_translations(hypotheses, references)
    for key, options in [
        ("bleu", {}),
        ("bleu_lowercase", {"lowercase": True}),
        ("bleu_intl", {"tokenize": "intl"}),
        ("bleu_intl_lowercase", {"tokenize": "intl", "lowercase": True}),
    ]:
        expected = sacrebleu.corpus_bleu(hypotheses, [references], **options).score
        assert scores[key] == round(expected, 2), key
    assert len({scores[k] for k in ["bleu", "bleu_lowercase", "bleu_intl"]}) == 3
    assert (
        "tok:intl" in scores["signature_intl_lowercase"]
        and "case:lc" in (scores["signature_intl_lowercase"])
    )


def test_evaluate_shows_several_beam_sizes_side_by_side(run, capsys, built_options):
    """Also: the flags given and the run's `decode` section make one `DecodeOptions`,
    which each beam size's translator takes."""
    args = ["--split", "val", "--beam-size", "1,2", "--alpha", "0.25"]
    assert cli("evaluate", "--run-dir", run, *args) == 0
    assert built_options == [config_options(run, beam_size=k, alpha=0.25) for k in (1, 2)]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["beam", "1", "beam", "2"]
    results = [json.loads(line) for line in lines if line.startswith("{")]
    assert [r["beam_size"] for r in results] == [1, 2]
    bleu_row = next(line for line in lines if line.startswith("BLEU (cased)"))
    assert bleu_row.split()[2:] == [f"{r['bleu']:.2f}" for r in results]
    for result in results:
        with open(result["hypotheses"], encoding="utf-8") as f:
            hypotheses = f.read().splitlines()
        assert len(hypotheses) == 1000 and result["hypotheses"].endswith(
            f"val.best.beam{result['beam_size']}.hyp.txt"
        )
    with pytest.raises(SystemExit) as exit_info:
        cli("evaluate", "--run-dir", run, "--beam-size", "1,0")
    assert exit_info.value.code == 2
    assert "beam sizes are positive integers" in capsys.readouterr().err


def test_translate_export_and_the_exported_model_agree(run, exports, tmp_path, capsys, monkeypatch):
    sentences = ["twenty-one", "", "nine hundred and ninety-nine thousand", "  "]
    assert cli("translate", "--run-dir", run, *sentences) == 0
    from_run = capsys.readouterr().out.splitlines()
    assert len(from_run) == 4 and from_run[1] == from_run[3] == ""
    assert cli("translate", "--run-dir", run, "--xla", *sentences) == 0  # compiled
    assert capsys.readouterr().out.splitlines() == from_run

    version = exports["saved_model"]
    assert (version / "saved_model.pb").is_file()
    monkeypatch.setattr(sys, "stdin", open_lines(tmp_path, sentences))
    assert cli("translate", "--saved-model", version) == 0
    assert capsys.readouterr().out.splitlines() == from_run


def test_ctranslate2_export_translates_as_the_run_does_greedily(run, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    from keras_transformer.export import CTranslate2Translator

    sentences = ["twenty-one", "nine hundred and ninety-nine thousand", "seven"]
    assert cli("translate", "--run-dir", run, "--beam-size", "1", *sentences) == 0
    from_run = capsys.readouterr().out.splitlines()
    base = tmp_path / "saved_models"
    args = ["export", "--run-dir", run, "--base-dir", base, "--format", "ctranslate2"]
    assert cli(*args, "--quantization", "int8") == 0
    directory = base / "numbers-ctranslate2-int8"
    assert f"exported: {directory}" in capsys.readouterr().out
    assert json.loads((directory / "config.json").read_text())["add_source_eos"]
    assert cli(*args, "--output", tmp_path / "f32", "--patience", "2") == 0
    assert CTranslate2Translator(tmp_path / "f32", beam_size=1)(sentences) == from_run
    assert CTranslate2Translator(tmp_path / "f32").patience == 2  # the exported search's
    assert cli(*args, "--quantization", "int8") == 2  # the directory exists
    assert "exists" in capsys.readouterr().err
    assert cli("export", "--run-dir", run, "--quantization", "int8") == 2
    assert "--format ctranslate2" in capsys.readouterr().err
    assert cli(*args, "--output", tmp_path / "b", "--batch-size", "any") == 2
    assert "error: --batch-size is for --format litert." in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(*args, "--batch-size", "some")
    assert "give a positive integer. Received: 'some'" in capsys.readouterr().err


def test_translate_prints_n_best_with_scores_from_prefixes_samples_and_ensembles(
    run, tmp_path, capsys
):
    sentences = ["twenty-one", "three hundred and four", "seventeen"]
    assert cli("translate", "--run-dir", run, "--beam-size", 4, *sentences) == 0
    best = capsys.readouterr().out.splitlines()

    assert cli("translate", "--run-dir", run, "--beam-size", 4, "--n-best", 3, *sentences) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    for i in range(3):
        scores = [float(r[1]) for r in rows[3 * i : 3 * i + 3]]
        assert scores == sorted(scores, reverse=True) and rows[3 * i][2] == best[i]

    prefixes = tmp_path / "prefixes.txt"
    prefixes.write_text("seven\n\nthree\n", encoding="utf-8")
    assert (
        cli("translate", "--run-dir", run, "--beam-size", 4, "--prefix", prefixes, *sentences) == 0
    )
    started = capsys.readouterr().out.splitlines()
    assert started[0].startswith("seven") and started[2].startswith("three")
    assert started[1] == best[1]

    sampled = []
    for _ in range(2):
        args = ["--sample", "--temperature", "1.5", "--top-p", "0.9", "--seed", "7"]
        assert cli("translate", "--run-dir", run, *args, *sentences) == 0
        sampled.append(capsys.readouterr().out)
    assert sampled[0] == sampled[1] and len(sampled[0].splitlines()) == 3

    twin = tmp_path / "twin"
    shutil.copytree(run, twin)
    both = ["--run-dir", run, "--run-dir", twin, "--beam-size", 4]
    assert cli("translate", *both, *sentences) == 0
    assert capsys.readouterr().out.splitlines() == best
    test = tmp_path / "test.de"
    test.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    own = {"source": str(test), "reference": str(test), "beam_size": 4}
    result = kt.run.evaluate([str(run), str(twin)], **own)  # filed in the first run
    with open(result["hypotheses"], encoding="utf-8") as f:
        assert f.read().splitlines() == best and result["hypotheses"].startswith(str(run))

    changed = sorted(path for path in (twin / "tokenizers").rglob("*") if path.is_file())[0]
    changed.write_bytes(changed.read_bytes() + b"\n")
    assert cli("translate", *both, *sentences) == 2
    assert "have different tokenizers" in capsys.readouterr().err

    assert cli("translate", "--saved-model", tmp_path, "--n-best", 2, "x") == 2
    assert "need --run-dir" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:  # argparse's exit, as for every bad flag
        cli("translate", "--run-dir", run, "--sample", "--top-p", 0, "x")
    assert exit_info.value.code == 2
    assert "argument --top-p: `top_p` must be a number in (0, 1]" in capsys.readouterr().err
    assert cli("translate", "--run-dir", run, "--beam-size", 2, "--n-best", 3, "x") == 2
    assert "`n_best` can be at most `beam_size`" in capsys.readouterr().err


def test_translate_takes_length_options_and_reports_cut_sources(
    run, capsys, monkeypatch, built_options
):
    long = "one two three " * 100  # over the translator's 256 source tokens
    monkeypatch.setattr(sys, "stdin", stdin_of(f"seven\n{long}\n\nzwei\n{long}\n".encode()))
    args = ["--beam-size", 2, "--max-length-a", 0, "--max-length-b", 3]
    assert cli("translate", "--run-dir", run, *args, "--n-best", 2) == 0
    changes = dict(beam_size=2, max_length_a=0.0, max_length_b=3, n_best=2)
    assert built_options == [config_options(run, **changes)]
    out, err = capsys.readouterr()
    assert "2 of 5 lines are longer than the 256 source tokens" in err and "line 2, 5" in err
    rows = [line.split("\t") for line in out.splitlines()]
    assert [int(r[0]) for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert all(len(r[2].split()) <= 3 for r in rows) and rows[4][2] == ""
    for bad in (["--alpha", "nan"], ["--min-length", "-1"], ["--patience", "0.5"]):
        with pytest.raises(SystemExit) as exit_info:
            cli("translate", "--run-dir", run, *bad, "x")
        assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "`alpha` must be a finite number. Received: alpha=nan" in err
    assert (
        "`min_length` must be an integer >= 0" in err and "`patience` must be a number >= 1" in err
    )
    assert cli("translate", "--run-dir", run, "--min-length", 30, "x") == 2
    assert "`min_length` counts the tokens before EOS" in capsys.readouterr().err


def test_translate_keeps_the_phrases_of_a_constraints_file(run, tmp_path, capsys):
    phrases = tmp_path / "constraints.txt"
    phrases.write_text("eight\n\nseven\thundred\n", encoding="utf-8")
    sentences = ["twenty-one", "seventeen", ""]
    assert cli("translate", "--run-dir", run, "--beam-size", 2, *sentences) == 0
    free = capsys.readouterr().out.splitlines()
    args = ["translate", "--run-dir", run, "--beam-size", 2, "--constraints", phrases]
    assert cli(*args, *sentences) == 0
    kept = capsys.readouterr().out.splitlines()
    assert "eight" in kept[0] and kept[1] == free[1]
    assert "seven" in kept[2] and "hundred" in kept[2]
    assert cli(*args, "one") == 2  # three rows of phrases for one sentence
    assert "Give one row of constraints per line" in capsys.readouterr().err
    phrases.write_text("one " * 30 + "\n", encoding="utf-8")
    assert cli(*args, "one") == 2
    assert "constraints of sentence 0 need" in capsys.readouterr().err


def test_score_prints_the_teacher_forced_log_probability(run, tmp_path, capsys):
    import keras_transformer as kt
    from keras_transformer import run as runs

    sources = ["twenty-one", "three hundred and four", ""]
    targets = ["einundzwanzig", "dreihundertvier", "null"]
    source_file, target_file = tmp_path / "source.txt", tmp_path / "target.txt"
    source_file.write_text("\n".join(sources) + "\n", encoding="utf-8")
    target_file.write_text("\n".join(targets) + "\n", encoding="utf-8")
    assert cli("score", "--run-dir", run, "--source", source_file, "--target", target_file) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "log_prob\ttokens\tlog_prob_per_token"
    printed = np.array([[float(v) for v in line.split("\t")] for line in lines[1:]])

    # The reference: the masked cross-entropy of the same pairs (padding and BOS
    # blocked as in the searches) times the number of target tokens.
    _, model, source_tokenizer, tokenizer = runs.load_run(run)
    assert source_tokenizer.model_proto != tokenizer.model_proto  # a vocabulary per side
    loss = kt.MaskedSparseCategoricalCrossentropy(label_smoothing=0.0, reduction="sum")
    for (log_prob, tokens, per_token), source, target in zip(
        printed, sources, targets, strict=True
    ):
        source_ids = source_tokenizer.tokenize([source]).to_list()[0] + [source_tokenizer.eos_id]
        target_ids = tokenizer.tokenize([target]).to_list()[0]
        target_in = np.array([[tokenizer.bos_id] + target_ids])
        target_out = np.array([target_ids + [tokenizer.eos_id]])
        logits = model((np.array([source_ids]), target_in)).numpy()
        logits[..., [0, tokenizer.bos_id]] = -1e9
        nll = float(loss(target_out, logits))
        assert tokens == len(target_ids) + 1
        np.testing.assert_allclose(log_prob, -nll, atol=2e-4)
        np.testing.assert_allclose(per_token, log_prob / tokens, atol=1e-4)

    target_file.write_text("eins\n", encoding="utf-8")
    assert cli("score", "--run-dir", run, "--source", source_file, "--target", target_file) == 2
    assert "has 3 lines but" in capsys.readouterr().err


def optimizer_steps(run, checkpoint):
    """The optimizer's step count saved in an epoch checkpoint of `run`."""
    model = keras.models.load_model(run / "model.keras")
    model.optimizer.build(model.trainable_variables)
    model.load_weights(run / "checkpoints" / checkpoint)
    return int(model.optimizer.iterations.numpy())


def test_train_with_more_epochs_goes_on_from_the_last_epoch_checkpoint(run, capsys):
    steps = optimizer_steps(run, "epoch-003.weights.h5")
    assert tiny_train(run, "train.epochs=4", "train.keep_checkpoints=2") == 0
    assert "from epoch 4 to epoch 4" in capsys.readouterr().out
    assert metrics_epochs(run) == ["0", "1", "2", "3"]
    assert sorted(os.listdir(run / "checkpoints"))[-1] == "epoch-004.weights.h5"
    # The optimizer went on counting: the warm-up schedule and Adam's state carry over.
    assert optimizer_steps(run, "epoch-004.weights.h5") == steps * 4 // 3
    assert json.loads((run / "trained.json").read_text())["epochs"] == 4
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 4
    assert not (run / "backup").exists()

    assert cli("train", "--run-dir", run) == 0  # the run's own configuration
    assert "nothing to do" in capsys.readouterr().out
    for change in ["train.epochs=3", "model.dff=128"]:
        assert tiny_train(run, "train.epochs=4", "train.keep_checkpoints=2", change) == 2
        assert "only a larger train.epochs" in capsys.readouterr().err
    newest = run / "checkpoints" / "epoch-004.weights.h5"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    assert tiny_train(run, "train.epochs=5", "train.keep_checkpoints=2") == 2
    assert f"{newest} is damaged" in capsys.readouterr().err
    assert json.loads((run / "trained.json").read_text())["epochs"] == 4  # as it was
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 4


def test_a_finished_multi_worker_run_is_not_trained_for_longer(run, monkeypatch, capsys):
    from keras_transformer.run.directory import RunDirectory
    from keras_transformer.training.strategy import WorkerRole

    train_module = importlib.import_module("keras_transformer.run.train")

    chief = WorkerRole(is_chief=True, index=0, count=2)
    place = train_module.Place(None, chief, RunDirectory(str(run)))
    monkeypatch.setattr(train_module, "find_place", lambda run_dir, t: place)
    assert tiny_train(run, "train.epochs=4", "train.keep_checkpoints=2") == 2
    assert "training it for longer takes one process" in capsys.readouterr().err
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 3


def open_lines(tmp_path, lines):
    path = tmp_path / "stdin.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return open(path, encoding="utf-8")


def test_average_is_the_mean_of_the_last_checkpoints(run):
    assert cli("average", "--run-dir", run, "--last", 2) == 0
    averaged = keras.models.load_model(run / "averaged.keras")
    expected = []
    for name in ["epoch-002.weights.h5", "epoch-003.weights.h5"]:
        model = keras.models.load_model(run / "model.keras")
        model.load_weights(run / "checkpoints" / name)
        expected.append(model.get_weights())
    for got, a, b in zip(averaged.get_weights(), *expected, strict=True):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6)
    assert cli("translate", "--run-dir", run, "--checkpoint", "averaged", "einundzwanzig") == 0


HERE = os.path.dirname(os.path.abspath(__file__))


def killed_train(run_dir, epoch, batch, *extra):
    """Runs `train` in a new process that kills itself (SIGKILL) after batch `batch` of
    `epoch`."""
    command = [sys.executable, os.path.join(HERE, "interrupted_train.py")]
    command += ["--epoch", str(epoch), "--batch", str(batch), "--action", "kill", "--"]
    return subprocess.run(
        command + train_arguments(run_dir, *extra), capture_output=True, text=True, timeout=600
    )


def train_here(run_dir, capsys, *extra, stop=None):
    """Runs `train` in this process, as `keras-transformer train` runs it; with `stop`,
    `(epoch, batch, action)`, it stops after that batch as `interrupted_train.py` stops it
    ("int": SIGINT, as Ctrl-C sends it; "nan": every weight NaN). Returns a
    `CompletedProcess` with what it printed."""
    arguments = train_arguments(run_dir, *extra)
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        if stop is not None:
            stopped = functools.partial(kt.run.train, callbacks=[InterruptAt(*stop)])
            patch.setattr(kt.run, "train", stopped)
        code = cli(*arguments)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(arguments, code, out, err)


def train_arguments(run_dir, *extra):
    arguments = ["train", "--run-dir", str(run_dir)]
    for override in TINY + ["train.epochs=3", *extra]:
        arguments += ["--set", override]
    return arguments


def stopped_at_step(process):
    return int(re.search(r"interrupted at step (\d+)", process.stdout).group(1))


def metrics_epochs(run_dir):
    with open(run_dir / "metrics.csv") as f:
        return [row["epoch"] for row in csv.DictReader(f)]


def test_a_stopped_then_killed_run_resumes_from_its_newest_readable_backup(tmp_path, capsys):
    """Ctrl-C stops a run cleanly and `train` resumes it where it stopped; the resumed run,
    killed mid-epoch (SIGKILL), resumes losing at most `backup_every_steps` steps; with its
    newest backup cut short (a kill mid-write), it falls back to the one before.

    One run, stopped, resumed and killed, then copied, serves the three cases, which were
    two tests (`test_ctrl_c_stops_the_run_and_train_resumes_it` and
    `test_a_killed_run_resumes_from_its_newest_readable_backup`, itself two tests before).
    Only the killed run runs in a process of its own; the others run in this one."""
    run_dir, truncated = tmp_path / "numbers", tmp_path / "truncated"
    every = 2
    backups_every = f"train.backup_every_steps={every}"
    # Ctrl-C after batch 2 of epoch 2; resumed, then killed after batch 3 of epoch 3.
    stopped = train_here(run_dir, capsys, backups_every, stop=(2, 2, "int"))
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    assert "resume" in stopped.stderr and "Traceback" not in stopped.stderr
    assert not (run_dir / "trained.json").exists()
    assert metrics_epochs(run_dir) == ["0"]

    killed = killed_train(run_dir, 3, 3, backups_every)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert "resuming from the backup" in killed.stdout and "(epoch 2)" in killed.stdout
    assert metrics_epochs(run_dir) == ["0", "1"]  # epoch 0 was not trained twice
    step = stopped_at_step(killed)
    shutil.copytree(run_dir, truncated)

    resumed = train_here(run_dir, capsys, backups_every)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    restored = int(re.search(r"resuming from the backup at step (\d+)", resumed.stdout).group(1))
    assert step - every < restored <= step, (step, restored)
    assert metrics_epochs(run_dir) == ["0", "1", "2"]
    assert json.loads((run_dir / "trained.json").read_text())["epochs"] == 3
    assert not (run_dir / "backup").exists()

    backups = sorted((truncated / "backup").glob("step-*"))
    assert len(backups) == 2
    assert int(backups[0].name[5:]) + every == int(backups[1].name[5:]) == restored, backups
    newest = backups[-1] / "state.weights.h5"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    resumed = train_here(truncated, capsys, backups_every)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"backup {backups[-1]} is unreadable" in resumed.stdout
    assert f"resuming from the backup at step {int(backups[0].name[5:])}" in resumed.stdout
    assert "Traceback" not in resumed.stderr
    assert metrics_epochs(truncated) == ["0", "1", "2"]


def test_a_loss_that_turns_nan_stops_the_run_and_names_the_step(tmp_path, capsys):
    run_dir = tmp_path / "numbers"
    diverged = train_here(run_dir, capsys, "train.backup_every_steps=1", stop=(2, 2, "nan"))
    assert diverged.returncode == 2, diverged.stderr[-2000:]
    step = stopped_at_step(diverged)
    assert f"error: the training loss became nan at step {step + 1}" in diverged.stderr
    assert "Traceback" not in diverged.stderr
    assert not (run_dir / "trained.json").exists()
    newest = sorted((run_dir / "backup").glob("step-*"))[-1]
    assert newest.name == f"step-{step:09d}"  # the last good state, not the NaN one


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["train", "--run-dir", "{tmp}/r", "--config", "{tmp}/missing.yaml"],
            "Config file not found",
        ),
        (
            ["train", "--run-dir", "{tmp}/r", "--set", "train.epoch=3"],
            "Unknown config key 'train.epoch'. Did you mean 'train.epochs'?",
        ),
        (
            ["train", "--run-dir", "{tmp}/r", "--set", "model.d_model=big"],
            "'model.d_model' must be of type int",
        ),
        (
            ["train", "--run-dir", "{tmp}/r", "--set", "train.cooldown_epochs=7"],
            "train.cooldown_epochs must be at most train.epochs",
        ),
        (
            ["train", "--run-dir", "{tmp}/r", "--set", "data.tokens_per_batch=1"],
            "data.tokens_per_batch must be at least data.max_length",
        ),
        (["evaluate", "--run-dir", "{tmp}/nothing"], "is not a run directory"),
        (["translate", "--saved-model", "{tmp}", "hello"], "No SavedModel"),
        (["translate", "--saved-model", "{tmp}", "--beam-size", "2", "x"], "need --run-dir"),
    ],
)
def test_user_errors_end_with_one_clear_line(args, message, tmp_path, capsys):
    assert cli(*[a.format(tmp=tmp_path) for a in args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_run_errors_name_the_problem(run, tmp_path, capsys):
    assert tiny_train(run, "train.epochs=9", "model.dff=128") == 2
    assert "model.dff: 64 -> 128" in capsys.readouterr().err
    assert cli("evaluate", "--run-dir", run, "--checkpoint", "averaged") == 2
    assert "run average first" in capsys.readouterr().err

    other = tmp_path / "other"
    assert (
        tiny_train(other, "train.epochs=1", "tokenizer.vocab_size=60", "data.train_limit=50") == 0
    )
    shutil.rmtree(run / "tokenizers")
    shutil.copytree(other / "tokenizers", run / "tokenizers")
    assert cli("translate", "--run-dir", run, "one") == 2
    assert "they are from different runs" in capsys.readouterr().err

    empty = tmp_path / "empty"
    shutil.copytree(run, empty)
    shutil.rmtree(empty / "checkpoints")
    assert cli("average", "--run-dir", empty) == 2
    assert "no epoch checkpoints" in capsys.readouterr().err


def test_a_run_whose_start_failed_before_its_data_loaded_takes_a_changed_config(tmp_path, capsys):
    run_dir = tmp_path / "run"
    for missing in ("missing", "also_missing"):
        data = ["--set", "data.corpus=files", "--set", f"data.directory={tmp_path / missing}"]
        assert cli("train", "--run-dir", run_dir, *data) == 2
        err = capsys.readouterr().err
        assert f"{missing}' (the directory does not exist)" in err, err
    saved = json.loads((run_dir / "config.json").read_text())
    assert saved["data"]["directory"] == str(tmp_path / "also_missing")
    assert os.listdir(run_dir) == ["config.json"]


def test_every_model_argument_can_be_set_from_the_command_line(tmp_path):
    from keras_transformer.config import DEFAULTS, load_config
    from keras_transformer.layers import ShawRelative
    from keras_transformer.model_section import model_arguments, model_section

    chosen = {
        "num_layers": 2,
        "d_model": 16,
        "num_heads": 2,
        "dff": 24,
        "dropout_rate": 0.2,
        "attention_dropout_rate": 0.1,
        "norm_first": True,
        "layer_norm_epsilon": 1e-5,
        "activation": "gelu",
        "positional_encoding_layout": "concatenated",
        "shared_embeddings": "all",
        "num_encoder_layers": 3,
        "num_decoder_layers": 1,
        "positions": "relative",
        "max_relative_position": 4,
        "start_from_zero_embedding": True,
    }
    with_a_table = {"positions": "learned", "max_positions": 80, "add_positions": "every_layer"}
    assert chosen.keys() | with_a_table.keys() == DEFAULTS["model"].keys()
    for name, value in {**chosen, **with_a_table}.items():
        assert value != DEFAULTS["model"][name], name
    overrides = [f"model.{k}={str(v).lower()}" for k, v in chosen.items()]
    overrides.append("tokenizer.shared=true")  # shared_embeddings "all" needs one vocabulary
    run_dir = tmp_path / "run"
    assert tiny_train(run_dir, "train.epochs=1", "data.train_limit=64", *overrides) == 0
    trained = keras.models.load_model(run_dir / "model.keras")
    expected = model_arguments({**DEFAULTS["model"], **chosen})
    assert expected["positions"] == ShawRelative(4)
    assert expected["num_layers"] == (3, 1)
    assert model_arguments(model_section(trained)) == expected
    table = load_config(overrides=[f"model.{k}={v}" for k, v in with_a_table.items()])["model"]
    assert {k: table[k] for k in with_a_table} == with_a_table  # a learned table's keys


def test_config_file_sets_options(tmp_path):
    from keras_transformer.config import load_config

    path = tmp_path / "config.yaml"
    path.write_text("model:\n  d_model: 64\ntrain:\n  label_smoothing: 0\n")
    config = load_config(str(path), ["train.epochs=2"])
    assert config["model"]["d_model"] == 64 and config["train"]["epochs"] == 2
    assert config["train"]["label_smoothing"] == 0.0 and config["model"]["num_layers"] == 3


def test_tensorflow_start_up_lines_show_only_with_verbose(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    command = [sys.executable, "-m", "keras_transformer"]
    missing = ["translate", "--saved-model", str(tmp_path), "eins"]
    quiet = subprocess.run(command + missing, capture_output=True, text=True, env=env)
    verbose = subprocess.run(
        command + ["--verbose"] + missing, capture_output=True, text=True, env=env
    )
    for result in (quiet, verbose):  # real errors still show
        assert result.returncode == 2 and "error: No SavedModel" in result.stderr
    assert quiet.stderr.startswith("error: ") and "0000 " not in quiet.stderr
    assert re.search(r"^[IWE]0000 ", verbose.stderr, re.M), verbose.stderr


def test_train_streams_a_sharded_corpus_and_samples_its_tokenizer_text(tmp_path, monkeypatch):
    from keras_transformer.datasets import numbers_corpus
    from keras_transformer.run import directory

    data = tmp_path / "data"
    data.mkdir()
    train, val = numbers_corpus("train", limit=300), numbers_corpus("val", limit=40)
    for name, part in [("train-000", train[:200]), ("train-001", train[200:]), ("val", val)]:
        for lang, lines in [("de", part.sources), ("en", part.targets)]:
            (data / f"{name}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    trained_on = []

    def recording_train_tokenizer(kind, texts, size):
        trained_on.append(list(texts))
        return train_tokenizer(kind, texts, size)

    train_tokenizer = directory.train_tokenizer
    monkeypatch.setattr(directory, "train_tokenizer", recording_train_tokenizer)
    overrides = ["data.corpus=files", f"data.directory={data}", "tokenizer.sample_size=250"]
    overrides.append("tokenizer.shared=true")  # one vocabulary, trained on both sides' text
    assert tiny_train(tmp_path / "run", *overrides, "train.epochs=1") == 0
    assert len(trained_on) == 1 and len(trained_on[0]) == 250  # of 600 sentences
    assert set(trained_on[0]) <= set(train.sources + train.targets)
    assert metrics_epochs(tmp_path / "run") == ["0"]


# Inputs a user can give any runtime, and what every runtime must do with them: a list of
# outputs ("" where the output must be empty, None for any translation), or the words of
# the error that must name the problem.
HOSTILE_INPUTS = [
    ("a batch of one", [b"seventeen"], [None]),
    ("no lines", [], []),
    ("empty and whitespace-only lines", [b"", b"  ", b"\t"], ["", "", ""]),
    ("a NUL inside a line", [b"sieb\x00zehn"], [None]),
    ("65 lines, one over the source limit", [b"seven"] * 64 + [b"one two " * 200], [None] * 65),
    ("a byte that is not UTF-8", [b"seven", b"sieb\xffzehn"], "not UTF-8"),
]


# The runtimes that take tensors, which no line-by-line reader has checked.
GRAPHS = ["SavedModel serving_default", "Translator on a tensor"]


def runtimes(run_dir, exports, monkeypatch, capsys):
    """`{name: translate}`: each runtime as a function from byte lines to output lines that
    raises `UserError` or TensorFlow's `InvalidArgumentError` on bad input."""
    import tensorflow as tf

    from keras_transformer import run
    from keras_transformer.errors import UserError
    from keras_transformer.export import CTranslate2Translator, LiteRTTranslator
    from keras_transformer.inference import translate_lines

    def command(*source):
        def translate(lines):
            monkeypatch.setattr(sys, "stdin", stdin_of(b"".join(line + b"\n" for line in lines)))
            code = cli("translate", *source)
            out, err = capsys.readouterr()
            if code == 2:
                assert err.startswith("error: ") and err.count("\n") == 1, err
                raise UserError(err)
            assert code == 0 and "Traceback" not in err, err
            return out.splitlines()

        return translate

    translator = run.make_translator(run_dir, jit_compile=False)  # the reference: no XLA
    serve = tf.saved_model.load(str(exports["saved_model"])).signatures["serving_default"]
    litert = LiteRTTranslator(exports["litert"])
    ctranslate2 = CTranslate2Translator(exports["ctranslate2"])
    return {
        "Translator": lambda lines: translate_lines(translator, lines),
        "Translator on a tensor": lambda lines: [
            text.decode() for text in translator(tf.constant(lines, tf.string)).numpy()
        ],
        "translate --run-dir": command("--run-dir", run_dir),
        "translate --saved-model": command("--saved-model", exports["saved_model"]),
        "translate --litert": command("--litert", exports["litert"]),
        "SavedModel serving_default": lambda lines: [
            text.decode() for text in serve(inputs=tf.constant(lines, tf.string))["outputs"].numpy()
        ],
        "LiteRTTranslator": litert,
        "CTranslate2Translator": ctranslate2,
    }


def test_every_runtime_takes_the_same_hostile_inputs(trained_run, exports, monkeypatch, capsys):
    import tensorflow as tf

    from keras_transformer.errors import UserError

    outputs = {}
    for name, translate in runtimes(trained_run, exports, monkeypatch, capsys).items():
        for what, lines, expected in HOSTILE_INPUTS:
            if isinstance(expected, str) and name in GRAPHS:
                # A tensor's bad bytes are the unknown piece: a batch of requests must not
                # fail for one of them; every other runtime refuses the line.
                outputs[name, what] = translate(lines)
                assert len(outputs[name, what]) == len(lines), (name, what)
                continue
            if isinstance(expected, str):
                with pytest.raises((UserError, tf.errors.InvalidArgumentError), match=expected):
                    translate(lines)
                continue
            got = translate(lines)
            assert len(got) == len(expected), (name, what)
            for output, wanted in zip(got, expected, strict=True):
                assert isinstance(output, str) and output == (output if wanted is None else wanted)
            outputs[name, what] = got
    # The same model and search (the package's graph) give the same translations.
    for what, _, expected in HOSTILE_INPUTS:
        if isinstance(expected, str):
            assert outputs[GRAPHS[0], what] == outputs[GRAPHS[1], what], what
            continue
        for name in ["translate --run-dir", "translate --saved-model", *GRAPHS]:
            assert outputs[name, what] == outputs["Translator", what], (name, what)


def test_phrases_and_prefixes_the_vocabulary_cannot_write_are_refused(
    trained_run, exports, tmp_path, capsys
):
    import tensorflow as tf

    from keras_transformer import run

    translator = run.make_translator(trained_run)
    unknown = "☃☃"  # no piece of the numbers vocabulary: it would be written "⁇"
    with pytest.raises(ValueError, match="constraint phrase '☃☃' of sentence 1 has characters"):
        translator.translate(["seven", "eight"], constraints=[["seven"], ["eight", unknown]])
    with pytest.raises(ValueError, match="prefix '☃☃' of sentence 0 has characters"):
        translator.translate(["seven"], prefixes=[unknown])
    if "ctranslate2" in exports:
        from keras_transformer.export import CTranslate2Translator

        with pytest.raises(ValueError, match="prefix '☃☃' of sentence 1 has characters"):
            CTranslate2Translator(exports["ctranslate2"]).translate(
                ["seven", "eight"], prefixes=["", unknown]
            )
    with pytest.raises(ValueError, match="a list of phrases per sentence"):
        translator.translate(["seven"], constraints=["seven"])  # not a row of phrases
    signatures = tf.saved_model.load(str(exports["saved_model"])).signatures
    with pytest.raises(tf.errors.InvalidArgumentError, match="constraint phrase has characters"):
        signatures["translate_constrained"](
            inputs=tf.constant(["seven"]), constraints=tf.constant([[unknown]])
        )

    phrases = tmp_path / "constraints.txt"
    for text, message in [
        (f"{unknown}\n", "has characters the target vocabulary lacks"),
        ("", "Give one row of constraints per line"),
    ]:
        phrases.write_text(text, encoding="utf-8")
        assert cli("translate", "--run-dir", trained_run, "--constraints", phrases, "seven") == 2
        assert message in capsys.readouterr().err
    assert cli("translate", "--run-dir", trained_run, "--shortlist", 3, "seven") == 2
    assert "Give a size of at least" in capsys.readouterr().err


def test_damaged_exports_and_missing_packages_are_named(exports, tmp_path, capsys, monkeypatch):
    damaged = {
        "litert": ["translator.tflite", "source.model"],
        "ctranslate2": ["model.bin", "target_tokenizer/sentencepiece.model"],
    }
    for name, files in damaged.items():
        for file in files:
            copy = tmp_path / f"{name}-{file.replace('/', '-')}"
            shutil.copytree(exports[name], copy)
            if not (copy / file).is_file():
                pytest.fail(f"{name} export has no {file}: {sorted(os.listdir(copy))}")
            (copy / file).write_bytes((copy / file).read_bytes()[:100])
            if name == "litert":
                assert cli("translate", "--litert", copy, "seven") == 2
                err = capsys.readouterr().err
            else:
                from keras_transformer.errors import DamagedFileError
                from keras_transformer.export import CTranslate2Translator

                with pytest.raises(DamagedFileError) as error:
                    CTranslate2Translator(copy)
                err = str(error.value)
            assert f"{file} is damaged" in err and "Export the run again" in err, err
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    assert cli("translate", "--litert", exports["litert"], "seven") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and 'pip install "keras-transformer-nmt[litert]"' in err


def test_plot_draws_the_runs_curves_and_the_learning_rate_it_trained_with(trained_run, tmp_path):
    from keras_transformer.config import read_saved_config
    from keras_transformer.run.plots import learning_rates

    with open(trained_run / "trained.json") as f:
        steps_per_epoch = json.load(f)["steps_per_epoch"]
    with open(trained_run / "metrics.csv") as f:
        val_losses = [float(row["val_loss"]) for row in csv.DictReader(f)]
    best = keras.models.load_model(trained_run / "model.keras")  # saved after its epoch
    assert int(best.optimizer.iterations) == (np.argmin(val_losses) + 1) * steps_per_epoch
    steps, rates = learning_rates(
        read_saved_config(trained_run / "config.json"), steps_per_epoch, 3
    )
    s = np.arange(1, 3 * steps_per_epoch + 1)  # the paper's formula, d_model 32, warm-up 50
    np.testing.assert_allclose(rates, 32**-0.5 * np.minimum(s**-0.5, s * 50**-1.5), rtol=1e-6)
    assert steps == list(s)
    assert cli("plot", "--run-dir", trained_run, "--output", tmp_path / "run.svg") == 0
    assert "learning rate" in (tmp_path / "run.svg").read_text(encoding="utf-8")


def test_plot_attention_draws_the_cross_attention_of_the_greedy_translation(trained_run, tmp_path):
    from keras_transformer.inference import greedy_search
    from keras_transformer.run import make_translator
    from keras_transformer.run.plots import attention_map

    source_pieces, output_pieces, weights = attention_map(trained_run, "siebzehn")
    translator = make_translator(trained_run, beam_size=1)
    source, target = translator.source_tokenizer, translator.target_tokenizer
    source_ids = translator.source_ids(["siebzehn"])
    assert source_pieces == [source.pieces[int(i)] for i in source_ids[0]]
    token_ids, _ = greedy_search(  # the same search without collecting attention
        translator.model, source_ids, target.bos_id, target.eos_id, translator.options.max_length
    )
    assert output_pieces == [target.pieces[int(i)] for i in token_ids[0] if int(i) != 0]
    assert weights.shape == (len(output_pieces), len(source_pieces))
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)  # a softmax over the source
    path = tmp_path / "attention.svg"
    assert cli("plot", "--run-dir", trained_run, "--attention", "siebzehn", "--output", path) == 0
    assert source_pieces[0] in path.read_text(encoding="utf-8")
    assert cli("plot", "--run-dir", trained_run, "--attention", " ") == 2
