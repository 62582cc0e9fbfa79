"""Runbook files an operator or a site writes (mignurse/runner/schema.py), each mistake told in
one line with the file, the line of the offending value and its path; the runbook folder that
is not there; what a loaded runbook says of itself (its params as the app and `runbooks -o json`
show them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.runner.schema import RunbookError, load_runbook, load_runbooks, resolve_params

BOOK = """\
name: {name}
title: Try things
target: node
params:
  node: {{type: node, required: true}}
  since: {{type: duration, default: 6h}}
  reason: {{type: string}}
steps:
  - id: cordon
    action: cordon
"""


def write(folder: Path, text: str, name: str = "try") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(RunbookError) as err:
        load_runbook(write(tmp_path, text))
    said = str(err.value)
    assert "\n" not in said
    return said


# -- the folder ---------------------------------------------------------------------------------


def test_a_runbook_folder_named_by_the_environment_that_is_not_there_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "site-runbooks"
    monkeypatch.setenv("MIGNURSE_RUNBOOKS", str(missing))
    assert main(["runbooks"]) == 2
    assert capsys.readouterr().err == (
        f"mignurse: error: MIGNURSE_RUNBOOKS={missing}: no such folder\n"
    )
    with pytest.raises(RunbookError) as err:
        load_runbooks(tmp_path / "given")
    assert str(err.value) == f"runbook folder {tmp_path / 'given'}: no such folder"


def test_a_broken_file_in_the_folder_is_named_and_the_others_still_load(tmp_path: Path) -> None:
    write(tmp_path, BOOK.format(name="good"), "good")
    write(tmp_path, BOOK.format(name="bad").replace("action: cordon", "action: cordn"), "bad")
    problems: dict[str, str] = {}
    assert list(load_runbooks(tmp_path, problems)) == ["good"]
    assert problems["bad"].endswith("bad.yaml:10: steps[0].action: unknown action 'cordn' "
                                    "(known: " + problems["bad"].split("(known: ")[1])  # fmt: skip
    with pytest.raises(RunbookError, match=r"bad\.yaml:10: steps\[0\]\.action: unknown action"):
        load_runbooks(tmp_path)


# -- where a mistake is --------------------------------------------------------------------------


def test_a_missing_key_is_told_at_the_documents_first_line(tmp_path: Path) -> None:
    text = "# a site runbook\n# owned by the GPU team\n" + BOOK.format(name="try").replace(
        "title: Try things\n", ""
    )
    assert refused(tmp_path, text).endswith("try.yaml:3: missing required key 'title'")


def test_a_wrong_value_is_told_at_its_own_line_not_its_keys(tmp_path: Path) -> None:
    text = BOOK.format(name="try").replace("    action: cordon", "    action:\n      cordn")
    assert "try.yaml:11: steps[0].action: unknown action 'cordn'" in refused(tmp_path, text)


def test_a_param_name_yaml_reads_as_a_number_is_refused(tmp_path: Path) -> None:
    text = BOOK.format(name="try").replace("  reason:", "  1:")
    assert refused(tmp_path, text).endswith(
        "try.yaml:7: params.1: a param name is lower-case letters, digits, - and _"
    )


def test_a_default_left_empty_is_no_default(tmp_path: Path) -> None:
    text = BOOK.format(name="try").replace("{type: string}", "{type: string, default: ~}")
    book = load_runbook(write(tmp_path, text))
    assert book.params["reason"].default is None
    text = BOOK.format(name="try").replace("{type: string}", "{type: string, default: }")
    assert load_runbook(write(tmp_path, text)).params["reason"].default is None


# -- what a runbook says of itself ---------------------------------------------------------------


def test_a_runbooks_params_are_shown_with_a_default_only_where_one_is_set(tmp_path: Path) -> None:
    book = load_runbook(write(tmp_path, BOOK.format(name="try")))
    assert book.to_json()["params"] == [
        {"name": "node", "type": "node", "required": True},
        {"name": "since", "type": "duration", "required": False, "default": "6h"},
        {"name": "reason", "type": "string", "required": False},
    ]


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("title: Try things\n", 'title: "  "\n', "try.yaml:2: title: must be a non-empty string"),
        ("title: Try things\n", "title: 42\n", "try.yaml:2: title: must be a non-empty string"),
        ("title: Try things\n", "title:\n", "try.yaml:2: title: must be a non-empty string"),
        ("title: Try things\n", "title: Try things\ndescription: [a]\n",
         "try.yaml:3: description: must be a string"),
        ("target: node\n", "", "try.yaml:1: missing required key 'target'"),
        ("target: node\n", "target: node\nundo: always\n",
         "try.yaml:4: undo: 'always' is not one of: on-failure, never"),
        ("target: node\n", "target: node\nsuggested_for: notready-loop\n",
         "try.yaml:4: suggested_for: must be a list of finding ids"),
        ("target: node\n", "target: node\nsuggested_for: [notready-loop, 7]\n",
         "try.yaml:4: suggested_for: must be a list of finding ids"),
        ("  node: {type: node, required: true}\n", "  node: {type: string, required: true}\n",
         "try.yaml:3: target: a `target: node` runbook needs a param `node` of type node"),
        ("  node: {type: node, required: true}\n", "",
         "try.yaml:3: target: a `target: node` runbook needs a param `node` of type node"),
        ("  reason: {type: string}\n", "  Reason: {type: string}\n",
         "try.yaml:7: params.Reason: a param name is lower-case letters, digits, - and _"),
        ("{type: string}", "{type: choice}",
         "try.yaml:7: params.reason: a choice param needs `choices: [a, b]`"),
        ("{type: string}", "{type: choice, choices: because}",
         "try.yaml:7: params.reason: a choice param needs `choices: [a, b]`"),
        ("{type: string}", "{type: string, choices: [a, b]}",
         "try.yaml:7: params.reason.choices: only a `type: choice` param has choices"),
        ("{type: string}", "[string]", "try.yaml:7: params.reason: must be a mapping"),
        ("steps:\n  - id: cordon\n    action: cordon\n", "steps: []\n",
         "try.yaml:8: steps: must be a non-empty list"),
        ("steps:\n  - id: cordon\n    action: cordon\n", "steps: {cordon: cordon}\n",
         "try.yaml:8: steps: must be a non-empty list"),
        ("  - id: cordon\n", "  - id: Cordon!\n",
         "try.yaml:9: steps[0].id: needs an id (a-z, 0-9, -)"),
        ("  - id: cordon\n    action: cordon\n", "  - action: cordon\n",
         "try.yaml:9: steps[0]: needs an id (a-z, 0-9, -)"),
        ("    action: cordon\n", "    action: cordon\n    with: [a]\n",
         "try.yaml:11: steps[0].with: must be a mapping"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line_with_the_file_line_and_path(
    tmp_path: Path, old: str, new: str, said: str
) -> None:
    text = BOOK.format(name="try")
    assert old in text
    assert refused(tmp_path, text.replace(old, new, 1)).endswith(said)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "try.yaml: empty file"),
        ("# nothing here yet\n", "try.yaml: empty file"),
        ("- cordon\n- drain\n", "try.yaml:1: must be a mapping"),
        ("name: try\ntitle: T\ntarget: cluster\nparams: [node]\nsteps: [{id: a, action: cordon}]\n",
         "try.yaml:4: params: must be a mapping of name: {type: …}"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_a_runbook_at_all_is_one_line(
    tmp_path: Path, text: str, said: str
) -> None:
    assert refused(tmp_path, text).endswith(said)


def test_a_wrong_key_is_told_at_the_keys_line_and_a_missing_one_with_the_file(
    tmp_path: Path,
) -> None:
    text = BOOK.format(name="try").replace("  reason: {type: string}\n",
                                           "  Reason:\n    type: string\n")  # fmt: skip
    assert refused(tmp_path, text).endswith("try.yaml:7: params.Reason: a param name is "
                                            "lower-case letters, digits, - and _")  # fmt: skip
    text = BOOK.format(name="try").replace("{type: string}", "{help: why}")
    assert refused(tmp_path, text).endswith(
        "try.yaml: params.reason.type: None is not one of: node, string, int, bool, duration, "
        "path, choice"
    )


@pytest.mark.parametrize(
    ("timeout", "seconds"),
    [("0.5", 0.5), ("1", 1.0), ("0", None), ("-5", None), ("true", None), ("[30]", None)],
)
def test_a_step_timeout_is_seconds_above_zero(
    tmp_path: Path, timeout: str, seconds: float | None
) -> None:
    text = BOOK.format(name="try").replace(
        "    action: cordon\n", f"    action: cordon\n    timeout: {timeout}\n"
    )
    if seconds is None:
        assert refused(tmp_path, text).endswith(
            "try.yaml:11: steps[0].timeout: must be seconds (> 0) or a param name"
        )
    else:
        book = load_runbook(write(tmp_path, text))
        assert book.step_timeout(book.steps[0], {}) == seconds


@pytest.mark.parametrize(
    ("given", "value"),
    [("no", False), ("off", False), ("N", False), ("0", False), ("on", True), ("Yes", True)],
)
def test_a_bool_param_is_read_as_an_operator_types_it(
    tmp_path: Path, given: str, value: bool
) -> None:
    text = BOOK.format(name="try").replace("{type: string}", "{type: bool, default: true}")
    book = load_runbook(write(tmp_path, text))
    assert resolve_params(book, {"node": "n1", "reason": given})["reason"] is value
    with pytest.raises(RunbookError, match=r"^try: reason: 'maybe' is not true or false$"):
        resolve_params(book, {"node": "n1", "reason": "maybe"})


def test_a_cluster_runbook_needs_no_node_and_may_leave_its_description_empty(
    tmp_path: Path,
) -> None:
    text = (
        'name: try\ntitle: Pause repair\ndescription: ""\ntarget: cluster\n'
        "steps:\n  - id: pause\n    action: pause-node-repair\n"
    )
    book = load_runbook(write(tmp_path, text))
    assert (book.target, book.description, dict(book.params)) == ("cluster", "", {})
