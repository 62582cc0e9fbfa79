"""A container's log file as the kubelet keeps it, read into journal entries.

`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log` holds one of two shapes
(kubernetes/kubernetes@04791b4906602ffda5ccf9bc4c84d3329f1d7080
pkg/kubelet/kuberuntime/logs/logs.go, parseCRILog and parseDockerJSONLog):

- CRI (containerd): `2026-11-29T03:02:10.123456789Z stderr F <text>`; tag `P` marks a partial
  line the runtime split, continued by the next line of the same stream up to an `F`;
- Docker json-file: `{"log":"<text>\\n","stream":"stderr","time":"2026-…Z"}`; a `log` without
  its trailing newline is a partial line in the same way.

A `==> <path> <==` line (what `tail` prints between files, and what the collector writes
before each file it copies) names the container whose lines follow. The result is a
JournalParse, so rules read an agent's log like a journal: `ident` is the container name
where known. Nothing here raises on garbled, truncated or empty input.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from mignurse.evidence._common import ProblemLog, clip, split_lines
from mignurse.evidence.journal import JournalEntry, JournalParse

FORMAT_CRI = "cri"
FORMAT_DOCKER_JSON = "docker-json"

# RFC 3339 with up to nine fraction digits (Go's time.RFC3339Nano drops trailing zeros).
_CRI = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d))"
    r" (stdout|stderr) ([^ ]*)(?: (.*))?"
)
_HEADER = re.compile(r"==> (.*) <==")
# /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log
_POD_LOG = re.compile(r"(?:^|/)([^/_]+)_([^/_]+)_[^/]+/([^/]+)/[^/]*\.log(?:\.\S*)?$")


def _time(stamp: str) -> datetime:
    """Raises ValueError for impossible dates; fromisoformat keeps microseconds of nine digits."""
    return datetime.fromisoformat(stamp).astimezone(UTC)


def container_of(path: str) -> str:
    """The container a kubelet log path belongs to ("" when the path is not one)."""
    m = _POD_LOG.search(path.strip())
    return m.group(3) if m else ""


@dataclass
class _Pending:
    """A line a runtime split into partial pieces, per stream, until its last piece."""

    time: datetime
    line: int
    ident: str
    parts: list[str] = field(default_factory=list)


class _Joiner:
    """The entries read so far, and per stream the pieces of a line the runtime split, until
    its last piece arrives; `ident` is the container the lines now belong to."""

    def __init__(self, source: str, ident: str) -> None:
        self.source = source
        self.ident = ident
        self.entries: list[JournalEntry] = []
        self._pending: dict[str, _Pending] = {}

    def add(self, stream: str, when: datetime, number: int, content: str, partial: bool) -> None:
        piece = self._pending.get(stream)
        if piece is None:
            piece = self._pending[stream] = _Pending(when, number, self.ident)
        piece.parts.append(content)
        if not partial:
            self._emit(stream, piece)

    def flush(self, problems: ProblemLog) -> None:
        """Every line still waiting for a piece becomes an entry as it is, noted."""
        for stream, piece in list(self._pending.items()):
            problems.line(piece.line, "partial line never completed")
            self._emit(stream, piece)

    def _emit(self, stream: str, piece: _Pending) -> None:
        self.entries.append(
            JournalEntry(
                piece.time, "", piece.ident, None, "".join(piece.parts), 0, piece.line, self.source
            )
        )
        self._pending.pop(stream, None)


def parse_container_log(text: str, source: str, container: str = "") -> JournalParse:
    """Every line the container wrote, partial pieces joined, with its file line number.

    `container` names the container when the text carries no `==> path <==` header.
    """
    problems = ProblemLog()
    joined = _Joiner(source, container)
    lines = split_lines(text)
    formats: set[str] = set()
    decoder = json.JSONDecoder()

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _CRI.fullmatch(line)
        if m is not None:
            stamp, stream, tags, content = m.groups()
            try:
                when = _time(stamp)
            except ValueError:
                problems.line(number, f"bad timestamp {stamp!r}")
                continue
            formats.add(FORMAT_CRI)
            joined.add(stream, when, number, content or "", tags.split(":")[0] == "P")
            continue
        if line.lstrip().startswith("{"):
            doc = _docker_line(decoder, line)
            if isinstance(doc, dict) and isinstance(doc.get("log"), str):
                if _add_docker(doc, number, joined, problems):
                    formats.add(FORMAT_DOCKER_JSON)
                continue
        header = _HEADER.fullmatch(line.strip())
        if header is not None:
            joined.flush(problems)
            joined.ident = container_of(header.group(1)) or container
            continue
        problems.line(number, f"not a container log line: {clip(line)!r}")

    # A file cut by the collector's size bound can end inside a split line.
    joined.flush(problems)
    entries = sorted(joined.entries, key=lambda e: e.line)
    if not text.strip():
        problems.add("empty container log")
    elif not entries:
        problems.add("no container log lines could be read")
    return JournalParse(
        source=source,
        entries=tuple(entries),
        problems=problems.result(),
        boots=("",),
        lines=len(lines),
        format="+".join(sorted(formats)),
    )


def _add_docker(doc: dict[str, object], number: int, joined: _Joiner, problems: ProblemLog) -> bool:
    """One json-file line into `joined`; False, noted, when its time is bad or missing."""
    stamp, stream = doc.get("time"), doc.get("stream")
    try:
        when = _time(stamp if isinstance(stamp, str) else "")
    except ValueError:
        problems.line(number, f"bad or missing time {clip(str(stamp))!r}")
        return False
    body = str(doc["log"])
    stream_name = stream if isinstance(stream, str) else ""
    joined.add(stream_name, when, number, body.removesuffix("\n"), not body.endswith("\n"))
    return True


def _docker_line(decoder: json.JSONDecoder, line: str) -> object:
    try:
        doc, end = decoder.raw_decode(line.strip())
    except (ValueError, RecursionError):
        return None
    return doc if end == len(line.strip()) else None
