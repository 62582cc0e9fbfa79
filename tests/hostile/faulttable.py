"""The fault trials' table: runbook × fault → how many trials ended in each class, then every
trial that did not end known-good or instruction-works, with its words and its log.

The trials write one JSON line each into a folder (fault_trials_test.py, RESULTS); this module
reads the folder back. As a script it prints the table of a finished run (`make faults` does):

    python tests/hostile/faulttable.py [FOLDER] [--write FILE]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

CLASSES = ("known-good", "instruction-works", "manual-repair", "contradiction")
PASSING = CLASSES[:2]
RESULTS = Path(__file__).resolve().parents[2] / "build" / "fault-trials"
TABLE = RESULTS.parent / "fault-trials.md"


def read_records(folder: Path = RESULTS) -> list[dict[str, Any]]:
    records = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    return sorted(records, key=lambda r: str(r["id"]))


def _fault_kind(record: dict[str, Any]) -> str:
    """The fault without its moment: SIGKILL, 409-race, pdb-timeout, …"""
    return str(record["fault"]).split("@", 1)[0]


def table(records: list[dict[str, Any]]) -> str:
    """Markdown: one row per runbook (case) and fault, a column per class, then the totals."""
    counts: dict[tuple[str, str], Counter[str]] = {}
    for record in records:
        key = (str(record["case"]), _fault_kind(record))
        counts.setdefault(key, Counter())[str(record["class"])] += 1
    head = "| runbook | fault | " + " | ".join(CLASSES) + " | trials |"
    lines = [head, "|" + "---|" * (len(CLASSES) + 3)]
    total: Counter[str] = Counter()
    for (case, fault), by_class in sorted(counts.items()):
        total.update(by_class)
        cells = " | ".join(str(by_class.get(c, 0) or "") for c in CLASSES)
        lines.append(f"| {case} | {fault} | {cells} | {sum(by_class.values())} |")
    cells = " | ".join(f"**{total.get(c, 0)}**" for c in CLASSES)
    lines.append(f"| **all** | | {cells} | **{sum(total.values())}** |")
    return "\n".join(lines)


def failing(records: list[dict[str, Any]], *, logs: bool) -> str:
    """Each trial not known-good or instruction-works: its class, why, commands and log."""
    out = []
    for record in records:
        if record["class"] in PASSING:
            continue
        out.append(f"### {record['id']}: {record['class']}")
        out += [f"- {why}" for why in record["why"]]
        out += [f"- ran `{command}`" for command in record.get("commands", [])]
        if logs:
            out += ["", "```", *record.get("log", []), "```"]
        out.append("")
    return "\n".join(out)


def report(records: list[dict[str, Any]], *, logs: bool) -> str:
    bad = sum(1 for r in records if r["class"] not in PASSING)
    parts = [
        f"## Runbook fault trials: {len(records)} trials, {bad} not known-good or "
        "instruction-works",
        "",
        table(records),
    ]
    if bad:
        parts += ["", "## Trials to fix", "", failing(records, logs=logs)]
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv and not argv[0].startswith("--") else RESULTS
    records = read_records(folder)
    if not records:
        print(f"no fault trial results in {folder}: run `make faults`", file=sys.stderr)
        return 1
    if "--write" in argv:
        target = Path(argv[argv.index("--write") + 1])
        target.write_text(report(records, logs=True))
    print(report(records, logs=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
