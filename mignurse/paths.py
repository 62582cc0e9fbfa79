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
import errno
import hashlib
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

DIR_MODE = 0o700
FILE_MODE = 0o600

HISTORY_FILENAME = "history.sqlite3"  # the single history of earlier versions
HISTORY_FOLDER = "history"  # one file per cluster (history_file)
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


class ClusterIdentity(Protocol):
    """What names a cluster's history (`cluster.client.ContextInfo` is one)."""

    @property
    def cluster(self) -> str: ...
    @property
    def server(self) -> str: ...


def history_file(
    info: ClusterIdentity, state_dir: Path | None = None, *, reading: bool = False
) -> Path:
    """One cluster's history database, in `state_dir` (`--state-dir`) when given, else the
    state home: `history/<name>-<hash>.sqlite3`, one file (and one writer) per cluster, so
    two clusters' lifecycles never mix. The cluster is its kubeconfig cluster entry and API
    server URL (two entries for one endpoint are two histories; a context renamed keeps its
    file); `<name>` is only for people (the entry's last part, made safe for a file name),
    `<hash>` tells clusters apart.

    `reading`: a cluster whose own file does not exist yet reads the single
    `history.sqlite3` that earlier versions kept for every cluster, when there is one (its
    rows name their context, so a cluster reads its own); nothing writes it any more."""
    base = state_dir or state_home()
    if reading:  # `exists()` on a name the OS refuses (ENAMETOOLONG) raises: one line first
        try:
            os.lstat(base)
        except (FileNotFoundError, NotADirectoryError):
            pass  # no history there yet: nothing to read
        except OSError as exc:
            raise _cannot_make(base, state_home(), exc, "read the history in") from None
    name = f"{_file_safe(info.cluster)}-{_identity(info.cluster, info.server)}.sqlite3"
    own = base / HISTORY_FOLDER / name
    legacy = base / HISTORY_FILENAME
    if reading and not os.path.lexists(own) and os.path.lexists(legacy):
        return legacy
    return own


def legacy_history(state_dir: Path | None = None) -> Path | None:
    """The single history of earlier versions, when it is still there (see `history_file`)."""
    legacy = (state_dir or state_home()) / HISTORY_FILENAME
    return legacy if os.path.lexists(legacy) else None


def _identity(cluster: str, server: str) -> str:
    """A short hash of what makes a cluster itself: its API server and cluster entry."""
    return hashlib.sha256(f"{server}\n{cluster}".encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _file_safe(cluster: str) -> str:
    """The readable part of a history's file name: an EKS ARN's cluster name (or the entry),
    with anything but letters, digits, `.`, `_` and `-` as `_`, no leading dot or dash (no
    `..`, no hidden file, no option), at most 40 characters; "cluster" when nothing is left."""
    name = cluster.rsplit(":cluster/", 1)[-1] if cluster.startswith("arn:") else cluster
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name.replace("/", "_"))[:40].lstrip(".-")
    return safe or "cluster"


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


class StateFileError(OSError):
    """A path where mignurse keeps a file or folder holds something else (a link, a FIFO, a
    folder, a device); str() is the one line to show, naming the path and what to do."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(errno.EINVAL, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def file_kind(mode: int) -> str:
    """What a path's mode says it is, in words: `a FIFO`, `a folder`, `a file` …."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device"


def _refusal(path: Path, mode: int, want: str) -> StateFileError:
    if stat.S_ISLNK(mode):
        return StateFileError(
            f"{path} is a symlink; mignurse never follows links in its state folder: remove it"
        )
    wanted = "regular file" if want == "file" else want
    return StateFileError(f"{path} is {file_kind(mode)}, not a {wanted}: move it away")


