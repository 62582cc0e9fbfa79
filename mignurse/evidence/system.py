"""Small host facts: cgroup version (`stat -fc %T /sys/fs/cgroup`) and /etc/os-release."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from mignurse.evidence._common import ProblemLog, clip, split_lines

# stat's %T names for the filesystem mounted at /sys/fs/cgroup.
_CGROUP_VERSIONS = {"cgroup2fs": 2, "tmpfs": 1}


@dataclass(frozen=True, slots=True)
class CgroupInfo:
    version: int | None  # 2 (unified, cgroup2fs), 1 (legacy, tmpfs), None when unknown
    fs_type: str = ""
    problems: tuple[str, ...] = ()


def parse_cgroup_fs(text: str) -> CgroupInfo:
    """`cgroup2fs` → 2, `tmpfs` → 1; anything else is unknown, with a problem saying why."""
    problems = ProblemLog()
    lines = [line.strip() for line in split_lines(text) if line.strip()]
    if not lines:
        problems.add("empty cgroup-fs output")
        return CgroupInfo(None, "", problems.result())
    fs_type = lines[0]
    if len(lines) > 1:
        problems.add(f"unexpected extra output: {clip(' '.join(lines[1:]))!r}")
    version = _CGROUP_VERSIONS.get(fs_type)
    if version is None:
        problems.add(f"unrecognised filesystem type {clip(fs_type)!r} for /sys/fs/cgroup")
        # A stat error ("stat: cannot read …") is not a filesystem type.
        if " " in fs_type:
            fs_type = ""
    return CgroupInfo(version, fs_type, problems.result())


# `mount` prints "<src> on <dir> type <fs> (<opts>)"; /proc/mounts "<src> <dir> <fs> <opts> 0 0".
_MOUNT_LINE = re.compile(r"\S+ on (\S+) type (\S+) \(.*\)")
_PROC_MOUNTS_LINE = re.compile(r"\S+ (\S+) (\S+) \S+ \d+ \d+")
_MOUNT_FS_TO_STAT = {"cgroup2": "cgroup2fs", "tmpfs": "tmpfs"}


def parse_cgroup_mounts(text: str) -> CgroupInfo:
    """The cgroup version from a mount table (`mount` output or /proc/mounts): what is
    mounted on /sys/fs/cgroup itself, named as `stat -fc %T` would name it; a hybrid host
    (tmpfs there, cgroup2 only under unified/) is v1. Other lines (a `df` after it) are skipped."""
    problems = ProblemLog()
    fs_type = ""
    for line in split_lines(text):
        m = _MOUNT_LINE.fullmatch(line.strip()) or _PROC_MOUNTS_LINE.fullmatch(line.strip())
        if m is not None and m.group(1) == "/sys/fs/cgroup":
            fs_type = m.group(2)  # the last mount on a directory is the one in force
    if not fs_type:
        problems.add("nothing mounted on /sys/fs/cgroup in the mount table")
        return CgroupInfo(None, "", problems.result())
    stat_name = _MOUNT_FS_TO_STAT.get(fs_type, "")
    version = _CGROUP_VERSIONS.get(stat_name)
    if version is None:
        problems.add(f"unrecognised filesystem type {clip(fs_type)!r} on /sys/fs/cgroup")
    return CgroupInfo(version, stat_name or fs_type, problems.result())


# os-release(5): KEY=value, shell-style quoting, "#" comments; keys are [A-Z0-9_] by spec.
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)")
_ESCAPED = re.compile(r"\\([\\$\"`])")

ID_AMAZON_LINUX = "amzn"
ID_BOTTLEROCKET = "bottlerocket"
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _no_fields() -> Mapping[str, str]:
    return _EMPTY


@dataclass(frozen=True, slots=True)
class OsRelease:
    id: str = ""
    version_id: str = ""
    pretty_name: str = ""
    variant_id: str = ""
    fields: Mapping[str, str] = field(default_factory=_no_fields)
    problems: tuple[str, ...] = ()

    @property
    def is_al2023(self) -> bool:
        return self.id == ID_AMAZON_LINUX and self.version_id.startswith("2023")

    @property
    def is_al2(self) -> bool:
        return self.id == ID_AMAZON_LINUX and self.version_id == "2"

    @property
    def is_bottlerocket(self) -> bool:
        return self.id == ID_BOTTLEROCKET


def _unquote(raw: str) -> tuple[str, str | None]:
    """The value and, when it is malformed, what is wrong with it."""
    value = raw.strip()
    if not value:
        return "", None
    quote = value[0]
    if quote in "\"'":
        if len(value) < 2 or value[-1] != quote:
            return value.lstrip(quote), "unterminated quote"
        inner = value[1:-1]
        return (_ESCAPED.sub(r"\1", inner) if quote == '"' else inner), None
    return _ESCAPED.sub(r"\1", value), None


def parse_os_release(text: str) -> OsRelease:
    """The fields of /etc/os-release; later duplicates win, as a shell would have it."""
    problems = ProblemLog()
    fields: dict[str, str] = {}
    for number, line in enumerate(split_lines(text), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _ASSIGNMENT.fullmatch(stripped)
        if m is None:
            problems.line(number, f"not KEY=value: {clip(stripped)!r}")
            continue
        value, trouble = _unquote(m.group(2))
        if trouble:
            problems.line(number, f"{m.group(1)}: {trouble}")
        fields[m.group(1)] = value
    if not text.strip():
        problems.add("empty os-release")
    elif "ID" not in fields:
        problems.add("no ID field")
    return OsRelease(
        id=fields.get("ID", ""),
        version_id=fields.get("VERSION_ID", ""),
        pretty_name=fields.get("PRETTY_NAME", ""),
        variant_id=fields.get("VARIANT_ID", ""),
        fields=MappingProxyType(fields),
        problems=problems.result(),
    )
