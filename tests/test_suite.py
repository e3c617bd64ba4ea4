"""The test suite's own set-up."""

import pytest


@pytest.mark.xdist_group("suite")
def test_pytest_xdist_keeps_a_groups_tests_in_one_process(request, worker_id):
    """`--dist loadgroup` sends a group to one process by a suffix on the node id, which
    pytest 9.2 drops without a word (pytest-dev/pytest-xdist#1386): the main job would
    then run once in each process."""
    if worker_id == "master":
        pytest.skip("the tests run in one process (-n 0)")
    assert request.node.nodeid.endswith("@suite"), request.node.nodeid
