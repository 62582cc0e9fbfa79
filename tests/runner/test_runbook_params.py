"""A runbook's params and timeouts as an operator types them (mignurse/runner/schema.py):
`--param drain_timeout=90m` stays "90m" and times the step, a misspelt or missing param is one
line, a short node name becomes the cluster's full one, and the confirmation says how the
change is put back."""

from __future__ import annotations

from pathlib import Path

import pytest

from mignurse.runner.schema import (
    ParamSpec,
    RunbookError,
    convert,
    duration_seconds,
    load_runbook,
    load_runbooks,
    parse_assignments,
    resolve_params,
    reversal_words,
)

BOOK = """\
name: drain-it
title: Drain it
target: node
undo: on-failure
params:
  node: {type: node, required: true}
  drain_timeout: {type: duration, default: 10m}
  tries: {type: int, default: 3}
  reason: {type: string}
steps:
  - id: cordon
    action: cordon
  - id: drain
    action: drain
    timeout: drain_timeout
  - id: report
    action: report-node
    timeout: 45
  - id: again
    action: uncordon
    timeout: tries
"""


@pytest.fixture
def book(tmp_path: Path) -> object:
    path = tmp_path / "drain-it.yaml"
    path.write_text(BOOK)
    return load_runbook(path)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("90m", 5400.0), ("6h", 21600.0), ("2d", 172800.0), (" 1m ", 60.0)],
)
def test_a_duration_is_a_count_and_a_unit(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["0m", "90", "1.5h", "m", "-5m", "5 minutes", ""])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration like 90s, 90m, 6h or 2d"):
        duration_seconds(text)


@pytest.mark.parametrize(
    ("kind", "given", "value"),
    [
        ("int", "3", 3),
        ("int", " 12 ", 12),
        ("bool", "yes", True),
        ("bool", "ON", True),
        ("bool", "1", True),
        ("bool", "off", False),
        ("bool", "n", False),
        ("bool", "0", False),
        ("bool", False, False),
        ("duration", "90m", "90m"),  # journalctl's --since wants the spelling kept
        ("string", " why ", "why"),
    ],
)
def test_a_param_is_read_as_its_type(kind: str, given: object, value: object) -> None:
    assert convert(ParamSpec("p", kind), given) == value


@pytest.mark.parametrize(
    ("spec", "given", "said"),
    [
        (ParamSpec("tries", "int"), "three", "tries: 'three' is not a whole number"),
        (ParamSpec("tries", "int"), True, "tries: True is not a whole number"),
        (ParamSpec("force", "bool"), "maybe", "force: 'maybe' is not true or false"),
        (ParamSpec("mode", "choice", choices=("off", "override")), "on",
         "mode: 'on' is not one of: off, override"),
        (ParamSpec("reason", "string"), "  ", "reason: empty value"),
    ],
)  # fmt: skip
def test_a_wrong_param_value_is_one_line(spec: ParamSpec, given: object, said: str) -> None:
    with pytest.raises(ValueError) as wrong:
        convert(spec, given)
    assert str(wrong.value) == said


def test_a_path_param_is_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert convert(ParamSpec("out", "path"), "~/b.tar.gz") == str(tmp_path / "b.tar.gz")
    assert convert(ParamSpec("mode", "choice", choices=("off",)), " off ") == "off"


