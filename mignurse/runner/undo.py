"""Walking a failed or interrupted run back, newest step first (`--undo RUN_ID`, or
`undo: on-failure`): which steps to undo and the barrier where undo must stop (a step that
cannot be undone and left the node in a state the earlier steps protect), each step's undo
reconciled with the cluster and read back, and what stays as it is when undo stops early."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from mignurse.cluster.client import ClusterError
from mignurse.runner import state as st
from mignurse.runner.audit import AwsIdentity
from mignurse.runner.core import RunCore, one_line
from mignurse.runner.lock import LockError
from mignurse.runner.outcome import RunError, RunResult
from mignurse.runner.schema import StepSpec
from mignurse.runner.step import Action, Cancelled, Harm, LockLost, StepFailed, StepPlan


class RunUndo(RunCore):
    """A run's undo, on top of its state and plumbing; `engine.Runner` builds on it."""

    def _undo_list(self) -> tuple[list[UndoItem], str]:
        """The steps to undo, newest first, and the barrier ("step: why") before which
        undo stops, or "". Read-only."""
        items: list[UndoItem] = []
        for spec in reversed(self.book.steps):
            step_state = self.state.step(spec.id)
            if not step_state.touched or step_state.status in (st.UNDONE, st.NOT_UNDOABLE):
                continue
            action = spec.make()
            if not action.mutates:
                continue
            record = {**(step_state.applied or {}), **step_state.prior}
            step_plan = StepPlan.from_json(step_state.plan or step_state.planned or {})
            if not action.can_undo:
                ctx = self._ctx(spec, phase="undo")
                try:
                    barrier = self._read(
                        ctx,
                        spec.id,
                        lambda: action.undo_barrier(ctx, step_plan, record),  # noqa: B023
                    )
                except (StepFailed, ClusterError) as exc:
                    barrier = f"cannot tell what it left behind ({one_line(exc)})"
                if barrier:
                    return items, f"{spec.id}: {barrier}"
            items.append(UndoItem(spec, action, step_state, record, step_plan))
        return items, ""

    def _undo_items(self, items: list[UndoItem]) -> list[str]:
        """Undo each item; returns what could not be restored, one line each."""
        problems: list[str] = []
        for item in items:
            self._stop_if_cancelled()
            spec, action, step_state = item.spec, item.action, item.step
            self._emit("undo-started", spec.id, f"undo {action.title.lower()}")
            if not action.can_undo:
                step_state.undo = "cannot be undone"
                if step_state.status != st.FAILED:
                    step_state.status = st.NOT_UNDOABLE
                self.state.save()
                self._emit("undo-finished", spec.id, step_state.undo, status=step_state.status)
                self._audit("undo", step=spec.id, result=step_state.undo)
                continue
            ctx = self._ctx(spec, phase="undo")
            try:
                action.undo(ctx, item.plan, item.record)
                left = self._read(ctx, spec.id, lambda: action.undone(ctx, item.plan, item.record))  # noqa: B023
            except (StepFailed, ClusterError) as exc:
                left = None
                step_state.status = st.UNDO_FAILED
                step_state.undo = f"undo failed: {one_line(exc)}"
                problems.append(f"{spec.id}: {one_line(exc)}")
            else:
                if left:
                    step_state.status = st.UNDO_FAILED
                    step_state.undo = f"not restored: {one_line(left)}"
                    problems.append(f"{spec.id}: {one_line(left)}")
                else:
                    step_state.status = st.UNDONE
                    step_state.undo = "undone"
            self.state.save()
            self._audit("undo", step=spec.id, result=step_state.undo, status=step_state.status)
            self._emit("undo-finished", spec.id, step_state.undo, status=step_state.status)
        return problems

    def undo(self) -> RunResult:
        """`--undo RUN_ID`: undo what a failed or interrupted run changed."""
        unusable = self.audit.problem()
        if unusable:
            raise RunError(unusable)  # and not audited: the log is what is broken
        why = self._state_refusal(undo=True)
        if why:
            self._refused(why, undo=True)
            raise RunError(why)
        self._identity = AwsIdentity(self.aws)
        items, barrier = self._undo_list()
        undoable = [i for i in items if i.action.can_undo]
        if barrier and not undoable:
            why = barrier_refusal(barrier, self._kept(barrier))
            self._refused(why, undo=True)
            return self._finish_result("blocked", None, error=why)
        why = self._target_gone() if undoable else ""
        if why:
            self._refused(why, undo=True)
            return self._finish_result("blocked", None, error=why)
        harm = max((i.action.harm for i in undoable), default=Harm.NONE)
        lines = [f"undo run {self.run_id} ({self.book.name} on {self.target}), newest first:"]
        for item in items:
            verb = "undo" if item.action.can_undo else "keep (cannot be undone)"
            lines.append(f"  {verb} {item.action.title.lower()}")
        if barrier:
            lines.append(f"  stop at {barrier}: the steps before it stay as they are")
        text = "\n".join(lines)
        self._emit("notice", message=text)
        if harm > Harm.NONE and not self.yes:
            if self.confirmer is None:
                raise RunError("undo changes the cluster: confirm it, or pass --yes")
            word = self.target if harm >= Harm.HIGH else "y"
            if not self._ask(harm, text, word):
                return self._declined(None)
        elif self.yes:
            self.confirmation = self.confirmation or "--yes"
        lock = self._lock()
        if lock is not None:
            try:
                lock.acquire()
            except LockError as exc:
                self._refused(str(exc), undo=True)
                return self._finish_result("blocked", None, error=str(exc))
        self._lock_held = lock
        try:
            self.state.pid = os.getpid()
            self.state.host = st.this_host()
            self._audit(
                "undo-started",
                **self._names(),
                who=self._who(),
                confirmed=self.confirmation,
            )
            result = self._undo_run(items, barrier)
        finally:
            self.finishing = True
            self._lock_held = None
            left = lock.release() if lock is not None else None
        self._lock_left(result, left)
        standing = self.standing()
        if standing:
            result.notices.append(standing)
        return result

    def _undo_run(self, items: list[UndoItem], barrier: str) -> RunResult:
        try:
            problems = self._undo_items(items)
        except (Cancelled, KeyboardInterrupt, LockLost) as exc:
            self.finishing = True
            why = str(exc) if isinstance(exc, LockLost) else "stopped by Ctrl-C"
            self.state.save()  # the run keeps its status; the steps say what was undone
            self._audit("finished", outcome="undo-interrupted", error=why, report=self._report())
            result = self._finish_result(
                st.INTERRUPTED, None, error=f"undo {why}: nothing more was changed"
            )
            result.notices.append(f"`mignurse run --undo {self.run_id}` undoes the rest")
            return result
        self.finishing = True
        if barrier:
            problems.append(barrier_refusal(barrier, self._kept(barrier)))
        self.state.status = st.RUN_FAILED if problems else st.RUN_UNDONE
        error = "undo incomplete: " + "; ".join(problems) if problems else ""
        if problems:
            self.state.error = error
        self.state.save()
        self._audit("finished", outcome=self.state.status, error=error, report=self._report())
        result = self._finish_result(self.state.status, None, error=error)
        return result

    def _kept(self, barrier: str) -> list[str]:
        """The steps that stay as they are: the barrier's and every touched one before it."""
        stop = barrier.split(":", 1)[0]
        kept: list[str] = []
        for spec in self.book.steps:
            step_state = self.state.step(spec.id)
            if step_state.touched and spec.make().mutates:
                kept.append(spec.id)
            if spec.id == stop:
                break
        return kept


@dataclass
class UndoItem:
    spec: StepSpec
    action: Action
    step: st.StepState
    record: dict[str, Any]
    plan: StepPlan


def barrier_refusal(barrier: str, kept: list[str]) -> str:
    step, _, why = barrier.partition(": ")
    return (
        f"cannot be undone past step {step}: {why}; the steps before it "
        f"({', '.join(kept)}) stay as they are, the safe state"
    )
