"""What mignurse writes is its owner's alone: folders 0700, files 0600, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.paths import open_private, private_dir


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


def test_a_device_or_pipe_written_to_keeps_its_mode(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe, 0o644)
    os.close(open_private(pipe, os.O_RDWR))  # O_RDWR: a FIFO opens without a reader
    assert _mode(pipe) == 0o644
