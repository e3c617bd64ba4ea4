"""The "Your own data" guide's check of the pipeline, run as written on a small generated
corpus: a configuration, a run, its evaluation, its export and a request to the export.
It takes minutes (the export traces five signatures), so it is a slow test:
`pytest -m slow tests/test_guide_own_data.py`."""

import shlex

import pytest
from markdown import block_after

from keras_transformer.cli import main
from keras_transformer.config import load_config
from keras_transformer.datasets import numbers_corpus

PAGE = "docs/guides/own-data.md"


def commands(block):
    """The block's commands as argument lists, lines joined at a trailing backslash, with
    the file a command's output is redirected to (or None)."""
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        output = None
        if ">" in words:
            words, output = words[: words.index(">")], words[words.index(">") + 1]
        assert words[0] == "keras-transformer", line
        yield words[1:], output


@pytest.mark.slow
def test_the_guides_check_of_the_pipeline_runs_as_written(tmp_path, monkeypatch, capsys):
    for split, size in (("train", 2500), ("val", 100), ("test", 100)):
        corpus = numbers_corpus(split, "de", "en", limit=size)
        for lang, lines in (("de", corpus.sources), ("en", corpus.targets)):
            (tmp_path / "data").mkdir(exist_ok=True)
            (tmp_path / "data" / f"{split}.{lang}").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    printed = []
    for arguments, output in commands(block_after(PAGE, "## 2.", "bash")):
        assert main(arguments) == 0, arguments
        out = capsys.readouterr().out
        if output:
            (tmp_path / output).write_text(out, encoding="utf-8")
        printed.append(out)
    config = load_config("mine.yaml")
    assert (config["data"]["corpus"], config["data"]["directory"]) == ("files", "data")
    assert "BLEU" in printed[2]
    served = printed[4].strip()
    assert main(["translate", "--run-dir", "runs/check", "dreihundertzwölf"]) == 0
    assert served == capsys.readouterr().out.strip()  # the export translates as the run does
