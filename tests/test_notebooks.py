import glob
import os
import subprocess
import sys

import pytest
from conftest import REPO

NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.py")))


def test_there_are_three_notebooks():
    assert [os.path.basename(n)[:2] for n in NOTEBOOKS] == ["01", "02", "03"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_top_to_bottom_on_a_tiny_configuration(notebook, tmp_path, multi30k_path):
    jupytext = pytest.importorskip("jupytext")
    assert jupytext.read(notebook).cells  # a valid jupytext percent notebook
    env = {
        **os.environ,
        "KT_TINY": "1",
        "MPLBACKEND": "Agg",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "MULTI30K_DIR": multi30k_path or "",
    }
    result = subprocess.run(
        [sys.executable, notebook],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    if "02_" in notebook:
        assert ("BLEU" in result.stdout) == bool(multi30k_path)


def test_multi30k_notebook_without_data_says_where_to_put_it(tmp_path):
    notebook = next(n for n in NOTEBOOKS if "02_" in os.path.basename(n))
    env = {**os.environ, "MULTI30K_DIR": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = subprocess.run([sys.executable, notebook], env=env, capture_output=True, text=True)
    assert result.returncode == 0
    assert "Multi30k not found" in result.stdout and "MULTI30K_DIR" in result.stdout
