"""The detail pane's tables drawn as lines of text: cluster strings stay inert whatever
console draws them, a long message wraps under its own column without moving the others,
and the `d` pager shows every word."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from rich.console import Console

from mignurse.diagnose.timeline import TimelineEntry
from mignurse.model import Node, Pod
from mignurse.model.fields import Condition
from mignurse.tui.detail import ColumnLines, node_detail
from mignurse.tui.shown import drawn_key

NOW = datetime(2025, 11, 29, 2, 55, tzinfo=UTC)
HOSTILE = "ok\x1b]52;c;aGk=\x07\u202eevil\x9b2J"


def render(renderable: object, width: int) -> str:
    # A plain rich console, not the app's inert one: the lines must be inert on their own.
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def node(message: str, reason: str = "KubeletNotReady") -> Node:
    since = NOW - timedelta(minutes=7)
    return Node(
        name="ip-10-0-41-207",
        pool="gpu",
        labels={"karpenter.sh/nodepool": "gpu", "nvidia.com/mig.config": HOSTILE},
        conditions=(
            Condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "fine", since),
            Condition("Ready", "False", reason, message, since),
        ),
    )


def test_cluster_strings_stay_inert_in_every_table() -> None:
    pods = [Pod(namespace="ml", name=f"trainer-{HOSTILE}", phase=HOSTILE, ready=True)]
    timeline = [TimelineEntry(NOW - timedelta(minutes=3), f"event{HOSTILE}", f"Warning {HOSTILE}")]

    text = render(node_detail(node(HOSTILE, reason=HOSTILE), timeline, NOW, pods), 200)

    assert not any(c in text for c in "\x1b\x07\x9b\u202e")
    # shown visibly, as `inert` shows them, in the conditions, labels, timeline and pods
    shown = "ok\\x1b]52;c;aGk=\\x07<U+202E>evil\\x9b2J"
    assert text.count(shown) >= 6
    header = next(line for line in text.splitlines() if "CONDITION" in line)
    row = next(line for line in text.splitlines() if line.startswith(" Ready "))
    assert row.index(shown) == header.index("REASON")  # measured as shown: columns line up


def test_a_long_message_wraps_under_its_column_and_moves_no_other() -> None:
    words = " ".join(f"word{i}" for i in range(120))

    short = render(node_detail(node("short"), [], NOW, []), 100).splitlines()
    long = render(node_detail(node(words), [], NOW, []), 100).splitlines()

    header = next(line for line in long if "CONDITION" in line).rstrip()
    assert header == next(line for line in short if "CONDITION" in line).rstrip()
    message_at = header.index("MESSAGE")
    first = next(i for i, line in enumerate(long) if line.startswith(" Ready "))
    end = long.index("", first)
    rest = long[first + 1 : end]
    assert len(rest) >= 10
    assert long[first][message_at:].startswith("word0 word1")
    assert all(line[:message_at].strip() == "" and line[message_at] != " " for line in rest)
    assert all(len(line.rstrip()) <= 100 for line in long)
    wrapped = " ".join(line[message_at:].strip() for line in long[first:end])
    assert words in wrapped  # every word, in order, under its column


def test_the_pager_shows_every_label_the_pane_leaves_out() -> None:
    detail = node("fine")
    detail = Node(
        name=detail.name, labels={**detail.labels, "example.com/team": "vision"}, pool="gpu"
    )

    assert "example.com/team" not in render(node_detail(detail, [], NOW, []), 120)
    assert "example.com/team" in render(node_detail(detail, [], NOW, [], full=True), 120)


def test_the_same_detail_is_the_same_drawn_key_and_a_changed_cell_another() -> None:
    one = drawn_key(node_detail(node("fine"), [], NOW, []))
    assert one is not None and one == drawn_key(node_detail(node("fine"), [], NOW, []))
    assert one != drawn_key(node_detail(node("worse"), [], NOW, []))


def test_wide_columns_narrow_together_so_no_one_is_squeezed() -> None:
    # A condition whose type, reason and message are all long (a hostile or verbose agent):
    # the three share the room, as a rich Table collapses its widest columns first; the
    # message is not left a sliver that wraps it over dozens of lines.
    long = "x" * 250
    table = ColumnLines(("CONDITION", "STATUS", "REASON", "MESSAGE"), [[long, "True", long, long]])
    widths = table._widths(100)
    wide = [widths[0], widths[2], widths[3]]
    assert sum(widths) + 2 * len(widths) <= 100
    assert max(wide) - min(wide) <= 1, widths
    assert widths[1] == len("STATUS")