def test_param_assignments_need_a_name_and_an_equals_sign() -> None:
    assert parse_assignments(["a=1", " b =x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for bad in ("novalue", "=5"):
        with pytest.raises(RunbookError, match="write it as NAME=VALUE"):
            parse_assignments([bad])


def test_a_param_given_two_values_is_refused_and_one_given_twice_alike_is_taken() -> None:
    with pytest.raises(
        RunbookError, match=r"^--param since given twice \('1h', '2h'\): give it once$"
    ):
        parse_assignments(["since=1h", "node=a", " since=2h"])
    assert parse_assignments(["since=1h", "since=1h"]) == {"since": "1h"}


def test_params_resolve_with_their_defaults_and_a_full_node_name(book: object) -> None:
    full = "ip-10-0-1-2.us-west-2.compute.internal"
    found = resolve_params(
        book,  # type: ignore[arg-type]
        {"node": "ip-10-0-1-2", "tries": "5"},
        find_node=lambda name: full if full.startswith(name) else None,
    )
    assert found == {"node": full, "drain_timeout": "10m", "tries": 5}


def test_a_misspelt_missing_or_unknown_param_is_one_line(book: object) -> None:
    with pytest.raises(RunbookError) as wrong:
        resolve_params(book, {"node": "n1", "drian_timeout": "5m"})  # type: ignore[arg-type]
    assert str(wrong.value) == (
        "drain-it: unknown param 'drian_timeout' (known: node, drain_timeout, tries, reason)"
    )
    with pytest.raises(RunbookError, match=r"^drain-it needs node: pass --node NAME$"):
        resolve_params(book, {})  # type: ignore[arg-type]
    with pytest.raises(RunbookError, match=r"^drain-it: tries: 'x' is not a whole number$"):
        resolve_params(book, {"node": "n1", "tries": "x"})  # type: ignore[arg-type]
    with pytest.raises(RunbookError) as wrong:
        resolve_params(book, {"node": "ip-10-9"}, find_node=lambda name: None)  # type: ignore[arg-type]
    assert str(wrong.value) == "no node 'ip-10-9' in this cluster: `mignurse nodes` lists them"


def test_a_given_none_falls_back_to_the_default(book: object) -> None:
    found = resolve_params(book, {"node": "n1", "tries": None})  # type: ignore[arg-type]
    assert found["tries"] == 3


def test_a_step_is_timed_by_its_seconds_its_param_or_its_action(book: object) -> None:
    steps = {s.id: s for s in book.steps}  # type: ignore[attr-defined]
    params = {"drain_timeout": "90m", "tries": 7}
    assert book.step_timeout(steps["drain"], params) == 5400.0  # type: ignore[attr-defined]
    assert book.step_timeout(steps["report"], params) == 45.0  # type: ignore[attr-defined]
    assert book.step_timeout(steps["again"], params) == 7.0  # type: ignore[attr-defined]
    assert book.step_timeout(steps["cordon"], params) == 60.0  # type: ignore[attr-defined]
    assert book.step_timeout(steps["drain"], {}) == 600.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("timeout", "said"),
    [
        ("reason", "'reason' is not a param of type int or duration"),
        ("nope", "'nope' is not a param of type int or duration"),
        ("0", "must be seconds (> 0) or a param name"),
        ("-5", "must be seconds (> 0) or a param name"),
        ("true", "must be seconds (> 0) or a param name"),
    ],
)
def test_a_step_timeout_that_is_neither_seconds_nor_a_duration_param_is_refused(
    tmp_path: Path, timeout: str, said: str
) -> None:
    path = tmp_path / "drain-it.yaml"
    path.write_text(BOOK.replace("timeout: 45", f"timeout: {timeout}"))
    with pytest.raises(RunbookError) as wrong:
        load_runbook(path)
    assert str(wrong.value).endswith(f"steps[2].timeout: {said}")


def test_the_confirmation_says_how_a_change_is_put_back() -> None:
    books = load_runbooks()
    assert reversal_words(books["cordon"]) == "reversible: uncordon puts it back"
    assert reversal_words(books["pause-node-repair"]) == (
        "reversible: resume-node-repair puts it back"
    )
    assert reversal_words(books["replace-instance"]) == "cannot be undone"
    assert reversal_words(books["cordon-and-collect"], undo="u") == (
        "reversible: u puts back what it changed"
    )


def test_a_runbook_is_as_harmful_as_its_most_harmful_mutating_step() -> None:
    books = load_runbooks()
    assert books["cordon"].harm.name == "LOW"
    assert books["replace-instance"].harm.name == "HIGH"
    assert books["cordon"].to_json()["harm"] == "low"
