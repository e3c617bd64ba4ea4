"""Directories made once per test run and shared by every pytest-xdist worker.

A session-scoped fixture runs once per worker process; a model it trains would be
trained once in each. `made_once` trains it in whichever worker asks first, while
the others wait on a file lock, and hands every worker the same directory, which
they read and never change (a test that writes copies it first).

Example:
    ```python
    @pytest.fixture(scope="session")
    def tiny_translation(tmp_path_factory):
        return made_once(tmp_path_factory, "tiny_translation", train_tiny_translation)
    ```
"""

import fcntl
import os
import shutil


def run_root(tmp_path_factory):
    """The test run's temporary root: the directory above the workers' own under
    pytest-xdist, the run's own otherwise."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def made_once(tmp_path_factory, name, make):
    """`run_root/name`, filled by `make(directory)` in the first worker that asks.

    Args:
        tmp_path_factory: pytest's session fixture.
        name: the directory's name, one per kind of content.
        make: fills the empty directory it is given; its return value is ignored.

    Returns:
        The directory, as a `pathlib.Path`. A `make` that raised is not retried by the
        other workers: they fail naming its error (type and message).
    """
    root = run_root(tmp_path_factory)
    directory, failed = root / name, root / f"{name}.failed"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if failed.exists():
            raise RuntimeError(f"{name} failed in another worker: {failed.read_text()}")
        if not (root / f"{name}.done").exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            try:
                make(directory)
            except BaseException as error:
                failed.write_text(f"{type(error).__name__}: {str(error)[:2000]}")
                raise
            (root / f"{name}.done").touch()
    return directory
