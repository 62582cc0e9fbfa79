"""Every reference in the repository resolves inside it or to a public upstream source.

A fact is cited by its upstream source (repo + path + tag, a documentation page, an
owner/repo#N issue) or by the project's own docs/ page; never by a note that lives outside
the repository, a bare section sign, or a bare issue number nobody outside can look up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (
    "mignurse",
    "tests",
    "docs",
    "benchmarks",
    "scripts",
    "runbooks",
    "deploy",
    ".ci",
    "README.md",
    "Makefile",
    "pyproject.toml",
    "whitelist.py",
)
THIS = Path(__file__).resolve()

# Each pattern is written so that this file does not match it.
FORBIDDEN: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a notes file outside the repository",
        re.compile(r"\b(?:dom" r"ain|des" r"ign|sty" r"le)\.md\b"),
    ),
    ("a path outside the repository", re.compile(r"/work/" + r"sha" + r"red\b")),
    # RFC 1952 §2.2 names a public standard's section; any other § points at a private page.
    ("a bare section sign", re.compile(r"(?<!RFC \d{4} )(?<!RFC \d{3} )§")),
    (
        "how the work was organised",
        re.compile(
            r"\b(?:helper|coding|steering|previous|earlier|later|next) sessions?\b"
            r"|\bsession (?:notes?|brief)\b"
            r"|\b(?:the|my|your|this) brief\b"
            r"|\bissue notes?\b"
            r"|\bthe CEO\b"
            r"|\bdevice (?:time|machine)\b"
            r"|\bGPU machines?\b",
            re.IGNORECASE,
        ),
    ),
)
# "issue 4" means nothing outside the tracker it came from; "NVIDIA/mig-parted issue 227" does.
BARE_ISSUE = re.compile(r"\b(?:issue|pull request|PR) #?\d+", re.IGNORECASE)
OWNER_REPO_BEFORE = re.compile(r"[\w.-]+/[\w.-]+\s+(?:pull\s+)?$")


def _texts() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in candidates:
            if file.resolve() == THIS or "__pycache__" in file.parts:
                continue
            found.append(file)
    return found


def _read(file: Path) -> str | None:
    data = file.read_bytes()
    if b"\0" in data:
        return None  # images and archives
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def offending_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, what is wrong, the line) for every reference that leaves the repository."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for why, pattern in FORBIDDEN:
            if pattern.search(line):
                found.append((number, why, line.strip()))
        for match in BARE_ISSUE.finditer(line):
            if not OWNER_REPO_BEFORE.search(line[: match.start()]):
                found.append((number, "a bare issue number", line.strip()))
    return found


def test_no_reference_leaves_the_repository() -> None:
    problems = []
    for file in _texts():
        text = _read(file)
        if text is None:
            continue
        for number, why, line in offending_lines(text):
            problems.append(f"{file.relative_to(ROOT)}:{number}: {why}: {line[:120]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "line",
    [
        "# Labels we read (" + "dom" + "ain.md §1.1).",
        "Facts from " + "des" + "ign.md; the decisions they led to:",
        "see /work/" + "sha" + "red/notes",
        "SMALL_POOL = 5  # ceil(20% × n) == 1 up to here (§1.5)",
        "Fleet runs use SSM's rate control (issue 4): one SendCommand",
        "Targets (issue #2): five times faster",
        "The done-when of issue 5 in the app",
        "what an earlier session found",
        "as the helper session noted",
        "on a lent GPU machine only",
    ],
)
def test_the_check_catches_what_it_is_for(line: str) -> None:
    assert offending_lines(line)


@pytest.mark.parametrize(
    "line",
    [
        "Several gzip members are one archive (RFC 1952 §2.2)",
        "# 1g.23gb on current drivers (NVIDIA/mig-parted issue 227);",
        "# R580 lgip (GoogleCloudPlatform/container-engine-accelerators pull request 564)",
        "the SSO session has expired",
        "aws ssm start-session --target i-0abc",
        "files collected on the node by `c` in this session",
        "the stopgaps (docs/repair.md, kubernetes-sigs/karpenter#2424)",
        "Started Session 12 of user root.",
    ],
)
def test_the_check_leaves_legitimate_words_alone(line: str) -> None:
    assert not offending_lines(line)
