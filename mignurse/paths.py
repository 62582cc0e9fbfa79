"""Where mignurse keeps its files, and who may read them.

Where: the state folder is `$XDG_STATE_HOME/mignurse`, else `~/.local/state/mignurse` (a
relative `$XDG_STATE_HOME` is ignored, as the spec says); it holds the history, run state
(`runs/`, with what each run's lock names) and the audit log. Runbooks come from
`$MIGNURSE_RUNBOOKS`, else the package's own. Nothing is created until it is written.

The demo keeps all of that apart (`demo_state`): its runs act on a simulated cluster, on the
simulator's clock, under a production-like cluster name, so they live in the demo's own
temporary folder, gone when it ends, never in the audit log, the run list or the history
of the clusters the user is on call for.

Who: what mignurse writes (bundles, history, run state, audit log) names nodes, clusters and
their failures, so only its owner may read it. Folders are 0700 and files 0600 whatever the
umask, as the XDG Base Directory Specification asks of folders it creates
(specifications.freedesktop.org/basedir-spec, "Referencing this specification").
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600

HISTORY_FILENAME = "history.sqlite3"
DEMO_STATE = "state"  # the demo's state folder, inside the demo's own temporary folder

_demo_home: Path | None = None  # set while the demo runs (demo_state)


def state_home() -> Path:
    """$XDG_STATE_HOME/mignurse, else ~/.local/state/mignurse; while the demo runs, its own
    (`demo_state`). Nothing is created here."""
    if _demo_home is not None:
        return _demo_home
    xdg = os.environ.get("XDG_STATE_HOME", "")
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "state"
    return base / "mignurse"


@contextlib.contextmanager
def demo_state(folder: Path) -> Iterator[Path]:
    """For as long as the demo runs, every file of state (audit log, run state, history) is
    kept under `folder` (the demo's temporary folder), apart from the user's own."""
    global _demo_home
    previous, _demo_home = _demo_home, folder / DEMO_STATE
    try:
        yield _demo_home
    finally:
        _demo_home = previous


def in_demo() -> bool:
    """Whether the state is the demo's (`mignurse runs` and the audit view say so)."""
    return _demo_home is not None


def history_file(state_dir: Path | None = None) -> Path:
    """The history database: in `state_dir` (`--state-dir`) when given, else the state home."""
    return (state_dir or state_home()) / HISTORY_FILENAME


def runs_dir() -> Path:
    """One JSON file per run: what `--resume`, `--undo` and `mignurse runs` read."""
    return state_home() / "runs"


def audit_log() -> Path:
    return state_home() / "audit.jsonl"


def runbooks_dir() -> Path:
    """$MIGNURSE_RUNBOOKS (a site's own runbooks), else `runbooks/` beside the package (a
    checkout or editable install), else `<prefix>/share/mignurse/runbooks` (a wheel)."""
    override = os.environ.get("MIGNURSE_RUNBOOKS")
    if override:
        return Path(override).expanduser()
    beside = Path(__file__).resolve().parent.parent / "runbooks"
    installed = Path(sys.prefix) / "share" / "mignurse" / "runbooks"
    return beside if beside.is_dir() or not installed.is_dir() else installed


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
