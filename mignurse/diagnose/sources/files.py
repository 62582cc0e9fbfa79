"""A snapshot folder's or bundle tarball's files, read within limits.

`BundleFiles` maps relative POSIX paths to bytes for a folder or a `.tar.gz`, whatever its
top folder; `is_read` says which names mignurse reads (the cluster documents, the node files
under `nodes/<node>/`, the files of the foreign node bundles it knows). A tarball is read in
one pass and only those files are kept; a folder is read file by file. Every read is bounded
by `mignurse.untrusted` and by the tar header checks here.
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
import zlib
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from mignurse.diagnose.foreign_bundles import foreign_file_is_read
from mignurse.diagnose.sources.gathered import SourceError
from mignurse.untrusted import (
    BUNDLE_BYTES,
    BUNDLE_FILES,
    FILE_BYTES,
    LimitError,
    human_bytes,
)

# What a bundle is read for: everything else in it is named (layouts are told by their
# names) but never held in memory.
# The node's journals: unit → file under nodes/<node>/.
JOURNALS = {
    "kubelet": "kubelet.log",
    "containerd": "containerd.log",
    "nodeadm": "nodeadm.log",
    "kernel": "kernel.log",
    "kernel-previous-boot": "kernel-previous-boot.log",
}

CLUSTER_DOCUMENTS = (
    "nodes",
    "events",
    "nodeclaims",
    "nodepools",
    "pods",
    "karpenter",
    "clusterpolicy",
    "migconfigmaps",
    "nodegroups",
    "resourceslices",
    "resourceclaims",
    "daemonsets",
)
NODE_FILES = frozenset(
    {
        *JOURNALS.values(),
        "nma.log",
        "cgroup-fs.txt",
        "os-release",
        "errors.txt",
        "nvml.json",
        "nvidia-smi.xml",
        "nvidia-smi-L.txt",
        "nvidia-smi-q.txt",
        "mig-lgi.txt",
        "nvidia-bug-report.log",
        "cloud-init-status.json",
        "cloud-init-status.txt",
        "cloud-init-run-status.json",
        "cloud-init-run-result.json",
    }
)
_TOP_FILES = frozenset(
    {"manifest.json"}
    | {f"{name}.json" for name in CLUSTER_DOCUMENTS}
    | {f"cluster/{name}.json" for name in CLUSTER_DOCUMENTS}
)
# Tar entry types whose data tarfile reads into memory as a header (pax, GNU long names).
_HEADER_TYPES = frozenset(
    {tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}
    | {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK}
)
MAX_HEADER_BYTES = 64 * 2**10  # a real pax header holds a path, times and a few xattrs
_LATEST_MTIME = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
# gzip, bzip2, xz: a file that starts so and does not open is a damaged bundle.
_COMPRESSED = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ")


def is_read(name: str) -> bool:
    """Whether a bundle file of this name (under at most one top folder) is one mignurse reads."""
    parts = name.split("/")
    for rest in (parts, parts[1:]):
        if "/".join(rest) in _TOP_FILES:
            return True
        if len(rest) == 3 and rest[0] == "nodes" and rest[2] in NODE_FILES:
            return True
    return foreign_file_is_read(name)


class _Refused(Exception):
    """Raised from inside tarfile's header parsing: the archive is refused."""


class _BoundedTarInfo(tarfile.TarInfo):
    """A member whose extended header (pax, GNU long name) tarfile reads whole into memory
    is refused first when it is larger than any real one; the rest count to the total."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES:
            if self.size > MAX_HEADER_BYTES:
                raise _Refused(f"an extended tar header of {self.size} bytes")
            if isinstance(archive, _Archive):
                archive.header_bytes += max(self.size, 0)
        return super()._proc_member(archive)  # type: ignore[misc]


class _Archive(tarfile.TarFile):
    tarinfo = _BoundedTarInfo
    header_bytes = 0  # extended headers read so far: unpacked bytes no member accounts for


def _mtime(member: tarfile.TarInfo) -> float:
    """A member's mtime as a time this program can hold (a pax header can say anything)."""
    mtime = member.mtime
    if not isinstance(mtime, int | float) or not 0 < mtime < _LATEST_MTIME:
        return 0
    return float(mtime)


def _open_archive(path: Path) -> BinaryIO:
    return path.open("rb")


def _member_name(name: str) -> str | None:
    """A member's path with `./` dropped; "" for the archive's own `.`; None when it names
    a place outside the archive (absolute, or through `..`)."""
    if name.startswith("/"):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


