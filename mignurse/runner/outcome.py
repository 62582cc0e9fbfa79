"""What a run tells the face that started it: the events as it goes (`RunEvent`, to a
`Listener`), the result when it ends (`RunResult`, with one report line a step and the exit
code), the error that keeps it from starting or going on (`RunError`), and whether a stopped
run can be resumed or undone now (`Followup`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mignurse.runner import state as st
from mignurse.runner.plan import Plan


class RunError(Exception):
    """The run cannot start or continue; str() is the one line to show."""

    exit_code = 2


@dataclass
class RunEvent:
    """What the engine tells its listener. kinds: plan, notice, step-started, output,
    step-finished, undo-started, undo-finished, finished."""

    kind: str
    step: str = ""
    message: str = ""
    data: dict[str, Any] = field(default_factory=dict)


Listener = Callable[[RunEvent], None]


@dataclass
class RunResult:
    run_id: str
    status: str  # dry-run | declined | blocked | succeeded | failed | interrupted | undone
    plan: Plan | None
    steps: list[st.StepState] = field(default_factory=list)
    error: str = ""
    notices: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"dry-run": 0, "succeeded": 0, "declined": 1, "interrupted": 130}.get(self.status, 1)

    def report_lines(self) -> list[str]:
        """One line a step: where the node stands after the run."""
        lines = []
        for s in self.steps:
            line = f"{s.id}: {s.status}"
            said = (s.applied or {}).get("summary") or (s.applied or {}).get("bundle")
            if said and s.status in st.DONE:
                line += f": {said}"
            if s.error and s.error != s.status:
                line += f": {s.error}"
            if s.undo:
                line += f" ({s.undo})"
            lines.append(line)
        return lines


class Followup(NamedTuple):
    """Whether `--resume` or `--undo` of a stopped run can run now. `why` is one line: why
    not, or, when it can, what it would do. Unpacks as `(possible, why)`."""

    possible: bool
    why: str
