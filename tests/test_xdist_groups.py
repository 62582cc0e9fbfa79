"""`make test` spreads the suite with pytest-xdist's `--dist loadgroup`: tests marked
`xdist_group(name)` run on one worker, so a session fixture they share (the 5,000-node
cluster) is built once. xdist does that by appending `@name` to the test's id on the worker
(pytest-dev/pytest-xdist v3.8.0 src/xdist/remote.py, `pytest_collection_modifyitems`); a
pytest that ignores the change leaves every group spread over the workers with no error."""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("xdist-group-check")
def test_a_grouped_test_carries_its_group_when_the_suite_runs_by_group(
    request: pytest.FixtureRequest,
) -> None:
    if not getattr(request.config.option, "loadgroup", False):  # set on each xdist worker
        pytest.skip("runs only under `pytest -n N --dist loadgroup` (make test)")
    assert request.node.nodeid.endswith("@xdist-group-check"), request.node.nodeid