class BundleFiles:
    """Relative POSIX path → bytes, for a directory or a .tar.gz, whatever its top folder.

    A tarball is read once, front to back (a compressed stream cannot seek), keeping only
    the files mignurse reads; a folder is read file by file. Both are capped (total size,
    file count, size of one file: `mignurse.untrusted`). A file that cannot be read reads as
    absent and is listed in `problems`; an archive that ends early keeps what came before the
    cut. A folder's links that lead outside it are not followed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.names: list[str] = []
        self.top = ""  # the single top folder a tarball's members sit under
        self.newest_mtime: datetime | None = None  # a tarball's newest member: when it was made
        self.problems: list[str] = []
        self.cut: dict[str, str] = {}  # a file read only up to the cap → the note saying so
        self._extra: dict[str, bytes] = {}
        self._held: dict[str, bytes] = {}  # a tarball's files that mignurse reads
        self._folder: Path | None = None
        self._links: dict[str, Path] = {}  # a folder's links that stay inside it
        self._read_bytes = 0
        try:
            if path.is_dir():
                self._list_folder(path)
            elif path.is_file():
                self._read_tarball(path)
            elif path.exists():
                raise SourceError(f"{path} is neither a snapshot directory nor a .tar.gz bundle")
            else:
                raise SourceError(f"{path} does not exist")
        except LimitError as exc:
            raise SourceError(str(exc)) from None
        self._present = set(self.names)

    def _list_folder(self, root: Path) -> None:
        self._folder = root
        inside = root.resolve()
        cap = BUNDLE_FILES.value()
        names: list[str] = []
        folders = 0
        for dirpath, dirs, filenames in os.walk(root):  # links to folders are not entered
            folders += len(dirs)
            if folders > cap:
                raise BUNDLE_FILES.refusal(f"{root} holds {folders:,} folders or more")
            for filename in filenames:
                full = Path(dirpath) / filename
                name = full.relative_to(root).as_posix()
                if len(names) >= cap:
                    raise BUNDLE_FILES.refusal(f"{root} holds {cap + 1:,} files or more")
                if full.is_symlink():
                    try:
                        target = full.resolve()
                    except (OSError, RuntimeError) as exc:  # a loop (3.11: RuntimeError)
                        if is_read(name):
                            why = exc.strerror if isinstance(exc, OSError) else "a loop"
                            self.problems.append(
                                f"{name} is a link that does not resolve ({why}): not read"
                            )
                        continue
                    if not target.is_relative_to(inside):
                        if is_read(name):
                            self.problems.append(
                                f"{name} links outside {root} (to {target}): not read"
                            )
                        continue
                    if target.is_file():
                        self._links[name] = target
                        names.append(name)
                elif full.is_file():
                    names.append(name)
                elif is_read(name):  # a FIFO, a socket or a device: never opened
                    self.problems.append(f"{name} is not a regular file: not read")
        self.names = sorted(names)

    def _read_tarball(self, path: Path) -> None:
        total_cap, count_cap, file_cap = (
            BUNDLE_BYTES.value(),
            BUNDLE_FILES.value(),
            FILE_BYTES.value(),
        )
        entries = 0
        members_size = 0
        newest = 0.0
        names: list[str] = []
        skipped: list[str] = []  # links, devices, FIFOs: never read, named
        with _open_archive(path) as raw:
            try:
                # "r|*": one pass as a stream; random access would decompress the archive
                # from its start again for every member.
                tar = _Archive.open(fileobj=raw, mode="r|*")
            except _Refused as exc:
                raise SourceError(f"{path} is refused: {exc}") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raw.seek(0)
                if raw.read(6).startswith(_COMPRESSED):
                    raise SourceError(f"{path} is a damaged bundle: {exc}") from None
                raise SourceError(
                    f"{path} is neither a snapshot directory nor a .tar.gz bundle"
                ) from None
            try:
                for member in tar:  # header by header: a cut keeps what came before it
                    entries += 1
                    if entries > count_cap:
                        raise BUNDLE_FILES.refusal(f"{path} holds {entries:,} entries or more")
                    name = _member_name(member.name)
                    if name is None:
                        raise SourceError(
                            f"{path} is refused: its member {member.name!r} points outside the "
                            "archive (an absolute path or ..), which no bundle does"
                        )
                    if member.size < 0:
                        raise SourceError(f"{path} is a damaged bundle: {name} has a negative size")
                    if name and not member.isfile() and not member.isdir():
                        skipped.append(_skipped(name, member))
                        continue
                    if member.isfile() and name and is_read(name) and member.size > file_cap:
                        # Read up to the cap, then stop: going on would unpack the rest of it.
                        self._held[name] = self._head(tar, member, file_cap)
                        names.append(name)
                        self._note_cut(name, member.size, file_cap, f"the rest of {path.name}")
                        break
                    members_size += member.size
                    unpacked = members_size + tar.header_bytes
                    if unpacked > total_cap:
                        raise BUNDLE_BYTES.refusal(
                            f"{path} unpacks to {human_bytes(unpacked)} or more (at {name})"
                        )
                    if not member.isfile() or not name:
                        continue
                    newest = max(newest, _mtime(member))
                    if is_read(name):
                        handle = tar.extractfile(member)
                        if handle is None:
                            continue
                        self._held[name] = handle.read()  # a cut here leaves the name out
                    names.append(name)
            except _Refused as exc:
                raise SourceError(f"{path} is refused: {exc}") from None
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                if not names:
                    raise SourceError(f"{path} is a damaged bundle: {exc}") from None
                self.problems.append(
                    f"{path.name} ends early ({exc}): read the {len(names)} files before the cut"
                )
        if newest > 0:
            self.newest_mtime = datetime.fromtimestamp(newest, UTC)
        prefix = self.top = _common_prefix(names)
        self.names = sorted(name[len(prefix) :] for name in names)
        self._held = {name[len(prefix) :]: data for name, data in self._held.items()}
        self.cut = {name.removeprefix(prefix): note for name, note in self.cut.items()}
        self.problems.extend(_skipped_notes(path.name, skipped))

    def _head(self, tar: tarfile.TarFile, member: tarfile.TarInfo, cap: int) -> bytes:
        handle = tar.extractfile(member)
        return handle.read(cap) if handle is not None else b""

    def _note_cut(self, name: str, size: int, cap: int, rest: str = "") -> None:
        note = (
            f"{name} was cut at {human_bytes(cap)}: it is {human_bytes(size)}, and only its "
            f"first {human_bytes(cap)} were read"
            + (f" ({rest} was not read)" if rest else "")
            + (f"; {more} raises the limit" if (more := FILE_BYTES.more_than(cap)) else "")
        )
        self.cut[name] = note
        self.problems.append(note)

    def cut_notes(self, prefix: str = "") -> list[str]:
        """What was cut at the file cap, of the files under `prefix`."""
        return [note for name, note in sorted(self.cut.items()) if name.startswith(prefix)]

    def close(self) -> None:
        self._held.clear()

    def data(self, name: str) -> bytes | None:
        if name in self._extra:
            return self._extra[name]
        if name not in self._present:
            return None
        if self._folder is None:
            return self._held.get(name)
        cap = FILE_BYTES.value()
        try:
            data, size = _read_head(self._links.get(name) or self._folder / name, cap)
        except OSError as exc:
            self.problems.append(f"{name} could not be read: {exc.strerror or exc}")
            return None
        except LimitError as exc:
            raise SourceError(f"{self._folder}: {name} is {exc}") from None
        if size > cap and name not in self.cut:
            self._note_cut(name, size, cap)
        self._read_bytes += len(data)
        if self._read_bytes > BUNDLE_BYTES.value():
            raise SourceError(
                str(
                    BUNDLE_BYTES.refusal(
                        f"{self._folder}: the files mignurse reads add up to "
                        f"{human_bytes(self._read_bytes)} or more"
                    )
                )
            )
        return data

    def text(self, name: str) -> str | None:
        data = self.data(name)
        return None if data is None else data.decode("utf-8", "replace")

    def add_node_file(self, node: str, filename: str, data: bytes) -> None:
        """A foreign bundle's file under the name a mignurse bundle gives it."""
        self._extra[f"nodes/{node}/{filename}"] = data

    def json(self, *names: str) -> Any:
        """The first of `names` present, parsed; None if none is there."""
        for name in names:
            text = self.text(name)
            if text is None:
                continue
            try:
                return json.loads(text)
            except ValueError as exc:
                raise SourceError(f"{self.path}: {name} is not JSON ({exc})") from None
            except RecursionError:
                raise SourceError(
                    f"{self.path}: {name} nests too deeply to be JSON kubectl wrote"
                ) from None
        return None

    def node_dirs(self) -> list[str]:
        return sorted(
            {
                PurePosixPath(n).parts[1]
                for n in self.names
                if n.startswith("nodes/") and n.count("/") >= 2
            }
        )


