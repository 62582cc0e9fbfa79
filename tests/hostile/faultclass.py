"""How a fault trial ended, judged from what each `mignurse` command printed and what the
target showed when it was read back after that command. One of four classes:

- `known-good`: every claim is true, and the target stands where it should (as before the
  run, or as a clean run leaves it, nothing of the run left on it, no lock) without running
  anything mignurse printed, and stays there;
- `instruction-works`: the same, reached by running commands mignurse printed
  (`mignurse run --resume ID`, `--undo ID`, `mignurse unlock NODE`, another `mignurse run`);
- `manual-repair`: no claim is false, but the target is left where no printed command takes
  it (a cordon, paused operand labels, a paused repair gate, a lock, with nothing to run);
- `contradiction`: a printed claim is false when read back: "succeeded" while the target is not
  as a clean run leaves it, "undone" while something is not back, "nothing changed" (or a
  refusal) while the command changed something, "no replacement" while one came, a command
  offered with a promise and then refused, two lines of one report that disagree.

Pure: the trial runs the commands and reads the cluster (tests/hostile/fault_trials.py); this
module only reads words and compares. The words it knows are the report `mignurse run` prints
(mignurse/cli/runview.py `print_report`, mignurse/cli/runbooks.py `followup_lines`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

KNOWN_GOOD = "known-good"
INSTRUCTION_WORKS = "instruction-works"
MANUAL_REPAIR = "manual-repair"
CONTRADICTION = "contradiction"
CLASSES = (KNOWN_GOOD, INSTRUCTION_WORKS, MANUAL_REPAIR, CONTRADICTION)
PASSING = (KNOWN_GOOD, INSTRUCTION_WORKS)

_HEADER = re.compile(r"^run (?P<run>[0-9a-f]+): (?P<status>[a-z-]+)(?:: (?P<error>.*))?$")
_STEP_LINE = re.compile(r"^  (?P<step>[a-z0-9][a-z0-9-]*): (?P<status>[a-z-]+)\b")
_COMMAND = re.compile(r"`(mignurse (?:run|unlock)\b[^`]*)`(?P<rest>[^\n]*)")
_PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$")  # RUN, RUN_ID, NODE: words, not a command to run
_NOTHING_CHANGED = re.compile(r"\bnothing (?:was )?changed\b|\bchanged nothing\b")
# "no replacement came" in its forms (a node Ready now does not contradict "no replacement
# stayed serving for 2m": that one may be Ready between two NotReady spells)
_NO_REPLACEMENT = re.compile(
    r"no replacement node became Ready|no replacement (?:came|comes|is expected)|none expected"
    r"|no new node joined"
)
_NOT_OFFERED = re.compile(r"^(?P<kind>resume|undo) is not offered:", re.MULTILINE)
EXIT_FOR = {"succeeded": (0,), "interrupted": (130,), "failed": (1,), "blocked": (1,),
            "declined": (1,), "dry-run": (0,), "undone": (0, 1)}  # fmt: skip
DONE_STEPS = ("verified", "skipped")


@dataclass(frozen=True)
class Said:
    """One `mignurse` command as the trial ran it, and its words."""

    argv: tuple[str, ...]  # what followed `mignurse` (without the connection flags)
    code: int  # its exit status; -N when signal N ended it
    stdout: str
    stderr: str
    followed: bool = False  # it was a command the previous one printed
    promise: str = ""  # what the previous command said it would do

    @property
    def text(self) -> str:
        return " ".join(self.argv)

    @property
    def header(self) -> re.Match[str] | None:
        first = self.stdout.splitlines()[0] if self.stdout.strip() else ""
        return _HEADER.match(first)

    @property
    def status(self) -> str:
        """The run's status as the report's first line says it, or ""."""
        header = self.header
        return header["status"] if header else ""

    @property
    def refused(self) -> str:
        """Why the command refused to start, or "": a refusal before any change (blocked,
        declined) or an error line (`mignurse: error: …`) and no report."""
        if self.status in ("blocked", "declined"):
            header = self.header
            assert header is not None
            return header["error"] or self.status
        for line in self.stderr.splitlines():
            if line.startswith("mignurse: error: ") and not self.header:
                return line.removeprefix("mignurse: error: ")
        if self.argv[:1] == ("unlock",) and self.code > 0:
            return (self.stderr.strip().splitlines() or ["refused"])[-1]
        return ""

    def step_lines(self) -> dict[str, str]:
        """Each step's status in the report (a line `  step: status…`)."""
        found: dict[str, str] = {}
        if not self.header:
            return found
        for line in self.stdout.splitlines()[1:]:
            match = _STEP_LINE.match(line)
            if match and match["step"] not in found:
                found[match["step"]] = match["status"]
        return found


@dataclass(frozen=True)
class Found:
    """The target read back after one command."""

    off_before: tuple[str, ...] = ()  # how it differs from before the run (empty: as before)
    off_done: tuple[str, ...] = ()  # how it differs from where a clean run leaves it
    changed: tuple[str, ...] = ()  # what the command changed (the target before and after it)
    leftovers: tuple[str, ...] = ()  # a lock left behind: still needs a command
    replacement: str = ""  # a new node Ready in the replaced node's pool, "" when none

    @property
    def good(self) -> bool:
        return (not self.off_before or not self.off_done) and not self.leftovers


