"""The test suite's own set-up."""

import pytest


@pytest.mark.xdist_group("suite")
def test_pytest_xdist_keeps_a_groups_tests_in_one_process(request, worker_id):
    """`--dist loadgroup` sends a group to one process by a suffix on the node id, which
    pytest 9.2 drops without a word (pytest-dev/pytest-xdist#1386): a group's trained run
    would then be made once in each process."""
    if worker_id == "master":
        pytest.skip("the tests run in one process (-n 0)")
    assert request.node.nodeid.endswith("@suite"), request.node.nodeid


class Factory:
    """A stand-in for pytest's `tmp_path_factory` whose base is `base`."""

    def __init__(self, base):
        self.base = base

    def getbasetemp(self):
        return self.base


def test_a_directory_made_once_is_made_by_the_first_process_that_asks(tmp_path, monkeypatch):
    """Two workers asking at once get one directory, filled by one `make`; a `make` that
    failed fails the other workers with its error, without running again."""
    import threading

    from made_once import made_once

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # the root is above the worker's base
    factory = Factory(tmp_path / "gw0")
    inside, release = threading.Event(), threading.Event()
    calls, results = [], []

    def make(directory):
        calls.append(directory)
        inside.set()
        release.wait()  # the second worker asks while the first makes
        (directory / "model").write_text("trained")

    first = threading.Thread(target=lambda: results.append(made_once(factory, "run", make)))
    first.start()
    inside.wait()
    second = threading.Thread(target=lambda: results.append(made_once(factory, "run", make)))
    second.start()
    release.set()
    first.join()
    second.join()
    assert calls == [tmp_path / "run"] and results == [tmp_path / "run"] * 2
    assert (tmp_path / "run" / "model").read_text() == "trained"

    def broken(directory):
        raise ValueError("no data")

    with pytest.raises(ValueError, match="no data"):
        made_once(factory, "broken", broken)
    with pytest.raises(RuntimeError, match="broken failed in another worker: ValueError: no data"):
        made_once(factory, "broken", make)


class Item:
    """A stand-in for a collected test: its name, fixtures and `main_job` mark."""

    def __init__(self, name, fixturenames=(), marked=False):
        self.name, self.fixturenames, self.marked = name, list(fixturenames), marked

    def get_closest_marker(self, name):
        return object() if self.marked and name == "main_job" else None


def test_the_tests_that_read_the_main_job_run_last_in_collection_order():
    """The README main job trains in the background while the other tests run: the tests
    that read it (by its fixture or the `main_job` mark) go last, each group in order."""
    from types import SimpleNamespace

    from conftest import pytest_collection_modifyitems

    items = [
        Item("a"),
        Item("b", ["tmp_path", "main_job"]),
        Item("c", marked=True),
        Item("d", ["tmp_path"]),
        Item("e", ["main_job"]),
    ]
    config = SimpleNamespace(option=SimpleNamespace(collectonly=True))  # starts no main job
    pytest_collection_modifyitems(config, items)
    assert [item.name for item in items] == ["a", "d", "b", "c", "e"]
