import glob
import os

import pytest
from conftest import REPO
from scripts import run_script

NOTEBOOKS = sorted(glob.glob(os.path.join(REPO, "notebooks", "*.py")))


def test_there_are_three_notebooks():
    assert [os.path.basename(n)[:2] for n in NOTEBOOKS] == ["01", "02", "03"]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs_top_to_bottom_on_a_tiny_configuration(notebook, tmp_path, multi30k_path):
    """As `python <notebook>` runs it, in this process (`scripts.run_script`)."""
    jupytext = pytest.importorskip("jupytext")
    assert jupytext.read(notebook).cells  # a valid jupytext percent notebook
    environment = {"KT_TINY": "1", "MPLBACKEND": "Agg", "MULTI30K_DIR": multi30k_path or ""}
    status, printed = run_script(notebook, directory=tmp_path, environment=environment)
    assert status == 0
    if "02_" in notebook:
        assert ("BLEU" in printed) == bool(multi30k_path)


def test_multi30k_notebook_without_data_says_where_to_put_it(tmp_path):
    notebook = next(n for n in NOTEBOOKS if "02_" in os.path.basename(n))
    environment = {"MULTI30K_DIR": str(tmp_path)}
    status, printed = run_script(notebook, directory=tmp_path, environment=environment)
    assert status == 0
    assert "Multi30k not found" in printed and "MULTI30K_DIR" in printed
