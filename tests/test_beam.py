"""Translating files on Apache Beam (`keras_transformer.beam`), against the package's own
`translate --saved-model` and `Translator` on the same lines: every line in its place, every
signature, and the reports of malformed and over-long lines."""

import gzip
import io
import math
import sys

import pytest

import keras_transformer as kt
from keras_transformer.beam import MALFORMED_FILE, TRUNCATED_FILE, Malformed, translate_corpus
from keras_transformer.beam.handler import Translated, split_lines
from keras_transformer.beam.pipeline import _WriteFile, match_files, output_paths
from keras_transformer.cli import main
from keras_transformer.datasets import numbers_corpus
from keras_transformer.errors import ArgumentError

GERMAN = numbers_corpus("test", source_lang="de", target_lang="en").sources
LONG = " ".join(["siebzehn"] * 400)  # far over the main job's source limit
INVALID = b"drei\xff\xfe hundert"


def translate_cli(saved_model, lines, monkeypatch, capsys):
    """What `translate --saved-model` prints for `lines` on stdin: `(lines, stderr)`."""
    stdin = io.TextIOWrapper(io.BytesIO("".join(s + "\n" for s in lines).encode()), "utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    capsys.readouterr()
    assert main(["translate", "--saved-model", saved_model]) == 0
    printed = capsys.readouterr()
    return printed.out.splitlines(), printed.err


def read_output(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.main_job
def test_two_workers_write_each_file_as_translate_prints_it(
    main_job, tmp_path, monkeypatch, capsys
):
    """Three shards (plain, gzip, empty) through the CLI on two worker processes: each
    output equals `translate --saved-model` on its file, line for line, with empty and
    whitespace-only lines in place; the line that is not UTF-8 is an empty line and a row
    of malformed.tsv, the over-long one is translated cut and a row of truncated.tsv."""
    directory, _ = main_job
    saved_model = str(directory / "saved_models" / "numbers_de_en" / "1")
    data = tmp_path / "data"
    data.mkdir()
    shards = {
        "a.de": [GERMAN[0], "", "   ", GERMAN[1], INVALID, LONG, *GERMAN[2:12]],
        "b.de.gz": GERMAN[12:40] + ["", GERMAN[3]],
        "c.de": [],
    }
    for name, lines in shards.items():
        raw = b"".join((s if isinstance(s, bytes) else s.encode()) + b"\n" for s in lines)
        (data / name).write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    out = tmp_path / "out"
    args = ["--saved-model", str(directory / "saved_models" / "numbers_de_en")]  # newest
    args += ["--input", str(data / "*.de"), "--input", str(data / "b.de.gz")]
    args += ["--output", str(out), "--direct_num_workers=2"]
    args += ["--direct_running_mode=multi_processing"]
    capsys.readouterr()
    assert main(["translate-corpus", *args]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    total = sum(len(lines) for lines in shards.values())
    assert summary.startswith(f"{total} lines of 3 files translated into {out}; 1 not UTF-8")
    assert summary.endswith("1 cut to the model's source length (truncated.tsv)")

    for name, lines in shards.items():
        got = read_output(out / name)
        assert len(got) == len(lines), name
        valid = [i for i, s in enumerate(lines) if not isinstance(s, bytes)]
        expected, warning = translate_cli(
            saved_model, [lines[i] for i in valid], monkeypatch, capsys
        )
        assert [got[i] for i in valid] == expected, name
        for i, line in enumerate(lines):
            if isinstance(line, bytes) or not line.strip():
                assert got[i] == "", (name, i)
        if name == "a.de":  # translate numbers the valid lines only
            assert f"translated cut to them: line {valid.index(5) + 1}" in warning
    malformed = (out / MALFORMED_FILE).read_text().splitlines()
    assert [row.split("\t")[:2] for row in malformed] == [[str(data / "a.de"), "5"]]
    assert "invalid UTF-8 byte at position 4" in malformed[0]
    assert (out / TRUNCATED_FILE).read_text().splitlines() == [f"{data / 'a.de'}\t6"]


@pytest.mark.main_job
def test_every_signature_gives_the_runs_translations(main_job, tmp_path):
    """n-best lists (`index<TAB>score<TAB>text`), prefixes and constraints read from TSV
    lines, against the run's `Translator` (no XLA, the search the export holds)."""
    directory, _ = main_job
    saved_model = directory / "saved_models" / "numbers_de_en" / "1"
    translator = kt.run.make_translator(directory / "runs" / "numbers_de_en", jit_compile=False)
    sources = [GERMAN[0], "", GERMAN[5], "  ", GERMAN[7]]
    prefixes = ["", "", "six", "", "sev"]
    phrases = [["hundred"], [], [], [], ["thousand", "seven"]]
    data = tmp_path / "data"
    data.mkdir()
    rows = {
        "translate_n_best": sources,
        "translate_with_prefix": [f"{s}\t{p}" for s, p in zip(sources, prefixes, strict=True)],
        "translate_constrained": [
            "\t".join([s, *c]) for s, c in zip(sources, phrases, strict=True)
        ],
    }
    for signature, lines in rows.items():
        (data / f"{signature}.de").write_text("".join(line + "\n" for line in lines))
        translate_corpus(
            saved_model, [str(data / f"{signature}.de")], tmp_path / signature, signature=signature
        )

    n_best = translator.copy(n_best=translator.beam_size).translate(sources)
    got = [
        line.split("\t")
        for line in read_output(tmp_path / "translate_n_best" / "translate_n_best.de")
    ]
    assert len(got) == len(sources) * translator.beam_size
    for row, (index, score, text) in enumerate(got):
        i, k = divmod(row, translator.beam_size)
        assert int(index) == i
        assert text == n_best.hypotheses()[i][k][0]
        assert math.isclose(float(score), n_best.hypotheses()[i][k][1], abs_tol=2e-4)
    with_prefix = translator.translate(sources, prefixes=prefixes).best
    got = read_output(tmp_path / "translate_with_prefix" / "translate_with_prefix.de")
    assert got == list(with_prefix)
    assert got[2].startswith("six") and got[4].startswith("sev")
    constrained = translator.translate(sources, constraints=phrases).best
    got = read_output(tmp_path / "translate_constrained" / "translate_constrained.de")
    assert got == list(constrained)
    assert "hundred" in got[0] and "thousand" in got[4] and "seven" in got[4]


def test_a_file_written_again_holds_each_line_once(tmp_path):
    """A runner that re-executes a bundle writes a file again: the output replaces the
    first one (and a partial file a killed worker left), never adds to it."""
    path = str(tmp_path / "in.de")
    target = tmp_path / "out.de.gz"
    write = _WriteFile({path: str(target)}, "serving_default")
    rows = [(1, Translated([("one", 0.0)], False)), (3, Translated([("three", 0.0)], True))]
    element = (path, {"counts": [3], "lines": rows, "malformed": [Malformed(path, 2, "x")]})
    (tmp_path / "out.de.gz.partial").write_bytes(b"left by a killed worker")
    for _ in range(2):
        assert list(write.process(element)) == [(path, 3)]
        assert read_output(target) == ["one", "", "three"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.de.gz"]
    lost = (path, {"counts": [3], "lines": rows[:1], "malformed": []})
    with pytest.raises(RuntimeError, match=r"no translation of lines \[2, 3\]"):
        list(write.process(lost))


def test_bad_inputs_are_named_before_the_pipeline_runs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for name in ["a/x.de", "b/x.de"]:
        (tmp_path / name).write_text("eins\n")
    with pytest.raises(ArgumentError, match="No file matches the input '.*nothing\\*'"):
        match_files([str(tmp_path / "nothing*")])
    paths = match_files([str(tmp_path / "*" / "x.de")])
    with pytest.raises(ArgumentError, match="have one name"):
        output_paths(paths, str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="saved_model.pb is missing"):
        translate_corpus(tmp_path, [paths[0]], str(tmp_path / "out"))
    with pytest.raises(SystemExit):  # Beam's options go to translate-corpus alone
        main(["translate", "--saved-model", str(tmp_path), "--direct_num_workers=2", "x"])


def test_tab_separated_lines_give_prefixes_and_constraints():
    assert split_lines(["zwei\ttwo\tx", "drei"], "translate_with_prefix") == (
        ["zwei", "drei"],
        ["two\tx", ""],
    )
    assert split_lines(["zwei\tt\t\tw", "drei"], "translate_constrained") == (
        ["zwei", "drei"],
        [["t", "w"], ["", ""]],
    )
    assert split_lines([], "translate_constrained") == ([], [])
    assert split_lines(["a\tb"], "serving_default") == (["a\tb"], None)
