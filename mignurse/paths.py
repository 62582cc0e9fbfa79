"""Private files and folders: what mignurse writes (bundles, history, run state, audit log)
names nodes, clusters and their failures, so only its owner may read it.

Folders are 0700 and files 0600 whatever the umask, as the XDG Base Directory
Specification asks of folders it creates (specifications.freedesktop.org/basedir-spec,
"Referencing this specification").
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """Create `path` and any missing parents as 0700 folders. With `tighten`, an existing
    `path` owned by this user loses its group and other bits too (for mignurse's own state
    folders, made 0755 by earlier versions)."""
    missing: list[Path] = []
    folder = path
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for each in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            each.mkdir(mode=DIR_MODE)
        with contextlib.suppress(OSError):  # mkdir's mode is filtered by the umask
            each.chmod(DIR_MODE)
    if tighten and not missing:
        with contextlib.suppress(OSError):
            info = path.stat()
            if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077:
                path.chmod(stat.S_IMODE(info.st_mode) & ~0o077)
    return path


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """`os.open` of a 0600 file; a regular file that existed with a wider mode is narrowed
    (a device such as /dev/stdout is left as it is)."""
    fd = os.open(path, flags, FILE_MODE)
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd
