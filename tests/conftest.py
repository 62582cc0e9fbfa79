"""Suite-wide settings. Tests reach nothing but 127.0.0.1, and write nothing outside their
own temporary folders, so any number of them can run at once (pytest-xdist) in any order."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from mignurse.sim import SimCluster
    from mignurse.sim.fleet import SimFleet

# CI machines have two cores shared with the stand-in servers: judge correctness, not speed.
# No example database: parallel workers would share one folder in the checkout.
settings.register_profile(
    "mignurse",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=80,
    database=None,
)
settings.load_profile("mignurse")

# Files whose tests take seconds each (fleet collections, the app driven through Textual's
# pilot, runbooks run end to end). pytest-xdist hands tests to the workers in collection order
# (groups first), so these start the run and short tests end it: the workers finish together
# instead of one finishing a long test while the others wait.
RUN_FIRST = (
    "tests/collect/test_fleet.py",
    "tests/tui/",
    "tests/collect/test_nodegroups.py",
    "tests/runner/",
)


# The deep tier: the same checks at full size (the whole secrets corpus both ways, the
# 5,000-node cluster through kubectl, every screen scanned for escapes, the interruption
# trials), each minutes of CPU; `make deep` runs them, and CI after `make test`.
DEEP_SKIPPED = "the deep tier: make deep"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, p in enumerate(RUN_FIRST) if path.startswith(p)), len(RUN_FIRST))

    items.sort(key=rank)  # stable: each file's tests stay together and in order
    chosen = str(config.getoption("markexpr") or "")
    if "deep" not in chosen and "slow" not in chosen:  # the whole matrices hold deep tests
        for item in items:
            if item.get_closest_marker("deep") is not None:
                item.add_marker(pytest.mark.skip(reason=DEEP_SKIPPED))


# Settings a developer's shell may carry that would point a test at their own files.
_OUTSIDE = ("KUBECONFIG", "AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
_OURS = ("MIGNURSE_RUNBOOKS", "MIGNURSE_DEBUG", "MIGNURSE_NVML_LIBRARY")


@pytest.fixture(autouse=True)
def _own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME and XDG folders: the history, audit log, run state, a
    kubeconfig or ~/.ssh of the user (or of another test) is never read or written."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name, sub in (
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        monkeypatch.setenv(name, str(home / sub))
    for name in _OUTSIDE + _OURS:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def fake_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test credentials and a region for boto3 against the local stand-ins; no profile, so
    nothing on this machine's ~/.aws is read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-west-2",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="module")
def failing_fleet(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[SimFleet, Path]]:
    """Two simulated clusters (`sim-healthy`, `sim-dcgm-repair-loop`) and a context failing
    in each way a real one does, in one kubeconfig (`sim serve`'s `SimFleet`): `prod-eu`
    refuses connections, `prod-us`'s AWS SSO login has expired, RBAC refuses `staging` its
    `list nodes`, and `prod-ap` accepts and never answers. One per test module."""
    from mignurse.sim import load_scenario
    from mignurse.sim.fleet import serve_fleet

    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    failing = [("unreachable", "prod-eu"), ("expired", "prod-us")]
    failing += [("forbidden", "staging"), ("hung", "prod-ap")]
    scenarios = [load_scenario(name) for name in ("healthy", "dcgm-repair-loop")]
    served = serve_fleet(kubeconfig, scenarios, failing, speed=0)
    yield served, kubeconfig
    served.stop()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    """The healthy scenario on a still clock, served on 127.0.0.1, and its kubeconfig. One per
    test module."""
    from mignurse.sim import SimCluster, load_scenario

    sim = SimCluster(load_scenario("healthy"), speed=0).start()
    kubeconfig = sim.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    yield sim, kubeconfig
    sim.stop()


@pytest.fixture(autouse=True)
def _ctrl_c_as_from_a_shell() -> None:
    """A command a test starts takes Ctrl-C as it does from a shell. A SIGINT ignored or
    blocked in this test worker (by what ran in it before) is inherited through fork and
    exec, and a Python started with SIGINT ignored installs no KeyboardInterrupt: the
    command would run on through the Ctrl-C a test sends it."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
