"""A piped list of runbooks or past runs is what rich drew before (a borderless table, folded at
200 columns), whether `mignurse.render.print_listing` writes it itself or hands it to rich: a
script reading `mignurse runs | awk …` sees the same bytes either way."""

from __future__ import annotations

import io
import random
import sys

import pytest
from rich.table import Table

from mignurse.inert import inert
from mignurse.render import console_for, print_listing

COLUMNS = ("STARTED", "RUN", "RUNBOOK", "CONTEXT", "TARGET", "WHO", "OUTCOME")


def drawn_by_rich(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """The table as the run list drew it with rich (rich 15, Table(box=None, pad_edge=False,
    show_edge=False), each cell inert, piped at 200 columns)."""
    from rich.text import Text

    out = io.StringIO()
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(Text(inert(str(cell))) for cell in row))
    console_for(out, highlight=False, width=200).print(table)
    return out.getvalue()


def run_row(context: str = "prod", who: str = "alice", outcome: str = "verified") -> tuple:
    return ("2026-12-06 05:12:44", "r-7f3a", "cordon", context, "ip-10-0-1-5", who, outcome)


CASES = {
    "no runs yet": [],
    "one run": [run_row()],
    "an empty cell": [run_row(who="")],
    "a failed undo": [run_row(outcome="failed (then undone)")],
    "just under the width": [run_row(context="c" * 131)],
    "exactly the width": [run_row(context="c" * 132)],
    "one past the width": [run_row(context="c" * 133)],
    "a long EKS context ARN": [
        run_row(context="arn:aws:eks:us-west-2:123456789012:cluster/" + "gpu-" * 40)
    ],
    "words past the width": [run_row(outcome=" ".join(["blocked"] * 30))],
    "a space at either end": [run_row(who=" alice "), run_row()],
    "two spaces inside": [run_row(outcome="failed  twice")],
    "wide characters": [run_row(who="ユーザー")],
    "an accent": [run_row(who="José")],
    "a tab and a line feed": [run_row(context="prod\tus\nwest")],
    "an escape sequence": [run_row(who="\x1b[31mroot\x1b[0m")],
    "a zero-width joiner": [run_row(who="a\u200db")],
}


@pytest.mark.parametrize("rows", CASES.values(), ids=CASES.keys())
def test_a_piped_run_list_reads_byte_for_byte_as_rich_drew_it(
    rows: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    print_listing(COLUMNS, rows, out)
    assert out.getvalue() == drawn_by_rich(COLUMNS, rows)


def test_a_forced_colour_list_is_still_drawn_by_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    """FORCE_COLOR asks for rich's styles on a pipe: the bold header must come through."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    out = io.StringIO()
    print_listing(COLUMNS, [run_row()], out)
    assert "\x1b[" in out.getvalue() and "r-7f3a" in out.getvalue()


PLAIN = (
    "no runs yet",
    "one run",
    "an empty cell",
    "a failed undo",
    "exactly the width",
    "one past the width",
    "a long EKS context ARN",
    "words past the width",
)


@pytest.mark.parametrize("case", PLAIN)
def test_a_piped_run_list_of_plain_words_is_written_without_rich(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    with monkeypatch.context() as blocked:
        for module in ("rich.table", "rich.text", "rich.console"):
            blocked.setitem(sys.modules, module, None)  # any import of it fails
        print_listing(COLUMNS, CASES[case], out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == list(COLUMNS)
    assert sum("r-7f3a" in line for line in lines) == len(CASES[case])
    assert out.getvalue() == drawn_by_rich(COLUMNS, CASES[case])


def random_table(rng: random.Random) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Columns and rows of plain words, from a word of one letter to one wider than the page:
    tables that fit, and tables whose widest columns rich narrows and folds."""
    scale = rng.choice([(1, 3, 6, 10, 20), (5, 15, 40, 60), (1, 2, 100, 150, 210), (30, 45, 70)])

    def word() -> str:
        size = max(1, rng.choice(scale) + rng.randint(-3, 3))
        return "".join(
            rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-_:/=*.!~[]") for _ in range(size)
        )

    def cell() -> str:
        return " ".join(word() for _ in range(rng.choice([0, 1, 1, 2, 3, 5, 8, 12])))

    count = rng.randint(1, 9)
    columns = tuple(rng.choice([*COLUMNS, "X" * rng.randint(1, 30)]) for _ in range(count))
    return columns, [tuple(cell() for _ in range(count)) for _ in range(rng.randint(0, 6))]


@pytest.mark.parametrize("seed", range(8))
def test_a_piped_list_too_wide_for_the_page_folds_its_widest_columns_as_rich_folds_them(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long parameter lists, ARNs and outcomes: the columns rich narrows, and where it breaks
    each cell, are the same written here without rich."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    rng = random.Random(seed)
    for _ in range(40):
        columns, rows = random_table(rng)
        out = io.StringIO()
        with monkeypatch.context() as blocked:
            for module in ("rich.table", "rich.text", "rich.console"):
                blocked.setitem(sys.modules, module, None)  # drawn here, or it fails
            print_listing(columns, rows, out)
        assert out.getvalue() == drawn_by_rich(columns, rows), (columns, rows)
