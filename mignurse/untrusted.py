"""Reading what a user hands over (a bundle, a folder, a kubeconfig, a runbook) within limits.

Any of these may be broken, truncated or hostile: a gzip bomb, a 3 GB file, `/dev/zero`, a
YAML alias bomb. Each input kind has a cap on what is read; hitting one is a single line
that names the cap and the environment variable that raises it. Nothing here raises
anything but `LimitError` (and `OSError` from the file system).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

# A limit set in the environment only: compiled on first use (through `re`'s own cache).
_SIZE = r"(?i)^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$"
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
# The largest value a limit takes, by unit, unless the limit names its own: what every
# consumer of the value can be handed. Seconds end up as a `select`/`poll` timeout (the
# credential plugin's pipes), and Linux's epoll_wait and poll take milliseconds in a C int
# (CPython Modules/selectmodule.c: "timeout is too large" past INT_MAX ms, 24.8 days); a
# fleet waits a command's seconds plus the plugin's, so each stays at 7 days. Bytes stay far
# below sys.maxsize (a read's size is a C ssize_t). Counts are compared, never allocated.
_LARGEST = {"bytes": 2**40, "seconds": 7 * 86400}
_LARGEST_COUNT = 10**9
_DIGITS_KEPT = 30  # more digits than this is over any largest value, however scaled
_READ_CHUNK = 2**20  # a file is read in pieces: a cap is a bound, not a buffer to allocate


class LimitError(Exception):
    """An input over one of the caps, or a cap set wrong; str() is the one line to show."""

    exit_code = 2

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line  # where in a YAML document, 1-based, when known


def human_bytes(count: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            value = count / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def _size_word(count: int) -> str:
    """A byte count as an environment value: 1T, 16G, 4M, 300K, or plain bytes."""
    for suffix, scale in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if count >= scale and count % scale == 0:
            return f"{count // scale}{suffix}"
    return str(count)


@dataclass(frozen=True)
class Limit:
    """One cap, its default, the environment variable that changes it, and the largest value
    that variable may set (0: the unit's, `_LARGEST`)."""

    env: str
    default: int
    what: str  # "a bundle's unpacked size"
    unit: str = "bytes"  # or "files"
    largest: int = 0

    @property
    def most(self) -> int:
        """The largest value the environment may set."""
        return self.largest or _LARGEST.get(self.unit, _LARGEST_COUNT)

    def value(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        number = 0
        digits = ""
        if self.unit == "bytes":
            found = re.match(_SIZE, raw)
            if found:
                digits, scale = found.group(1), _SCALE[found.group(2).lower()]
        elif raw.isascii() and raw.isdigit():
            digits, scale = raw, 1
        if digits:
            # int() refuses more than 4,300 digits (ValueError): a long number is over anyway.
            number = (
                self.most + 1 if len(digits.lstrip("0")) > _DIGITS_KEPT else int(digits) * scale
            )
        given = raw if len(raw) <= 40 else raw[:39] + "…"  # a 5,000-digit value is not echoed
        if number <= 0:
            example = "8G or 8589934592" if self.unit == "bytes" else str(self.default * 2)
            raise LimitError(
                f"{self.env}={given!r} is not a number of {self.unit} (e.g. {example})"
            )
        if number > self.most:
            raise LimitError(
                f"{self.env}={given!r} is over the largest value it takes: give at most "
                f"{self._largest_words()}"
            )
        return number

    def shown(self, amount: int) -> str:
        return human_bytes(amount) if self.unit == "bytes" else f"{amount:,} {self.unit}"

    def _word(self, amount: int) -> str:
        """An amount as the environment variable takes it."""
        return _size_word(amount) if self.unit == "bytes" else str(amount)

    def _largest_words(self) -> str:
        most = self.most
        if self.unit == "bytes":
            return f"{_size_word(most)} ({human_bytes(most)})"
        if self.unit == "seconds" and most >= 86400 and most % 86400 == 0:
            return f"{most} ({most // 86400} days)"
        return str(most)

    def more_than(self, amount: int) -> str:
        """The setting that allows more than `amount`: four times it, up to the largest value
        (`MIGNURSE_MAX_FILE_BYTES=256M`); "" where `amount` is the largest already."""
        raised = min(amount * 4, self.most)
        return f"{self.env}={self._word(raised)}" if raised > amount else ""

    def refusal(self, subject: str) -> LimitError:
        """`subject` is over the cap: the line says the cap and how to raise it."""
        cap = self.value()
        more = self.more_than(cap)
        how = f"{more} raises it" if more else f"the largest {self.env} takes"
        return LimitError(f"{subject}: over the limit of {self.shown(cap)} for {self.what} ({how})")


BUNDLE_BYTES = Limit("MIGNURSE_MAX_BUNDLE_BYTES", 4 * 2**30, "a bundle's unpacked size")
BUNDLE_FILES = Limit("MIGNURSE_MAX_BUNDLE_FILES", 100_000, "a bundle's file count", "files")
# A bundle's file is read whole into memory, `read(cap)` at once (diagnose/sources/files.py):
# the buffer is the cap's size before a byte is read, so it stays one a machine can allocate.
FILE_BYTES = Limit("MIGNURSE_MAX_FILE_BYTES", 64 * 2**20, "one file of a bundle", largest=2**32)
KUBECONFIG_BYTES = Limit(
    "MIGNURSE_MAX_KUBECONFIG_BYTES", 4 * 2**20, "a kubeconfig file or a file it names"
)
RUNBOOK_BYTES = Limit("MIGNURSE_MAX_RUNBOOK_BYTES", 2**20, "a runbook file")
MIG_PARTED_FILE_BYTES = Limit(
    "MIGNURSE_MAX_MIG_PARTED_FILE_BYTES", 2**20, "a mig-parted file (userdata --mig-parted-file)"
)
# What a kubeconfig's credential plugin (`aws eks get-token`) may take: it answers in a
# second or two, with a few KiB of ExecCredential JSON.
CREDENTIAL_PLUGIN_SECONDS = Limit(
    "MIGNURSE_CREDENTIAL_PLUGIN_SECONDS", 30, "a credential plugin's answer", "seconds"
)
CREDENTIAL_PLUGIN_BYTES = Limit(
    "MIGNURSE_MAX_CREDENTIAL_PLUGIN_BYTES", 2**20, "a credential plugin's output"
)

# What the Kubernetes API server sends back (mignurse/cluster/client.py). A real answer is a
# page of 500 objects (a few MiB) or one object; gzip shrinks JSON lists 10 to 50 times.
RESPONSE_BYTES = Limit("MIGNURSE_MAX_RESPONSE_BYTES", 64 * 2**20, "one API answer, decoded")
RESPONSE_RATIO = Limit(
    "MIGNURSE_MAX_RESPONSE_RATIO", 200, "an API answer's compression ratio", "times"
)
PAGE_ITEMS = Limit("MIGNURSE_MAX_PAGE_ITEMS", 10_000, "the objects in one page", "objects")
LIST_ITEMS = Limit("MIGNURSE_MAX_LIST_ITEMS", 250_000, "the objects of one list", "objects")
REQUEST_SECONDS = Limit("MIGNURSE_REQUEST_TIMEOUT", 30, "one API request", "seconds")
COMMAND_SECONDS = Limit(
    "MIGNURSE_COMMAND_TIMEOUT", 120, "a command's reads of the cluster", "seconds"
)
RETRY_AFTER_SECONDS = Limit(
    "MIGNURSE_MAX_RETRY_AFTER", 10, "a wait the API server asks for", "seconds"
)

# A YAML document's shape: real kubeconfigs and runbooks are a few levels deep and use a
# handful of anchors; an alias bomb or a 200,000-deep nesting is refused before it is walked.
YAML_MAX_DEPTH = 64
YAML_MAX_ALIASES = 1000
YAML_MAX_ALIAS_NODES = 100_000  # the nodes aliases add when the document is expanded


def read_regular_file(path: Path, limit: Limit, subject: str, *, follow: bool = True) -> bytes:
    """The bytes of a regular file no larger than `limit`; a device, a pipe or a folder
    (`/dev/zero`, `<(…)`) is refused without reading it, and so is a symlink unless `follow`
    (a kubeconfig is often one; a file found in a folder of runbooks is not followed). OSError
    when it cannot be opened."""
    # A socket cannot be opened at all (ENXIO): it is told apart before trying.
    _refuse_unless_regular((os.stat if follow else os.lstat)(path).st_mode, subject)
    # O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused. O_NOFOLLOW:
    # a link swapped in after the lstat is not opened either (ELOOP).
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags if follow else flags | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise LimitError(f"{subject} is a symlink: not followed") from None
        raise
    try:
        info = os.fstat(fd)  # what was opened, whatever the path points at by now
        _refuse_unless_regular(info.st_mode, subject)
        cap = limit.value()
        if info.st_size > cap:
            raise limit.refusal(f"{subject} is {human_bytes(info.st_size)}")
        # In pieces, to cap + 1 bytes at most: a file that grows while read stays bounded,
        # and a large cap costs no memory a small file does not fill (`read(cap + 1)` would
        # allocate the whole cap first).
        pieces: list[bytes] = []
        left = cap + 1
        while left > 0:
            piece = os.read(fd, min(left, _READ_CHUNK))
            if not piece:
                break
            pieces.append(piece)
            left -= len(piece)
        data = b"".join(pieces)
        if len(data) > cap:
            raise limit.refusal(f"{subject} is over {human_bytes(cap)}")
        return data
    finally:
        os.close(fd)


def json_value(text: str | bytes) -> Any:
    """`json.loads(text)`, with a document nested past the interpreter's recursion limit
    refused as ValueError, as any other text that is not JSON is (json.loads raises
    RecursionError for `[[[…` a few thousand deep: a cluster's annotation or a log line can
    hold one)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested deeper than the interpreter can read") from None


def _refuse_unless_regular(mode: int, subject: str) -> None:
    if stat.S_ISLNK(mode):  # only met when links are not followed
        raise LimitError(f"{subject} is a symlink: not followed")
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise LimitError(f"{subject} is {kind}")


def compose_yaml(text: str, *, fast: bool = False) -> yaml.Node | None:
    """The YAML document's node graph, refused with a LimitError when it nests deeper than
    YAML_MAX_DEPTH, refers to itself, or expands its aliases past YAML_MAX_ALIASES /
    YAML_MAX_ALIAS_NODES. yaml.YAMLError for bad syntax. `fast`: libyaml's parser where
    installed (its error messages are worded differently from PyYAML's)."""
    import yaml  # only a YAML reader pays for loading it

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader
    try:
        root = yaml.compose(text, Loader=loader)
    except RecursionError:
        raise LimitError(f"nested deeper than {YAML_MAX_DEPTH} levels") from None
    if root is not None:
        check_yaml_shape(root)
    return root


def check_yaml_shape(root: yaml.Node) -> None:
    """Walks the node graph once without recursion; shared nodes are aliases."""
    sizes: dict[int, int] = {}  # id(node) → its expanded node count, once walked
    seen: set[int] = set()
    aliases = 0
    alias_nodes = 0
    # (node, depth, children pushed?) with an explicit stack: deep input must not recurse.
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    open_nodes: set[int] = set()
    while stack:
        node, depth, expanded = stack.pop()
        key = id(node)
        children = _children(node)
        if expanded:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            continue
        if key in open_nodes:
            raise LimitError("an alias refers to the node that holds it", _line(node))
        if key in seen:  # a second reference: an alias, expanded wherever it is used
            aliases += 1
            alias_nodes += sizes.get(key, 1)
            if aliases > YAML_MAX_ALIASES:
                raise LimitError(f"more than {YAML_MAX_ALIASES} aliases", _line(node))
            if alias_nodes > YAML_MAX_ALIAS_NODES:
                raise LimitError(
                    f"aliases expand to more than {YAML_MAX_ALIAS_NODES:,} nodes", _line(node)
                )
            continue
        if depth > YAML_MAX_DEPTH:
            raise LimitError(f"nested deeper than {YAML_MAX_DEPTH} levels", _line(node))
        seen.add(key)
        open_nodes.add(key)
        stack.append((node, depth, True))
        for child in reversed(children):
            stack.append((child, depth + 1, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    import yaml  # loaded already: the node came from it

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _line(node: yaml.Node) -> int:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else 0


def folder_problem(path: Path) -> str:
    """Why `path` cannot be used (or created) as a folder to write in, or ""."""
    probe = path
    try:
        while not probe.exists():
            if probe.parent == probe:
                return ""
            probe = probe.parent
        is_dir = probe.is_dir()
    except OSError as exc:  # a name too long (ENAMETOOLONG), a folder it may not search
        return f"{probe} cannot be used: {exc.strerror or exc}"
    if not is_dir:
        return f"{probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return ""