def state_path_problem(path: Path, want: str = "file") -> str:
    """Why `path` cannot be one of mignurse's files (`want` "file") or folders ("folder"):
    one line, or "" when it is one or is missing. Links are never followed."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    if (stat.S_ISREG(mode) and want == "file") or (stat.S_ISDIR(mode) and want == "folder"):
        return ""
    return str(_refusal(path, mode, want))


def private_dir(path: Path, *, tighten: bool = False) -> Path:
    """Create `path` and any missing parents as 0700 folders. With `tighten`, an existing
    `path` owned by this user loses its group and other bits too (for mignurse's own state
    folders, made 0755 by earlier versions). `path`, and every folder between the state
    folder and it, must be a folder, not a link to one (StateFileError): what mignurse
    writes never lands where a planted link points."""
    home = state_home()
    inner = (
        [home, *(home / part for part in _prefixes(path.relative_to(home)))]
        if (path != home and path.is_relative_to(home))
        else []
    )
    for folder in (*inner, path):  # top down: a link is met before anything is made under it
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:  # a name too long, a folder above it that is a file
            raise _cannot_make(path, home, exc) from None
        if not stat.S_ISDIR(mode):
            raise _refusal(folder, mode, "folder")
    try:
        missing: list[Path] = []
        folder = path
        while not os.path.lexists(folder):
            missing.append(folder)
            if folder.parent == folder:
                break
            folder = folder.parent
        if missing and os.path.islink(folder) and not os.path.exists(folder):
            # A dangling link above what is missing: mkdir beneath it fails (ENOENT), and a
            # link is never what mignurse makes its folders through.
            raise _refusal(folder, os.lstat(folder).st_mode, "folder")
        for each in reversed(missing):
            with contextlib.suppress(FileExistsError):  # another process made it meanwhile
                each.mkdir(mode=DIR_MODE)
            if each != path:
                with contextlib.suppress(OSError):  # mkdir's mode is filtered by the umask
                    _settle_folder(each, "made")
        for folder in inner:
            _settle_folder(folder, "made" if folder in missing else "keep")
        _settle_folder(path, "made" if path in missing else "tighten" if tighten else "keep")
    except StateFileError:
        raise
    except OSError as exc:  # /proc, /sys, a read-only mount, a name too long, no permission
        raise _cannot_make(path, home, exc) from None
    return path


def _cannot_make(
    path: Path, home: Path, exc: OSError, doing: str = "make the state folder"
) -> StateFileError:
    """The one line for a state folder the OS will not make or open: the path, the OS's
    reason, and what chose the path (XDG_STATE_HOME or --state-dir), to be pointed elsewhere."""
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(path) else ""
    chosen = (
        "set XDG_STATE_HOME to a folder you can write in"
        if path.is_relative_to(home)
        else "pass another --state-dir"
    )
    return StateFileError(f"cannot {doing} {path}: {exc.strerror or exc}{where}: {chosen}")


def _prefixes(relative: Path) -> list[Path]:
    """a/b/c → [a, a/b] (the folders between the state folder and the last one)."""
    parts = relative.parts
    return [Path(*parts[:i]) for i in range(1, len(parts))]


def _settle_folder(path: Path, how: str) -> None:
    """Open the folder without following a link (StateFileError for a link or a non-folder)
    and set its mode on the descriptor: "made" 0700 exactly (mkdir's mode is filtered by the
    umask), "tighten" without group and other bits when it is this user's, "keep" as it is."""
    fd = open_folder(path)
    try:
        if how == "made":
            os.fchmod(fd, DIR_MODE)
        elif how == "tighten":
            info = os.fstat(fd)
            if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) & 0o077:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, stat.S_IMODE(info.st_mode) & ~0o077)
    finally:
        os.close(fd)


def open_folder(path: Path) -> int:
    """A descriptor of mignurse's own folder `path`, opened without following a link (for
    opens relative to it: `dir_fd`); StateFileError when it is a link or not a folder."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refusal(path, os.lstat(path).st_mode, "folder") from None
        raise


def open_private(
    path: Path | str,
    flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    *,
    dir_fd: int | None = None,
) -> int:
    """`os.open` of one of mignurse's 0600 files: never through a link (O_NOFOLLOW: a
    dangling one is not created either), never blocked on a FIFO (O_NONBLOCK, cleared once
    it is known to be a regular file); anything but a regular file is StateFileError. A
    file that existed with a wider mode is narrowed on the descriptor."""
    safe = flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, safe, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        # ELOOP: a link; ENXIO: a FIFO without a reader opened for writing; EISDIR: a folder
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            try:
                mode = os.lstat(path, dir_fd=dir_fd).st_mode
            except OSError:
                raise exc from None
            raise _refusal(_named(path, dir_fd), mode, "file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(_named(path, dir_fd), info.st_mode, "file")
        if not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, data: bytes) -> None:
    """`data` as the whole of the 0600 file `path`, opened as `open_private` opens it."""
    with os.fdopen(open_private(path), "wb") as handle:
        handle.write(data)


def _named(path: Path | str, dir_fd: int | None) -> Path:
    """The path to show for a name opened relative to a folder's descriptor."""
    if dir_fd is None:
        return Path(path)
    try:
        return Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / path
    except OSError:
        return Path(path)


def read_private(path: Path, cap: int = 64 * 2**20, *, dir_fd: int | None = None) -> bytes:
    """The bytes of one of mignurse's own files (at most `cap`), read without following a
    link or blocking on a FIFO; StateFileError for anything but a regular file,
    FileNotFoundError when it is missing."""
    fd = open_private(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(cap)
    finally:
        os.close(fd)
