"""What mignurse writes is its owner's alone: folders 0700, files 0600, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cluster.client import ContextInfo
from mignurse.paths import StateFileError, history_file, open_private, private_dir

CLUSTER = ContextInfo(
    "prod",
    "arn:aws:eks:eu-west-1:111122223333:cluster/prod",
    "https://A1.gr7.eu-west-1.eks.amazonaws.com",
    "me",
)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The common 022 umask, under which plain mkdir and open give 0755 and 0644."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.usefixtures("open_umask")
def test_missing_folders_are_made_0700_all_the_way_down(tmp_path: Path) -> None:
    state = tmp_path / "home" / ".local" / "state" / "mignurse" / "runs"
    private_dir(state)
    for folder in (state, state.parent, state.parent.parent, tmp_path / "home"):
        assert _mode(folder) == 0o700, folder


@pytest.mark.usefixtures("open_umask")
def test_an_existing_state_folder_is_tightened_only_when_asked(tmp_path: Path) -> None:
    old = tmp_path / "mignurse"
    old.mkdir(mode=0o755)
    private_dir(old)
    assert _mode(old) == 0o755  # someone else's folder (a --state-dir) is left as it is
    private_dir(old, tighten=True)
    assert _mode(old) == 0o700


@pytest.mark.usefixtures("open_umask")
def test_files_are_0600_and_an_old_world_readable_one_is_narrowed(tmp_path: Path) -> None:
    fresh = tmp_path / "bundle.tar.gz"
    os.close(open_private(fresh))
    assert _mode(fresh) == 0o600
    old = tmp_path / "old.tar.gz"
    old.write_bytes(b"x")
    old.chmod(0o644)
    os.close(open_private(old))
    assert _mode(old) == 0o600 and old.read_bytes() == b""


def test_a_pipe_where_a_file_belongs_is_refused_and_keeps_its_mode(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe, 0o644)
    with pytest.raises(StateFileError, match="pipe is a FIFO, not a regular file"):
        open_private(pipe, os.O_RDWR)  # O_RDWR: a FIFO opens without a reader
    assert _mode(pipe) == 0o644


def _write_everything() -> None:
    """What a run and a watch leave behind: run state, an audit line, the history."""
    from mignurse.cluster.history import HistoryStore
    from mignurse.paths import history_file
    from mignurse.runner.audit import Audit
    from mignurse.runner.state import RunState

    RunState("0a1b2c3d", "cordon", {}, "ctx", "cluster", "node-1", "me@here").save()
    Audit().write("started", "0a1b2c3d")
    with HistoryStore(history_file(CLUSTER)):
        pass


@pytest.mark.usefixtures("open_umask")
def test_state_audit_and_history_are_private_under_an_open_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse import paths

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    _write_everything()
    home = paths.state_home()
    assert home == tmp_path / "state" / "mignurse"
    history = paths.history_file(CLUSTER)
    for folder in (tmp_path / "state", home, paths.runs_dir(), history.parent):
        assert _mode(folder) == 0o700, folder
    written = [paths.audit_log(), history, *paths.runs_dir().glob("*.json")]
    assert len(written) == 3
    for file in (*written, history.with_name(history.name + ".lock")):
        assert _mode(file) == 0o600, file


@pytest.mark.usefixtures("open_umask")
def test_a_state_folder_left_0755_by_an_earlier_version_is_tightened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse import paths

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    home = paths.state_home()
    history = paths.history_file(CLUSTER)
    (home / "runs").mkdir(parents=True, mode=0o755)
    history.parent.mkdir(mode=0o755)
    home.chmod(0o755)
    history.write_bytes(b"")
    history.chmod(0o644)
    _write_everything()
    assert _mode(home) == 0o700 and _mode(paths.runs_dir()) == 0o700
    assert _mode(history) == 0o600


def test_every_module_takes_its_state_paths_from_one_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative XDG_STATE_HOME is ignored (the spec calls it invalid) by runs, the audit
    log and the history alike."""
    from mignurse.paths import history_file
    from mignurse.runner.audit import audit_path
    from mignurse.runner.state import RunState

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    home = tmp_path / ".local" / "state" / "mignurse"
    assert history_file(CLUSTER).parent == home / "history"
    assert audit_path() == home / "audit.jsonl"
    run = RunState("0a1b2c3d", "cordon", {}, "ctx", "cluster", "node-1", "me@here")
    assert run.path == home / "runs" / "0a1b2c3d.json"


@pytest.mark.parametrize(
    "cluster",
    [
        "../../../etc/passwd",
        "..",
        "a/b\\c",
        "-rf",
        ".hidden",
        "ctl\x1b]52;c;AAAA\x07\n\r\t",
        "\u202eevil\u200b",
        "\udcff",
        "x" * 5000,
        "",
    ],
    ids=str.split("parents dotdot slashes option hidden controls bidi surrogate long empty"),
)
def test_a_hostile_cluster_name_gives_a_plain_file_in_the_history_folder(
    tmp_path: Path, cluster: str
) -> None:
    path = history_file(ContextInfo("c", cluster, "https://10.0.0.1", "me"), tmp_path)
    assert path.parent == tmp_path / "history"
    assert path.name.endswith(".sqlite3") and len(path.name) <= 64
    assert path.name[0] not in ".-"
    assert all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in path.name), path.name


def test_each_cluster_has_its_own_history_and_a_context_renamed_keeps_it(tmp_path: Path) -> None:
    server, other = "https://A1.eks.amazonaws.com", "https://B2.eks.amazonaws.com"
    one = history_file(ContextInfo("prod", "prod", server, "me"), tmp_path)
    assert one == history_file(ContextInfo("renamed", "prod", server, "you"), tmp_path)
    assert one != history_file(ContextInfo("prod", "prod", other, "me"), tmp_path)
    assert one != history_file(ContextInfo("prod", "staging", server, "me"), tmp_path)
    assert one.name.startswith("prod-")
    assert history_file(CLUSTER, tmp_path).name.startswith("prod-")  # an ARN's cluster name


def test_the_single_history_of_earlier_versions_is_read_until_the_cluster_has_its_own(
    tmp_path: Path,
) -> None:
    legacy = tmp_path / "history.sqlite3"
    own = history_file(CLUSTER, tmp_path)
    assert history_file(CLUSTER, tmp_path, reading=True) == own  # neither: its own, unmade
    legacy.write_bytes(b"")
    assert history_file(CLUSTER, tmp_path, reading=True) == legacy
    assert history_file(CLUSTER, tmp_path) == own  # never written again
    own.parent.mkdir()
    own.write_bytes(b"")
    assert history_file(CLUSTER, tmp_path, reading=True) == own
