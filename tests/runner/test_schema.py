"""Runbook files: what loads, and the one-line errors (file:line: path: why) of what does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from mignurse.runner.schema import (
    FINDING_IDS,
    RunbookError,
    duration_seconds,
    load_runbook,
    load_runbooks,
    parse_assignments,
    resolve_params,
)
from mignurse.runner.step import Harm

GOOD = """\
name: {name}
title: Try things
description: a test runbook
target: node
suggested_for: [notready-loop]
undo: on-failure
params:
  node: {{type: node, required: true}}
  since: {{type: duration, default: 6h}}
  force: {{type: bool, default: false}}
  count: {{type: int, default: 3}}
  mode: {{type: choice, choices: [off, narrow], default: off}}
  drain_timeout: {{type: duration, default: 90s}}
steps:
  - id: cordon
    action: cordon
    with: {{reason: testing}}
    timeout: 30
  - id: drain
    action: drain
    timeout: drain_timeout
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def test_the_shipped_cordon_and_collect_loads() -> None:
    book = load_runbooks()["cordon-and-collect"]
    assert [s.action for s in book.steps] == ["cordon", "collect-bundle", "report-node"]
    assert book.harm == Harm.LOW and book.undo == "on-failure" and book.target == "node"
    assert book.params["node"].required and book.params["since"].default == "6h"


def test_a_good_runbook_loads_with_typed_defaults_and_param_timeouts(tmp_path: Path) -> None:
    book = load_runbook(write(tmp_path, "try", GOOD.format(name="try")))
    assert book.harm == Harm.HIGH  # drain
    assert book.params["force"].default is False and book.params["count"].default == 3
    assert book.step_timeout(book.steps[0], {}) == 30
    assert book.step_timeout(book.steps[1], {"drain_timeout": "2m"}) == 120
    assert book.steps[0].with_args == {"reason": "testing"}


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "    action: drain",
            "    action: cordn",
            "try.yaml:20: steps[1].action: unknown action 'cordn' (known: ",
        ),
        ("    timeout: 30", "    timout: 30", "try.yaml:18: steps[0].timout: unknown key"),
        ("name: try", "name: other", "try.yaml:1: name: 'other' must match the file name 'try'"),
        ("default: 6h}", "default: 6 hours}", "try.yaml:9: params.since.default: '6 hours' is"),
        ("target: node", "target: rack", "try.yaml:4: target: 'rack' is not one of: node, cluster"),
        ("[notready-loop]", "[not-a-finding]", "try.yaml:5: suggested_for[0]: unknown finding"),
        ("    timeout: drain_timeout", "    timeout: since2", "try.yaml:21: steps[1].timeout: "),
        ("  - id: drain", "  - id: cordon", "try.yaml:19: steps[1].id: 'cordon' is used twice"),
        (
            "mode: {type: choice, choices: [off, narrow], default: off}",
            "mode: {type: text}",
            "try.yaml:12: params.mode.type: 'text' is not one of: ",
        ),
    ],
)
def test_errors_name_the_file_line_and_path(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    text = GOOD.format(name="try")
    assert old in text
    with pytest.raises(RunbookError) as err:
        load_runbook(write(tmp_path, "try", text.replace(old, new)))
    message = str(err.value)
    assert expected in message, message
    assert "\n" not in message
    if "unknown action" in expected:
        assert "cordon" in message and "drain" in message


def test_the_findings_a_runbook_may_suggest_itself_for_are_the_diagnosis_finding_ids(
    tmp_path: Path,
) -> None:
    """A runbook is loaded without the diagnosis, from a table of its finding ids: every id
    constant of mignurse.diagnose.findings is in it (and nothing else), so no runbook naming a
    real finding is refused, nor one naming a gone finding accepted."""
    import re

    from mignurse.diagnose import findings

    constants = {
        value
        for key, value in vars(findings).items()
        if key.isupper()
        and isinstance(value, str)
        and not key.startswith("RUNBOOK_")
        and key not in ("CRITICAL", "WARNING", "INFO")
        and re.fullmatch(r"[a-z0-9-]+", value)
    }
    assert constants == FINDING_IDS
    for finding in sorted(constants):
        text = GOOD.format(name="try").replace("[notready-loop]", f"[{finding}]")
        assert load_runbook(write(tmp_path, "try", text)).suggested_for == (finding,)


def test_broken_yaml_says_where(tmp_path: Path) -> None:
    with pytest.raises(RunbookError, match=r"bad.yaml:4: not valid YAML: expected ',' or ']'"):
        load_runbook(write(tmp_path, "bad", "name: bad\nsteps:\n  - [unclosed\n"))


def test_params_resolve_to_types_and_refuse_what_is_wrong(tmp_path: Path) -> None:
    book = load_runbook(write(tmp_path, "try", GOOD.format(name="try")))
    nodes = {"ip-10-0-1-2.ec2.internal"}

    def find(name: str) -> str | None:
        return next((n for n in nodes if n == name or n.split(".")[0] == name), None)

    given = parse_assignments(["force=yes", "count=7", "since=90m", "mode=narrow"])
    params = resolve_params(book, {**given, "node": "ip-10-0-1-2"}, find_node=find)
    assert params == {
        "node": "ip-10-0-1-2.ec2.internal",
        "since": "90m",
        "force": True,
        "count": 7,
        "mode": "narrow",
        "drain_timeout": "90s",
    }
    with pytest.raises(RunbookError, match=r"try needs node: pass --node NAME"):
        resolve_params(book, {}, find_node=find)
    with pytest.raises(RunbookError, match=r"unknown param 'colour' \(known: node, since"):
        resolve_params(book, {"node": "ip-10-0-1-2", "colour": "red"})
    with pytest.raises(RunbookError, match=r"count: 'many' is not a whole number"):
        resolve_params(book, {"node": "ip-10-0-1-2", "count": "many"})
    with pytest.raises(RunbookError, match=r"mode: 'all' is not one of: off, narrow"):
        resolve_params(book, {"node": "ip-10-0-1-2", "mode": "all"})
    with pytest.raises(RunbookError, match=r"no node 'ip-9-9-9-9' in this cluster"):
        resolve_params(book, {"node": "ip-9-9-9-9"}, find_node=find)
    with pytest.raises(RunbookError, match=r"--param 'force': write it as NAME=VALUE"):
        parse_assignments(["force"])
    assert duration_seconds("2d") == 172800
    with pytest.raises(ValueError, match="not a duration"):
        duration_seconds("0m")