def _common_prefix(names: list[str]) -> str:
    """A bundle's single top folder ("mignurse-bundle-…/"), or ""."""
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    if len(tops) == 1 and all("/" in n for n in names):
        return tops.pop() + "/"
    return ""


def _read_head(path: Path, cap: int) -> tuple[bytes, int]:
    """Up to `cap` bytes of a regular file, and its size; a FIFO, a device or a folder is a
    LimitError (never read, never waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LimitError("a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(cap)
        return data, max(info.st_size, len(data))
    finally:
        os.close(fd)


_MEMBER_KINDS = {
    tarfile.SYMTYPE: "a symlink",
    tarfile.LNKTYPE: "a hard link",
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a FIFO",
}


def _skipped(name: str, member: tarfile.TarInfo) -> str:
    kind = _MEMBER_KINDS.get(member.type, f"an entry of type {member.type!r}")
    target = f" to {member.linkname!r}" if member.issym() or member.islnk() else ""
    return f"{name} ({kind}{target})"


def _skipped_notes(archive: str, skipped: list[str]) -> list[str]:
    """One line for the links, devices and FIFOs of a tarball, which are never read: the
    files mignurse reads first, by name, as a folder names its links that lead outside."""
    if not skipped:
        return []
    shown = sorted(skipped, key=lambda entry: not is_read(entry.split(" (", 1)[0]))[:5]
    more = f" and {len(skipped) - len(shown)} more" if len(skipped) > len(shown) else ""
    return [
        f"{archive}: skipped {len(skipped)} entries that are not regular files (mignurse "
        f"reads only files from an archive): {', '.join(shown)}{more}"
    ]
