"""Running a Python script as `python <script> <arguments>` runs it, but in the test's own
process: starting another one costs seconds of TensorFlow start-up.

Example:
    ```python
    status, printed = run_script("notebooks/01_quickstart.py", directory=tmp_path)
    ```
"""

import contextlib
import io
import runpy
import sys

import pytest


def run_script(path, *arguments, directory, environment=None):
    """Runs the script at `path` with `arguments` in `directory`, with `environment`'s
    variables added, as `__main__`; everything it changes is put back after.

    Returns:
        `(status, printed)`: its exit status (0 unless it called `sys.exit` with another)
        and what it printed on standard output.
    """
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        for name, value in (environment or {}).items():
            patch.setenv(name, value)
        patch.chdir(directory)
        patch.setattr(sys, "argv", [str(path), *arguments])
        try:
            runpy.run_path(str(path), run_name="__main__")
            status = 0
        except SystemExit as exit:
            status = exit.code or 0
    return status, printed.getvalue()
