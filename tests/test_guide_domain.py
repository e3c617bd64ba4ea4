"""The OPUS-MT guide's domain adaptation, run as written on a small slice of Multi30k: a
captions model trained, exported in Marian's layout, imported, evaluated on both domains,
fine-tuned on numbers and evaluated again. The guide's models are shrunk (`TINY`) and its
searches greedy, so the run takes minutes; it needs Multi30k (`MULTI30K_DIR`) and is a slow
test: `pytest -m slow tests/test_guide_domain.py`."""

import gzip
import json
import os
import pathlib
import shlex
import subprocess

import pytest
from markdown import block_after

from keras_transformer.cli import main

PAGE = "docs/guides/opus-mt.md"
SECTION = "## Adapting a model to a new domain"
TINY = {  # added to the guide's `train --config` command: a small model on a small slice
    "model.num_layers": 1,
    "model.d_model": 64,
    "model.num_heads": 2,
    "model.dff": 128,
    "tokenizer.vocab_size": 600,
    "train.epochs": 3,
    "train.cooldown_epochs": 1,
    "train.warmup_steps": 50,
}
SIZES = {"train": 3000, "val": 100, "test_2016_flickr": 100}


def steps(block):
    """The block's lines, continuation lines joined and comments left out: a
    `keras-transformer` command as its argument list (`$VARIABLES` expanded), any other
    line as the shell text it is."""
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(os.path.expandvars(line), comments=True)
        if not words or words[0] == "export":  # the test sets MULTI30K_DIR itself
            continue
        if words[0].endswith("keras-transformer"):
            yield words[1:]
        else:
            yield line


def small_multi30k(source, directory):
    """The first lines of each Multi30k split used, as the guide's MULTI30K_DIR."""
    directory.mkdir()
    for split, size in SIZES.items():
        for lang in ("de", "en"):
            with gzip.open(source / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(size)]
            with gzip.open(directory / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.writelines(lines)
    return directory


SAME_SEARCH = [
    "--beam-size",
    "1",
    "--max-length-a",
    "0",
    "--max-length-b",
    "40",
    "--no-repeat-ngram-size",
    "0",
    "--split",
    "test_2016_flickr",
]


def greedy_captions(run_dir, output, capsys):
    """The greedy translations of the captions' test split by a run, with options given in
    full (an imported run's `decode` section is not the trained run's)."""
    data = ["--data-dir", os.environ["MULTI30K_DIR"]]
    assert main(["evaluate", "--run-dir", run_dir, *data, *SAME_SEARCH, "--output", output]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["hypotheses"] == output
    with open(output, encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.slow
def test_the_guides_domain_adaptation_runs_as_written(multi30k_dir, tmp_path, monkeypatch, capsys):
    small = small_multi30k(pathlib.Path(multi30k_dir), tmp_path / "m30k")
    monkeypatch.setenv("MULTI30K_DIR", str(small))
    monkeypatch.chdir(tmp_path)
    exec(block_after(PAGE, SECTION, "python"), {})  # the numbers files
    assert len((tmp_path / "numbers" / "train.de").read_text().splitlines()) == 2000
    scores = []
    for step in steps(block_after(PAGE, SECTION, "bash")):
        if isinstance(step, str):  # mkdir, and the loops that mix the two corpora
            subprocess.run(step, shell=True, executable="/bin/bash", check=True)
            continue
        words = step
        if words[0] == "train" and "--config" in words:
            words += [arg for key, value in TINY.items() for arg in ("--set", f"{key}={value}")]
        if words[0] == "evaluate":
            words += ["--beam-size", "1"]
        capsys.readouterr()
        assert main(words) == 0, words
        if words[0] == "evaluate":
            scores.append(json.loads(capsys.readouterr().out.splitlines()[-1]))
        if len(scores) == 1 and words[0] == "evaluate":
            # The imported model is the trained one: the same greedy translations.
            trained = greedy_captions("runs/captions", "trained.txt", capsys)
            assert trained == greedy_captions("runs/numbers-only", "imported.txt", capsys)
            assert len(trained) == SIZES["test_2016_flickr"]
    mixed = tmp_path / "mixed" / "train.de"
    assert len(mixed.read_text(encoding="utf-8").splitlines()) == 4000
    assert len(scores) == 6
    captions_before, numbers_before, _, numbers_alone, _, numbers_mixed = scores
    gains = [run["bleu"] - numbers_before["bleu"] for run in (numbers_alone, numbers_mixed)]
    assert min(gains) > 3, gains  # the tiny model: 0.0 -> 8.5 on the numbers alone
    assert [s["sentences"] for s in scores] == [100, 1000] * 3
