"""The demo's temporary folder (its kubeconfig and history): removed when the demo ends,
and at the next start when a demo was killed before it could remove its own.

A running demo holds an flock on the folder's `.owner.lock`; the kernel drops it when the
process dies however it dies, so a folder whose lock can be taken is clearly abandoned.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "mignurse-demo-"
LOCK_NAME = ".owner.lock"


@contextlib.contextmanager
def demo_folder() -> Iterator[Path]:
    """A fresh private folder under the temp dir, locked for as long as it is in use."""
    sweep_abandoned()
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    pending = folder / ".owner.pending"
    fd = os.open(pending, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # Named only once locked: a sweep never sees this lock free.
        pending.rename(folder / LOCK_NAME)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)


def sweep_abandoned(parent: Path | None = None) -> list[Path]:
    """Remove this user's demo folders whose owner is gone; the ones removed."""
    removed = []
    for folder in Path(parent or tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            info = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no lock: not a folder this version made, or one still being made
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # its demo is running
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            os.close(fd)
    return removed
