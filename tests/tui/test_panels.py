"""What the app's panels say, without a screen: the findings in deadline order, a timeline
whose rows read apart, node rows cut to fit 80 columns, and a help screen that lists every
key the app and its screens bind."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console
from textual.binding import Binding

from mignurse.diagnose.findings import CRITICAL, INFO, WARNING, Finding
from mignurse.diagnose.timeline import TimelineEntry
from mignurse.nodeview import NodeRow
from mignurse.tui.app import MigNurseApp
from mignurse.tui.detail import _timeline_table, sorted_findings
from mignurse.tui.refresh import (
    CELL_PADDING,
    TABLE_COLUMNS,
    column_widths,
    fit_cell,
    fitted_cells,
    table_columns,
)
from mignurse.tui.screens.audit import AuditScreen
from mignurse.tui.screens.confirm import ConfirmScreen
from mignurse.tui.screens.help import KEYS, HelpScreen
from mignurse.tui.screens.pager import PagerScreen
from mignurse.tui.screens.params import ParamsScreen
from mignurse.tui.screens.picker import RunbookPicker
from mignurse.tui.screens.plan import PlanScreen
from mignurse.tui.screens.run import RunScreen
from mignurse.tui.screens.run_steps import RunStepsScreen

NOW = datetime(2026, 11, 29, 2, 55, tzinfo=UTC)


def finding(fid: str, severity: str, deadline_in: float | None = None) -> Finding:
    deadline = NOW + timedelta(seconds=deadline_in) if deadline_in is not None else None
    return Finding(fid, severity, "gpu-inference", (), f"{fid} summary", deadline=deadline)


def test_findings_nearest_deadline_first_within_a_severity() -> None:
    ranked = [  # as the rules ranked them: the far deadline above the one due now
        finding("later", CRITICAL, 128),
        finding("info", INFO),
        finding("no-deadline", CRITICAL),
        finding("now", CRITICAL, 0),
        finding("warn", WARNING, 5),
    ]

    shown = [f.id for f in sorted_findings(ranked)]

    assert shown == ["now", "later", "no-deadline", "warn", "info"]


def render(renderable: object, width: int = 120) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def test_timeline_rows_minutes_apart_read_apart() -> None:
    entries = [
        TimelineEntry(NOW - timedelta(minutes=20, seconds=40), "event", "Ready=False"),
        TimelineEntry(NOW - timedelta(minutes=20, seconds=10), "event", "Ready=True"),
        TimelineEntry(NOW - timedelta(days=1, minutes=3), "history", "joined"),
    ]

    lines = render(_timeline_table(entries, NOW, 15)).splitlines()

    rows = [line.split() for line in lines[1:] if line.strip()]
    assert [r[:2] for r in rows[:2]] == [["02:34:20", "20m40s"], ["02:34:50", "20m10s"]]
    assert rows[2][:3] == ["11-28", "02:52:00", "24h03m"]  # another day: its date too


def node_row(name: str, status: str, gpu: str, mig: str, ahr: str, taints: str) -> NodeRow:
    return NodeRow(
        name=f"{name}.us-west-2.compute.internal",
        pool="gpu-mig",
        pool_kind="nodepool",
        instance_type="p5.48xlarge",
        status_word=status.split()[0],
        status=status,
        age="5d23h",
        gpu=gpu,
        gpu_detail=gpu,
        mig=mig,
        ahr=ahr,
        ahr_ok=ahr == "ok",
        taints=taints,
        capacity_type="on-demand",
        zone="us-west-2a",
        instance_id="i-0",
        nodeclaim="",
        os_image="",
        runtime="",
        badge=CRITICAL if status.startswith("NotReady") else "",
    )


MIG_ROWS = [
    node_row("ip-10-0-0-114", "NotReady 18m", "none", "all-1g.10gb failed", "ok", "not-ready"),
    node_row("ip-10-0-15-222", "Ready 5d23h", "56×1g.10gb", "all-1g.10gb success", "ok", "-"),
    node_row("ip-10-0-41-207", "Ready 7m", "4/4", "-", "False DCGMError", "cordoned,not-ready"),
]


@pytest.mark.parametrize("width", [80, 100, 120])
def test_rows_wider_than_the_screen_are_cut_so_ahr_and_taints_stay_in_view(width: int) -> None:
    columns = table_columns(width, one_pool=True)
    assert {"AHR", "CORDONED/TAINTS", "MIG", "GPU", "STATUS"} <= set(columns)

    widths = column_widths(MIG_ROWS, frozenset(), columns, width, scrollbar=True)

    assert sum(widths.values()) + CELL_PADDING * len(widths) <= width - 2
    cells = [fitted_cells(row, frozenset(), widths) for row in MIG_ROWS]
    assert [c["NAME"] for c in cells] == ["ip-10-0-0-114", "ip-10-0-15-222", "ip-10-0-41-207"]
    assert cells[0]["STATUS"].startswith("NotReady")  # the age goes first, never the word
    assert cells[2]["CORDONED/TAINTS"].startswith("cordoned")
    assert cells[2]["AHR"].startswith("False")
    assert cells[0]["MIG"].endswith("failed") and cells[1]["MIG"].endswith("success")


def test_rows_that_fit_are_not_cut() -> None:
    columns = table_columns(160)

    widths = column_widths(MIG_ROWS, frozenset(), columns, 160)

    cells = fitted_cells(MIG_ROWS[1], frozenset(), widths)
    assert cells["MIG"] == "all-1g.10gb success" and cells["GPU"] == "56×1g.10gb"
    assert set(widths) == set(TABLE_COLUMNS)


def test_a_cut_mig_cell_keeps_its_state_word() -> None:
    assert fit_cell("all-1g.10gb failed", 14, "MIG") == "all-1g… failed"
    assert fit_cell("all-1g.10gb success", 9, "MIG") == "…success"
    assert fit_cell("56×1g.10gb", 7, "GPU") == "56×1g.…"
    assert fit_cell("ok", 3, "AHR") == "ok"
    assert fit_cell("NotReady 18m", 10, "STATUS") == "NotReady"


# -- every key is in `?` -----------------------------------------------------------------------

KEY_WORDS = {
    "escape": "esc",
    "slash": "/",
    "colon": ":",
    "question_mark": "?",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
    "pagedown": "pgdn",
    "pageup": "pgup",
}
SCREENS = (
    MigNurseApp,
    AuditScreen,
    ConfirmScreen,
    HelpScreen,
    PagerScreen,
    ParamsScreen,
    RunbookPicker,
    PlanScreen,
    RunScreen,
    RunStepsScreen,
)


def help_keys() -> set[str]:
    """Every key the help screen names ("j / k" names j and k)."""
    return {
        word for keys, _what, _where in KEYS for part in keys.split(" / ") for word in part.split()
    }


@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: s.__name__)
def test_every_key_a_screen_binds_is_in_help(screen: type) -> None:
    bindings = [b for b in screen.__dict__.get("BINDINGS", []) if isinstance(b, Binding)]
    assert bindings, f"{screen.__name__} binds no key"
    named = help_keys()

    missing = [b.key for b in bindings if KEY_WORDS.get(b.key, b.key_display or b.key) not in named]

    assert not missing, f"{screen.__name__}: {missing} not in the help screen (screens/help.py)"
