"""The runbook engine: plan, confirm, lock, apply/verify step by step, undo, record.

Decisions:
- Plan first: every step's check and plan run (read-only) before anything changes; a
  failed check or plan stops the run there, with nothing changed. `--dry-run` stops after
  showing the plan and writes no run state and takes no lock.
- One confirmation per run at the highest harm among the mutating steps: y/N for LOW, the
  node (or cluster) name typed for HIGH. The `Confirmer` protocol lets the terminal and
  the app's modal both answer it; `yes=True` skips it.
- Just before its apply, each step is checked again and planned again (the node may have
  changed since the plan was shown: an earlier step, or another person); the fresh plan
  is the one recorded.
- A failure that may pass on its own (the API server unreachable, a 5xx, a 429) is read
  again with backoff in check, plan and verify for up to READ_RETRY_SECONDS; apply is run
  again only where the step allows (`Action.retries`). A 409 on a write (another writer
  changed the object between the step's read and its write) is small: the step is checked
  and planned again from a fresh read and applied again, CONFLICT_TRIES times at most. A 401,
  403 or 404 fails at once.
- Before every change a step makes (`ctx.intend`): Ctrl-C and a lost lock stop it, and the
  change and the prior values undo needs are written to the run state and the audit log
  first. So a run killed just after a write still knows what to put back, and a run that
  lost its lock changes nothing more.
- On failure, a runbook with `undo: on-failure` undoes every step that may have changed
  something, newest first, including one interrupted mid-apply. Ctrl-C never undoes on
  its own: the run is `interrupted`, the lock released, and the operator picks
  `--resume RUN_ID` or `--undo RUN_ID`.
- Undo reconciles with the cluster (each step's undo changes only what is not back), then
  reads back that the prior state is there and names what is not. It stops at a step that
  cannot be undone and says the earlier ones must stay (the instance is being replaced,
  the GPUs are half repartitioned): the node keeps the safe state they made.
- The run state is saved before the lock is taken, so a lock never names a run without
  one; a lock that cannot be released is reported with the command that clears it.
- No printing here: everything goes to the listener as `RunEvent`s, and the audit log
  and run state are written after every phase.

Where it lives: here the `Runner` (plan, confirm, run and resume, what can follow a stopped
run), built on `undo.py` (walking a run back) and `core.py` (the state and plumbing one run
carries); `plan.py` and `outcome.py` hold what a run shows and says to a face, `wiring.py`
how it reaches nodes and AWS.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from mignurse.cluster.client import ClusterClient, ClusterError, Conflict
from mignurse.nodeaccess.base import NodeShell
from mignurse.runner import state as st
from mignurse.runner.audit import AwsIdentity, read_audit
from mignurse.runner.core import one_line
from mignurse.runner.leftovers import Leftover, find_leftovers
from mignurse.runner.lock import LockError
from mignurse.runner.outcome import Followup, RunError, RunResult
from mignurse.runner.plan import Plan, PlannedStep
from mignurse.runner.schema import Runbook
from mignurse.runner.step import (
    Cancelled,
    Harm,
    LockLost,
    StepContext,
    StepFailed,
    StepPlan,
    transient,
)
from mignurse.runner.undo import RunUndo, barrier_refusal

CONFLICT_TRIES = 3  # fresh reads after a 409 before a step's write is given up


def possible_followups(
    run_id: str,
    *,
    client: ClusterClient,
    books: dict[str, Runbook] | None = None,
    shell_for: Callable[[str], NodeShell] | None = None,
    aws: Callable[[str], Any] | None = None,
) -> dict[str, Followup]:
    """{"resume": Followup, "undo": Followup} for a run, as `--resume`/`--undo` would judge
    it now: its state, the lock on its target, the target itself, and (read-only) the plan
    of what is left or the steps undo would walk back. Reads the cluster (and, for a MIG
    step, the node): call it off the UI thread. Never raises."""
    try:
        runner = Runner.from_state(run_id, client=client, books=books, shell_for=shell_for, aws=aws)
    except RunError as exc:
        why = str(exc)
        if why.startswith("no run ") and any(e.get("run") == run_id for e in read_audit()):
            why = f"run {run_id} never changed anything (declined, refused or a dry run)"
        return {"resume": Followup(False, why), "undo": Followup(False, why)}
    return runner.followups()


class Runner(RunUndo):
    """Runs one runbook on one target. Build it with `Runner(book, params, …)` for a new
    run, or `Runner.from_state(run_id, …)` to resume or undo one."""

    # -- planning ---------------------------------------------------------------------

    def plan(self) -> Plan:
        """Check and plan every step not yet done (read-only)."""
        planned: list[PlannedStep] = []
        for spec in self.book.steps:
            step_state = self.state.step(spec.id)
            item = PlannedStep(spec, spec.make(), status=step_state.status)
            planned.append(item)
            if step_state.status in st.DONE:
                continue
            ctx = self._ctx(spec, phase="plan")
            try:
                reason = self._read(ctx, spec.id, lambda: item.action.check(ctx))  # noqa: B023
                if reason:
                    item.blocked = reason
                    continue
                item.plan = self._read(ctx, spec.id, lambda: item.action.plan(ctx))  # noqa: B023
            except (StepFailed, ClusterError) as exc:
                item.blocked = one_line(exc)
            except Cancelled:
                item.blocked = "interrupted while planning"
        harm = max(
            (p.action.harm for p in planned if p.action.mutates and p.status not in st.DONE),
            default=Harm.NONE,
        )
        info = self.client.info
        plan = Plan(self.book, self.target, planned, harm, context=info.context, cluster=info.name)
        if self.book.mutates and not self.resuming:
            self._judge_leftovers(plan)
        return plan

    @property
    def resuming(self) -> bool:
        """Whether this run already did something (a resume), rather than starting afresh."""
        return any(s.status != st.PENDING or s.intents for s in self.state.steps)

    def leftovers(self) -> list[Leftover]:
        """Other runs on this target that did not end cleanly, with what the cluster still
        shows of them and the commands that settle them (reads the cluster)."""
        return find_leftovers(
            self.client,
            node_target=self.book.target == "node",
            target=self.target,
            exclude=self.run_id,
            followups=lambda run_id: possible_followups(
                run_id, client=self.client, shell_for=self.shell_for, aws=self.aws
            ),
        )

    def _judge_leftovers(self, plan: Plan) -> None:
        """A new run does not start over another run's unfinished changes of the same
        runbook, nor beside a run still alive, nor against another run's live lock; leftovers
        of other runbooks are shown in the plan."""
        try:
            found = self.leftovers()
        except ClusterError as exc:
            plan.refusal = f"cannot tell what other runs left on {self.target}: {one_line(exc)}"
            return
        plan.leftovers = [item.describe() for item in found]
        holding = [i for i in found if i.alive or i.runbook == self.book.name]
        if holding:
            first = holding[0]
            plan.refusal = first.describe() + ("; then run this again" if not first.alive else "")
            return
        locked = self._lock_refusal()
        if locked:
            plan.refusal = locked

    def _confirm(self, plan: Plan) -> bool:
        if plan.harm == Harm.NONE:
            self.confirmation = self.confirmation or "not needed (no change)"
            return True
        if self.yes:
            self.confirmation = self.confirmation or "--yes"
            return True
        if self.confirmer is None:
            raise RunError("this runbook changes the cluster: confirm it, or pass --yes")
        word = plan.typed_word() if plan.harm >= Harm.HIGH else "y"
        return self._ask(plan.harm, plan.text(), word)

    # -- running ----------------------------------------------------------------------

    def run(self, *, dry_run: bool = False) -> RunResult:
        """Plan, show, confirm, then apply every step (a fresh run or a resume)."""
        unusable = self.audit.problem()
        if unusable:  # a dry run and a read-only run are recorded too: refused alike
            raise RunError(unusable)  # and not audited: the log is what is broken
        resuming = self.resuming
        if resuming:
            released = self._release_left_lock()
            if released is not None:
                return released
            self._check_resumable()
        self._identity = AwsIdentity(self.aws)
        plan = self.plan()
        self._emit("plan", message=plan.text(), plan=plan)
        if self.cancel_event.is_set():
            return self._declined(plan)  # Ctrl-C while planning: nothing changed
        if plan.blocked_line():
            return self._blocked(plan, resuming)
        if dry_run:
            return self._dry_run(plan)
        if not self._confirm(plan) or self.cancel_event.is_set():
            return self._declined(plan)
        previous = self._mark_running(plan)
        lock = self._lock()
        notices: list[str] = []
        try:
            if lock is not None:
                notice = lock.acquire()
                if notice:
                    notices.append(notice)
                    self._emit("notice", message=notice)
        except LockError as exc:
            return self._lock_refused(plan, exc, resuming=resuming, previous=previous)
        if lock is not None and lock.held:
            lock.start_renewing(
                lambda: self._emit("notice", message=lock.lost or "the lock was lost")
            )
        self._lock_held = lock
        try:
            self._audit(
                "resumed" if resuming else "started",
                **self._names(),
                params=self.params,
                who=self._who(),
                confirmed=self.confirmation,
                notices=notices,
            )
            result = self._run_steps(plan)
        except KeyboardInterrupt:
            result = self._interrupted(plan, "")
        finally:
            self.finishing = True
            self._lock_held = None
            left = lock.release() if lock is not None else None
        self._lock_left(result, left)
        result.notices = notices + result.notices
        return self._ended(result, leftovers=bool(plan.leftovers))

    def _ended(self, result: RunResult, *, leftovers: bool) -> RunResult:
        """The report's last words: where the target stands, and what other runs still left
        on it (when the plan showed some), both read back now."""
        standing = self.standing()
        if standing:
            result.notices.append(standing)
        if leftovers:
            try:
                still = self.leftovers()
            except ClusterError:
                still = []
            result.notices += [f"still left by another run: {x.describe()}" for x in still]
        return result

    def _blocked(self, plan: Plan, resuming: bool) -> RunResult:
        """A step's check or plan failed: the run stops before anything changes."""
        why = plan.blocked_line()
        self._audit(
            "refused",
            **self._names(),
            reason=why,
            params=self.params,
            resume=resuming,
            who=self._who(),
        )
        return self._finish_result("blocked", plan, error=why)

    def _dry_run(self, plan: Plan) -> RunResult:
        self._audit(
            "dry-run",
            **self._names(),
            params=self.params,
            who=self._who(),
            plan=plan.to_json(),
        )
        return RunResult(self.run_id, "dry-run", plan, self.state.steps)

    def _mark_running(self, plan: Plan) -> str:
        """Keep each step's confirmed plan and save the run as running, before the lock is
        taken (a lock always names a run that has a state); returns the status it had."""
        for item in plan.steps:
            step_state = self.state.step(item.spec.id)
            if item.plan is not None and step_state.planned is None:
                step_state.planned = item.plan.to_json()
        previous = self.state.status
        self.state.status = st.RUNNING
        self.state.pid = os.getpid()
        self.state.host = st.this_host()
        self.state.save()
        return previous

    def _lock_refused(
        self, plan: Plan, exc: LockError, *, resuming: bool, previous: str
    ) -> RunResult:
        """Another run holds the target: a resumed run keeps its status, a new one never
        started and leaves nothing to resume or undo."""
        self._audit(
            "refused",
            **self._names(),
            reason=str(exc),
            resume=resuming,
            who=self._who(),
        )
        if resuming:
            self.state.status = previous
            self.state.save()
        else:
            self.state.delete()
        return RunResult(self.run_id, "blocked", plan, self.state.steps, error=str(exc))

    def _release_left_lock(self) -> RunResult | None:
        """`--resume` of a run that ended (succeeded or undone) but whose process died before
        releasing its lock: release it, and say so; None when there is nothing of the kind."""
        lock = self._lock()
        if self.state.status not in st.ENDED or lock is None or not lock.clear_left():
            return None
        notice = f"released the lock its process left on {lock.what}"
        self._audit("lock-released", **self._names(), who=self._who(), detail=notice)
        return RunResult(self.run_id, self.state.status, None, self.state.steps, notices=[notice])

    def _check_resumable(self) -> None:
        why = self._state_refusal(undo=False)
        if why:
            self._refused(why, resume=True)
            raise RunError(why)

    # -- what can follow a stopped run ------------------------------------------------

    def followups(self) -> dict[str, Followup]:
        """Whether `--resume` and `--undo` of this run can run now (see possible_followups)."""
        return {"resume": self._resume_followup(), "undo": self._undo_followup()}

    def _resume_followup(self) -> Followup:
        lock = self._lock()
        if self.state.status in st.ENDED and lock is not None and lock.left_by_this_run():
            return Followup(
                True,
                f"releases the lock its process left on {lock.what} (the run itself "
                f"{self.state.status})",
            )
        why = self._state_refusal(undo=False) or self._lock_refusal()
        if why:
            return Followup(False, why)
        plan = self.plan()
        if plan.blocked_line():
            return Followup(False, plan.blocked_line())
        left = [s.spec.id for s in plan.steps if s.status not in st.DONE]
        if not left and self.state.status == st.RUNNING:
            return Followup(True, "records the end of the run: every step is done")
        if not left:
            return Followup(False, f"run {self.run_id} has no step left to run")
        return Followup(True, f"continues from step {left[0]} ({len(left)} of "
                        f"{len(plan.steps)} steps left)")  # fmt: skip

    def _undo_followup(self) -> Followup:
        why = self._state_refusal(undo=True)
        if why:
            return Followup(False, why)
        items, barrier = self._undo_list()
        undoable = [i.spec.id for i in items if i.action.can_undo]
        if barrier and not undoable:
            return Followup(False, barrier_refusal(barrier, self._kept(barrier)))
        why = self._target_gone()
        if why:
            return Followup(False, why)
        if not undoable:
            return Followup(False, "nothing to undo: no step changed what undo can put back")
        why = self._lock_refusal()
        if why:
            return Followup(False, why)
        stop = f", then stops at step {barrier.split(':', 1)[0]}" if barrier else ""
        return Followup(True, f"undoes {', '.join(undoable)} (newest first){stop}")

    # -- the steps, one by one ----------------------------------------------------------

    def _run_steps(self, plan: Plan) -> RunResult:
        current = ""
        try:
            for item in plan.steps:
                current = item.spec.id
                step_state = self.state.step(current)
                if step_state.status in st.DONE:
                    continue
                self._stop_if_cancelled()
                # Killed between apply and verify: verify decides whether it is done.
                if (
                    step_state.status == st.APPLIED
                    and step_state.applied is not None
                    and self._verify_only(item, step_state) == st.VERIFIED
                ):
                    continue
                self._run_step(item, step_state)
                if step_state.status == st.FAILED:
                    return self._failed(plan, step_state)
        except (Cancelled, KeyboardInterrupt):
            return self._interrupted(plan, current)
        except LockLost as exc:
            return self._lock_lost(plan, current, str(exc))
        self.finishing = True
        self.state.status = st.SUCCEEDED
        self.state.save()
        self._audit("finished", outcome=st.SUCCEEDED, report=self._report())
        return self._finish_result(st.SUCCEEDED, plan)

    def _verify_only(self, item: PlannedStep, step_state: st.StepState) -> str:
        ctx = self._ctx(item.spec)
        step_plan = StepPlan.from_json(step_state.plan or {})
        try:
            problem = self._read(
                ctx,
                item.spec.id,
                lambda: item.action.verify(ctx, step_plan, step_state.applied or {}),
            )
        except (StepFailed, ClusterError) as exc:
            problem = str(exc)
        if problem is None:
            step_state.status = st.VERIFIED
            self.outputs[item.spec.id] = step_state.applied or {}
            self.state.save()
            self._emit("step-finished", item.spec.id, "verified (applied before the stop)")
            return st.VERIFIED
        return st.PENDING

    def _run_step(self, item: PlannedStep, step_state: st.StepState) -> None:
        spec, action = item.spec, item.action
        step_state.started = st.now_text()
        step_state.error = ""
        self._emit("step-started", spec.id, action.title)
        ctx = self._ctx(spec)
        try:
            reason = self._read(ctx, spec.id, lambda: action.check(ctx))
            if reason:
                raise StepFailed(f"precondition: {reason}")
            step_plan = self._read(ctx, spec.id, lambda: action.plan(ctx))
            step_state.plan = step_plan.to_json()
            if step_plan.nothing_to_do:
                step_state.status = st.SKIPPED
                step_state.applied = dict(step_plan.data)
                self.outputs[spec.id] = step_state.applied
                self._step_done(step_state, "nothing to do")
                return
            ctx.check_cancel()
            applied, step_plan = self._apply(item, ctx, step_plan, step_state)
            step_state.applied = applied
            step_state.status = st.APPLIED
            self.outputs[spec.id] = applied
            self.state.save()
            problem = self._read(ctx, spec.id, lambda: action.verify(ctx, step_plan, applied))
            if problem:
                raise StepFailed(f"verify: {problem}")
            step_state.status = st.VERIFIED
            self._step_done(step_state, "verified")
        except (StepFailed, ClusterError) as exc:
            self._step_failed(step_state, str(exc))
        except (Cancelled, KeyboardInterrupt, LockLost) as exc:
            if step_state.status != st.APPLIED:
                step_state.status = st.STOPPED if step_state.touched else st.PENDING
            step_state.error = str(exc) if isinstance(exc, LockLost) else "interrupted"
            self._record_step(step_state, error=step_state.error)
            # the listener's table must not keep showing the step as running
            self._emit("step-finished", spec.id, step_state.error, status=step_state.status)
            raise

    def _apply(
        self, item: PlannedStep, ctx: StepContext, step_plan: StepPlan, step_state: st.StepState
    ) -> tuple[dict[str, Any], StepPlan]:
        """Apply, trying again where the step allows (`retries`) after a failure that may pass
        on its own; after a 409 (the object changed under the step) the step is checked and
        planned afresh first, then applied again, whatever its `retries`: its apply reconciles
        with what is there, as a resume does. Returns what apply returned and the plan it
        applied."""
        action = item.action
        retried = conflicts = 0
        while True:
            step_state.attempts += 1
            self.state.save()
            try:
                return action.apply(ctx, step_plan), step_plan
            except (StepFailed, ClusterError) as exc:
                conflict = isinstance(exc, Conflict) or (
                    isinstance(exc, StepFailed) and exc.conflict
                )
                if conflict and conflicts < CONFLICT_TRIES and ctx.time_left() > 0:
                    conflicts += 1
                    self._emit("output", step_state.id, f"read again after: {one_line(exc)}")
                    step_plan = self._replan(item, ctx, step_state)
                    if step_plan.nothing_to_do:  # someone else made the change meanwhile
                        return dict(step_plan.data), step_plan
                    continue
                if not transient(exc) or retried >= action.retries or ctx.time_left() <= 0:
                    raise
                retried += 1
                self._emit("output", step_state.id, f"retrying after: {one_line(exc)}")
                ctx.sleep(min(2.0 * retried, max(0.0, ctx.time_left())))

    def _replan(self, item: PlannedStep, ctx: StepContext, step_state: st.StepState) -> StepPlan:
        """The step's precondition checked and its plan made again from a fresh read."""
        action, step = item.action, item.spec.id
        reason = self._read(ctx, step, lambda: action.check(ctx))
        if reason:
            raise StepFailed(f"precondition: {reason}")
        fresh: StepPlan = self._read(ctx, step, lambda: action.plan(ctx))
        step_state.plan = fresh.to_json()
        return fresh

    def _step_done(self, step_state: st.StepState, message: str) -> None:
        self._record_step(step_state)
        self._emit("step-finished", step_state.id, message, status=step_state.status)

    def _record_step(self, step_state: st.StepState, **extra: Any) -> None:
        """Save the run state and write the step's audit line (after it ended either way)."""
        step_state.finished = st.now_text()
        self.state.save()
        self._audit(
            "step",
            step=step_state.id,
            action=step_state.action,
            status=step_state.status,
            **extra,
            plan=step_state.plan,
            applied=step_state.applied,
            prior=step_state.prior or None,
            started=step_state.started,
            finished=step_state.finished,
            attempts=step_state.attempts,
        )

    def _step_failed(self, step_state: st.StepState, error: str) -> None:
        # A failed verify leaves what apply returned: undo still needs it.
        step_state.status = st.FAILED
        step_state.error = " ".join(error.split())
        self._record_step(step_state, error=step_state.error)
        self._emit("step-finished", step_state.id, step_state.error, status=st.FAILED)

    def _failed(self, plan: Plan, failed: st.StepState) -> RunResult:
        self.state.status = st.RUN_FAILED
        self.state.error = f"step {failed.id} failed: {failed.error}"
        self.state.save()
        if self.book.undo == "on-failure":
            try:
                items, barrier = self._undo_list()
                problems = self._undo_items(items)
            except (Cancelled, KeyboardInterrupt):
                problems, barrier = ["the undo was stopped by Ctrl-C"], ""
            except LockLost as exc:
                problems, barrier = [str(exc)], ""
            if barrier:
                problems.append(barrier_refusal(barrier, self._kept(barrier)))
            if problems:
                self.state.error += "; undo incomplete: " + "; ".join(problems)
            else:
                self.state.status = st.RUN_UNDONE
        self.finishing = True
        self.state.save()
        self._audit(
            "finished", outcome=self.state.status, error=self.state.error, report=self._report()
        )
        return self._finish_result(self.state.status, plan, error=self.state.error)

    def _interrupted(self, plan: Plan | None, step_id: str) -> RunResult:
        self.finishing = True
        self.state.status = st.INTERRUPTED
        self.state.error = f"interrupted during step {step_id}" if step_id else "interrupted"
        self.state.save()
        self._audit("finished", outcome=st.INTERRUPTED, step=step_id, report=self._report())
        result = self._finish_result(st.INTERRUPTED, plan, error=self.state.error)
        midway = [s.id for s in self.state.steps if s.status == st.STOPPED]
        if midway:
            result.notices.append(
                f"step {midway[0]} stopped after announcing a change, which may have been "
                "made: resume and undo both read the cluster to settle it"
            )
        # what can follow (resume, undo) is for the face to ask: possible_followups
        result.notices.append("nothing was undone")
        return result

    def _lock_lost(self, plan: Plan, step_id: str, why: str) -> RunResult:
        self.finishing = True
        self.state.status = st.RUN_FAILED
        self.state.error = f"step {step_id} stopped: {why}; nothing more was changed"
        self.state.save()
        self._audit(
            "finished", outcome=st.RUN_FAILED, step=step_id, error=why, report=self._report()
        )
        result = self._finish_result(st.RUN_FAILED, plan, error=self.state.error)
        result.notices.append(
            "nothing was undone: another run holds the target now; once it has finished, "
            f"`mignurse run --undo {self.run_id}` or `mignurse run --resume {self.run_id}`"
        )
        return result