@dataclass(frozen=True)
class Instruction:
    """A command a report printed for the operator to run next."""

    command: str  # as printed: "mignurse run --resume ab12cd34"
    argv: tuple[str, ...]  # what follows `mignurse`
    kind: str  # resume | undo | unlock | run
    promise: str  # the words after it on its line ("continues from step drain (…)")


@dataclass(frozen=True)
class Verdict:
    cls: str
    why: tuple[str, ...] = ()


def instructions(said: Said) -> list[Instruction]:
    """The commands `said` printed for the operator, in order, each once; words such as
    `mignurse run --undo RUN` that name no real run are not commands."""
    found: list[Instruction] = []
    seen: set[str] = set()
    for match in _COMMAND.finditer(said.stdout + "\n" + said.stderr):
        command = " ".join(match[1].split())
        try:
            words = tuple(shlex.split(command))[1:]
        except ValueError:
            continue
        if not words or any(_PLACEHOLDER.match(w) for w in words) or command in seen:
            continue
        seen.add(command)
        if words[0] == "unlock":
            kind = "unlock"
        elif "--resume" in words:
            kind = "resume"
        elif "--undo" in words:
            kind = "undo"
        else:
            kind = "run"
        found.append(Instruction(command, words, kind, match["rest"].strip(" .;:")))
    return found


def false_claims(said: Said, found: Found) -> list[str]:
    """Each claim of `said` that the target read back after it shows to be false."""
    problems: list[str] = []
    status = said.status
    if said.followed and said.refused:
        problems.append(
            f"`mignurse {said.text}` was offered ({said.promise or 'as the way on'}), "
            f"then refused: {said.refused}"
        )
    if status == "succeeded" and (found.off_done or found.leftovers):
        problems.append("says succeeded, but " + "; ".join(found.off_done + found.leftovers))
    if status == "undone" and (found.off_before or found.leftovers):
        problems.append("says undone, but " + "; ".join(found.off_before + found.leftovers))
    if found.changed and (said.refused or _NOTHING_CHANGED.search(said.stdout)):
        said_so = f"refused ({said.refused})" if said.refused else "says nothing changed"
        problems.append(f"{said_so}, but it changed " + "; ".join(found.changed))
    if found.replacement and _NO_REPLACEMENT.search(said.stdout):
        problems.append(f"says no replacement, but {found.replacement} is Ready in the pool")
    if (
        "unlocked" in said.stdout
        and said.code == 0
        and any(x.startswith("lock") for x in found.leftovers)
    ):
        problems.append("says unlocked, but " + "; ".join(found.leftovers))
    problems += disagreements(said)
    return problems


def disagreements(said: Said) -> list[str]:
    """Lines of one report that contradict each other (or the exit status)."""
    problems: list[str] = []
    status = said.status
    if status and said.code >= 0 and said.code not in EXIT_FOR.get(status, (said.code,)):
        problems.append(f"says {status} but exits {said.code}")
    steps = said.step_lines()
    left = {s: v for s, v in steps.items() if v not in DONE_STEPS}
    if status == "succeeded" and left:
        problems.append(
            "says succeeded, but its report shows "
            + ", ".join(f"{s}: {v}" for s, v in left.items())
        )
    if status == "undone" and any(v == "undo-failed" for v in steps.values()):
        problems.append("says undone, but a step's undo failed in its report")
    if status == "interrupted" and steps and not left:
        problems.append("says interrupted, but every step of its report is done")
    offered = {i.kind for i in instructions(said) if i.kind in ("resume", "undo")}
    for match in _NOT_OFFERED.finditer(said.stdout):
        if match["kind"] in offered:
            problems.append(
                f"offers `mignurse run --{match['kind']}` and says {match['kind']} is not offered"
            )
    return problems


def judge(chain: Sequence[tuple[Said, Found]]) -> Verdict:
    """The class of a trial: its commands in the order they ran, each with the target read
    back after it."""
    if not chain:
        raise ValueError("a trial runs at least one command")
    problems = [
        f"`mignurse {said.text}`: {problem}"
        for said, found in chain
        for problem in false_claims(said, found)
    ]
    if problems:
        return Verdict(CONTRADICTION, tuple(problems))
    last_said, last = chain[-1]
    if last.good:
        # Good from which command on (and ever since): a printed command run before then
        # is what got it there.
        since = len(chain) - 1
        while since > 0 and chain[since - 1][1].good:
            since -= 1
        followed = [f"`mignurse {s.text}`" for s, _ in chain[: since + 1] if s.followed]
        if followed:
            return Verdict(INSTRUCTION_WORKS, (f"followed {', '.join(followed)}",))
        return Verdict(KNOWN_GOOD)
    why = [f"left: {x}" for x in last.leftovers]
    if last.off_before and last.off_done:
        why.append("not as before: " + "; ".join(last.off_before))
        why.append("not as a clean run leaves it: " + "; ".join(last.off_done))
    offered = [i.command for i in instructions(last_said)]
    why.append(
        f"after `mignurse {last_said.text}`, "
        + (f"printed {', '.join(offered)}, not followed further" if offered else "no command")
    )
    return Verdict(MANUAL_REPAIR, tuple(why))
