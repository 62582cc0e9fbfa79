"""Shared pieces of the evidence parsers: bounded problem lists."""

from __future__ import annotations

# A garbled 200,000-line file must not turn into 200,000 problem strings.
MAX_LINE_PROBLEMS = 50


class ProblemLog:
    """Collects problems, keeping the first few line-level ones and counting the rest."""

    __slots__ = ("_dropped", "_dropped_at", "_line_problems", "_problems")

    def __init__(self) -> None:
        self._problems: list[str] = []
        self._line_problems = 0
        self._dropped = 0
        self._dropped_at = 0

    def add(self, problem: str) -> None:
        self._problems.append(problem)

    def line(self, number: int, problem: str) -> None:
        self._line_problems += 1
        if self._line_problems <= MAX_LINE_PROBLEMS:
            self._problems.append(f"line {number}: {problem}")
        else:
            if not self._dropped:
                self._dropped_at = len(self._problems)
            self._dropped += 1

    def __bool__(self) -> bool:
        return bool(self._problems)

    def result(self) -> tuple[str, ...]:
        if not self._dropped:
            return tuple(self._problems)
        at = self._dropped_at
        note = f"{self._dropped} more line problems not listed"
        return (*self._problems[:at], note, *self._problems[at:])


def clip(text: str, limit: int = 120) -> str:
    """A short, single-line excerpt of node text for a problem message."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def split_lines(text: str) -> list[str]:
    """Lines as `sed -n` numbers them: split on \\n only, one trailing \\r dropped."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]
