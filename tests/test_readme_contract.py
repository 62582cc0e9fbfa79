"""README's diagnose contract (finding ids, the JSON shape) is what `diagnose -o json` prints:
scripts are written against the README."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.diagnose.rules import MODULES

README = Path(__file__).parent.parent / "README.md"
SNAPSHOT = Path(__file__).parent / "corpus" / "incidents" / "karpenter-dcgm-repair-loop" / "full"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(title)
    end = text.find("\n### ", start + len(title))
    return text[start : end if end >= 0 else len(text)]


def test_the_finding_table_lists_exactly_the_ids_the_rules_raise() -> None:
    section = _section("### `mignurse diagnose`")
    table = section[section.index("Finding ids") :]
    listed = re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(MODULES.values())


def test_the_json_example_has_the_keys_diagnose_prints(capsys: pytest.CaptureFixture[str]) -> None:
    section = _section("### `mignurse diagnose`")
    example = section[
        section.index("```json") + len("```json") : section.index(
            "```", section.index("```json") + 7
        )
    ]
    documented = json.loads(example.replace("…", ""))
    code = main(["diagnose", "--from", str(SNAPSHOT), "-o", "json"])
    assert code == 2
    printed = json.loads(capsys.readouterr().out)
    assert set(documented) == set(printed)
    assert set(documented["findings"][0]) == set(printed["findings"][0])
    assert set(documented["findings"][0]["evidence"][0]) == set(
        printed["findings"][0]["evidence"][0]
    )


def test_the_key_table_lists_every_key_the_help_screen_lists() -> None:
    """README's key table and `?` (tui/screens/help.py) name the same keys, each where it
    works."""
    from mignurse.tui.screens.help import KEYS

    section = _section("### The terminal app")
    table = section[section.index("| key | does | where |") :]
    rows = re.findall(r"^\| (.+?) \| .+ \| (.+?) \|$", table, re.MULTILINE)
    documented = {(keys.replace("`", ""), where.replace("`", "")) for keys, where in rows}

    missing = [
        (keys, place)
        for keys, _what, place in KEYS
        if not any(keys == k and place.split(",")[0] in w for k, w in documented)
    ]
    assert not missing, f"in `?` but not in README's key table: {missing}"
