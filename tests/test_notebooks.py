import glob
import os
import runpy
import sys

import pytest
from conftest import REPO

NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.py")))


def test_there_are_three_notebooks():
    assert [os.path.basename(n)[:2] for n in NOTEBOOKS] == ["01", "02", "03"]


def run_notebook(notebook, directory, environment, monkeypatch, capsys):
    """Runs a notebook's script as `python <notebook>` runs it, in `directory` with
    `environment` added, but in this process (each started TensorFlow again in a process
    of its own): its exit status and what it printed."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "argv", [notebook])
    capsys.readouterr()
    try:
        runpy.run_path(notebook, run_name="__main__")
        status = 0
    except SystemExit as exit:
        status = exit.code or 0
    return status, capsys.readouterr().out


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_top_to_bottom_on_a_tiny_configuration(
    notebook, tmp_path, multi30k_path, monkeypatch, capsys
):
    jupytext = pytest.importorskip("jupytext")
    assert jupytext.read(notebook).cells  # a valid jupytext percent notebook
    environment = {"KT_TINY": "1", "MPLBACKEND": "Agg", "MULTI30K_DIR": multi30k_path or ""}
    status, printed = run_notebook(notebook, tmp_path, environment, monkeypatch, capsys)
    assert status == 0
    if "02_" in notebook:
        assert ("BLEU" in printed) == bool(multi30k_path)


def test_multi30k_notebook_without_data_says_where_to_put_it(tmp_path, monkeypatch, capsys):
    notebook = next(n for n in NOTEBOOKS if "02_" in os.path.basename(n))
    environment = {"MULTI30K_DIR": str(tmp_path)}
    status, printed = run_notebook(notebook, tmp_path, environment, monkeypatch, capsys)
    assert status == 0
    assert "Multi30k not found" in printed and "MULTI30K_DIR" in printed
