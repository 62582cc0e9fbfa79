"""Reading what a user hands over (a bundle, a folder, a kubeconfig, a runbook) within limits.

Any of these may be broken, truncated or hostile: a gzip bomb, a 3 GB file, `/dev/zero`, a
YAML alias bomb. Each input kind has a cap on what is read; hitting one is a single line
that names the cap and the environment variable that raises it. Nothing here raises
anything but `LimitError` (and `OSError` from the file system).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml

# A limit set in the environment only: compiled on first use (through `re`'s own cache).
_SIZE = r"(?i)^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$"
_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


class LimitError(Exception):
    """An input over one of the caps, or a cap set wrong; str() is the one line to show."""

    exit_code = 2

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line  # where in a YAML document, 1-based, when known


def human_bytes(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            value = count / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def _size_word(count: int) -> str:
    """A byte count as an environment value: 16G, 4M, 300K, or plain bytes."""
    for suffix, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if count >= scale and count % scale == 0:
            return f"{count // scale}{suffix}"
    return str(count)


@dataclass(frozen=True)
class Limit:
    """One cap, its default, and the environment variable that changes it."""

    env: str
    default: int
    what: str  # "a bundle's unpacked size"
    unit: str = "bytes"  # or "files"

    def value(self) -> int:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        number = 0
        if self.unit == "bytes":
            found = re.match(_SIZE, raw)
            if found:
                number = int(found.group(1)) * _SCALE[found.group(2).lower()]
        elif raw.isascii() and raw.isdigit():
            number = int(raw)
        if number <= 0:
            example = "8G or 8589934592" if self.unit == "bytes" else str(self.default * 2)
            raise LimitError(f"{self.env}={raw!r} is not a number of {self.unit} (e.g. {example})")
        return number

    def shown(self, amount: int) -> str:
        return human_bytes(amount) if self.unit == "bytes" else f"{amount:,} {self.unit}"

    def refusal(self, subject: str) -> LimitError:
        """`subject` is over the cap: the line says the cap and how to raise it."""
        cap = self.value()
        raised = _size_word(cap * 4) if self.unit == "bytes" else str(cap * 4)
        return LimitError(
            f"{subject}: over the limit of {self.shown(cap)} for {self.what} "
            f"({self.env}={raised} raises it)"
        )


BUNDLE_BYTES = Limit("MIGNURSE_MAX_BUNDLE_BYTES", 4 * 2**30, "a bundle's unpacked size")
BUNDLE_FILES = Limit("MIGNURSE_MAX_BUNDLE_FILES", 100_000, "a bundle's file count", "files")
FILE_BYTES = Limit("MIGNURSE_MAX_FILE_BYTES", 64 * 2**20, "one file of a bundle")
KUBECONFIG_BYTES = Limit(
    "MIGNURSE_MAX_KUBECONFIG_BYTES", 4 * 2**20, "a kubeconfig file or a file it names"
)
RUNBOOK_BYTES = Limit("MIGNURSE_MAX_RUNBOOK_BYTES", 2**20, "a runbook file")
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


def read_regular_file(path: Path, limit: Limit, subject: str) -> bytes:
    """The bytes of a regular file no larger than `limit`; a device, a pipe or a folder
    (`/dev/zero`, `<(…)`) is refused without reading it. OSError when it cannot be opened."""
    # A socket cannot be opened at all (ENXIO): it is told apart before trying.
    _refuse_unless_regular(os.stat(path).st_mode, subject)
    # O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)  # what was opened, whatever the path points at by now
        _refuse_unless_regular(info.st_mode, subject)
        cap = limit.value()
        if info.st_size > cap:
            raise limit.refusal(f"{subject} is {human_bytes(info.st_size)}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(cap + 1)  # a file that grows while read stays bounded
        if len(data) > cap:
            raise limit.refusal(f"{subject} is over {human_bytes(cap)}")
        return data
    finally:
        os.close(fd)


def _refuse_unless_regular(mode: int, subject: str) -> None:
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
    while not probe.exists():
        if probe.parent == probe:
            return ""
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is not writable"
    return ""
