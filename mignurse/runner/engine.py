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
- Retries only where the step allows (`Action.retries`) and only for a
  `StepFailed(retryable=True)`; a failed verify is never retried.
- On failure, a runbook with `undo: on-failure` undoes its completed steps newest first
  (a step whose verify failed is undone too: its apply did run). Ctrl-C never undoes on
  its own: the run is `interrupted`, the lock released, and the operator picks
  `--resume RUN_ID` or `--undo RUN_ID`.
- No printing here: everything goes to the listener as `RunEvent`s, and the audit log
  and run state are written after every phase.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mignurse.cluster.client import NODES, ClusterClient, ClusterError
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.runner import state as st
from mignurse.runner.audit import Audit, AwsIdentity, local_holder
from mignurse.runner.lock import DEFAULT_TTL, LockError, TargetLock
from mignurse.runner.schema import Runbook, StepSpec, load_runbooks
from mignurse.runner.step import Action, Cancelled, Harm, StepContext, StepFailed, StepPlan


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


class Confirmer(Protocol):
    def confirm(self, level: Harm, plan_text: str, expected_word: str) -> bool:
        """LOW: a yes/no; HIGH: the operator must type `expected_word`."""
        ...


@dataclass
class PlannedStep:
    spec: StepSpec
    action: Action
    plan: StepPlan | None = None
    blocked: str = ""  # the failed check or plan, one line
    status: str = st.PENDING  # for a resume: steps already done are shown as such

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.spec.id,
            "action": self.spec.action,
            "title": self.action.title,
            "mutates": self.action.mutates,
            "harm": self.action.harm.name.lower(),
            "canUndo": self.action.can_undo,
            "status": self.status,
            "blocked": self.blocked or None,
            "plan": self.plan.to_json() if self.plan else None,
        }


@dataclass
class Plan:
    book: Runbook
    target: str
    steps: list[PlannedStep]
    harm: Harm

    @property
    def blocked(self) -> list[PlannedStep]:
        return [s for s in self.steps if s.blocked]

    def text(self) -> str:
        """The plan as plain text (the confirmation prompt and piped output show it)."""
        lines = [f"{self.book.name} on {self.target}: {self.book.title}"]
        for i, step in enumerate(self.steps, 1):
            head = f"{i}. {step.spec.id} ({step.action.title})"
            if step.status in st.DONE:
                lines.append(f"{head}: already {step.status}")
                continue
            if not step.action.mutates:
                head += " [read-only]"
            lines.append(head)
            if step.blocked:
                lines.append(f"   BLOCKED: {step.blocked}")
                continue
            plan = step.plan or StepPlan()
            if plan.nothing_to_do:
                lines.append("   nothing to do")
            lines.extend(f"   change {c.describe()}" for c in plan.changes)
            lines.extend(f"   run {c.describe()}" for c in plan.commands)
            lines.extend(f"   note: {n}" for n in plan.notes)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "runbook": self.book.name,
            "target": self.target,
            "harm": self.harm.name.lower(),
            "steps": [s.to_json() for s in self.steps],
        }


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
            if s.error:
                line += f": {s.error}"
            if s.undo:
                line += f" ({s.undo})"
            lines.append(line)
        return lines


def node_shells(
    client: ClusterClient, factory: Callable[[Node], NodeShell]
) -> Callable[[str], NodeShell]:
    """`ctx.shell_for(name)` from a `collect.transports.shell_factory`: one shell per node
    for the whole run (a simulated node's sandbox keeps its state between steps)."""
    cache: dict[str, NodeShell] = {}
    guard = threading.Lock()

    def shell_for(name: str) -> NodeShell:
        with guard:
            if name not in cache:
                try:
                    raw = client.get(NODES, name)
                except ClusterError as exc:
                    raise StepFailed(f"cannot reach node {name}: {exc}") from None
                cache[name] = factory(Node.from_api(raw))
            return cache[name]

    return shell_for


class Runner:
    """Runs one runbook on one target. Build it with `Runner(book, params, …)` for a new
    run, or `Runner.from_state(run_id, …)` to resume or undo one."""

    def __init__(
        self,
        book: Runbook,
        params: dict[str, Any],
        *,
        client: ClusterClient,
        shell_for: Callable[[str], NodeShell] | None = None,
        aws: Callable[[str], Any] | None = None,
        listener: Listener | None = None,
        confirmer: Confirmer | None = None,
        yes: bool = False,
        holder: str | None = None,
        audit: Audit | None = None,
        lock_ttl: float = DEFAULT_TTL,
        state: st.RunState | None = None,
    ) -> None:
        self.book = book
        defaults = {n: p.default for n, p in book.params.items() if p.default is not None}
        self.params = {**defaults, **params}
        self.client = client
        self.shell_for = shell_for
        self.aws = aws
        self.listener = listener or (lambda event: None)
        self.confirmer = confirmer
        self.yes = yes
        self.holder = holder or local_holder()
        self.audit = audit or Audit()
        self.lock_ttl = lock_ttl
        self.cancel_event = threading.Event()
        self.target = str(params.get("node", "")) if book.target == "node" else self._cluster_name()
        self.state = state or st.RunState(
            run_id=st.new_run_id(),
            runbook=book.name,
            params=self.params,
            context=client.info.context,
            cluster=client.info.cluster,
            target=self.target,
            holder=self.holder,
            steps=[st.StepState(s.id, s.action) for s in book.steps],
        )
        self.outputs: dict[str, dict[str, Any]] = {
            s.id: s.applied for s in self.state.steps if s.applied and s.status in st.DONE
        }
        self._identity: AwsIdentity | None = None
        self._identity_logged = False

    @classmethod
    def from_state(
        cls,
        run_id: str,
        *,
        client: ClusterClient,
        books: dict[str, Runbook] | None = None,
        **kwargs: Any,
    ) -> Runner:
        try:
            saved = st.RunState.load(run_id)
        except FileNotFoundError:
            raise RunError(f"no run {run_id!r}: `mignurse runs` lists them") from None
        except (ValueError, TypeError) as exc:
            raise RunError(f"the state of run {run_id} is unreadable: {exc}") from None
        books = books if books is not None else load_runbooks()
        book = books.get(saved.runbook)
        if book is None:
            raise RunError(f"run {run_id} used runbook {saved.runbook!r}, which is gone")
        if saved.context != client.info.context:
            raise RunError(
                f"run {run_id} ran against context {saved.context!r}, not "
                f"{client.info.context!r}: pass --context {saved.context}"
            )
        if [s.id for s in saved.steps] != [s.id for s in book.steps]:
            raise RunError(f"runbook {book.name} changed since run {run_id}: its steps differ")
        return cls(book, saved.params, client=client, state=saved, **kwargs)

    # -- plumbing ---------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def cancel(self) -> None:
        """Ctrl-C or the app's cancel: the running step stops at its next wait."""
        self.cancel_event.set()

    def _cluster_name(self) -> str:
        return self.client.info.cluster or self.client.info.context

    def _emit(self, kind: str, step: str = "", message: str = "", **data: Any) -> None:
        self.listener(RunEvent(kind, step, message, data))

    def _ctx(self, spec: StepSpec) -> StepContext:
        return StepContext(
            client=self.client,
            params=self.params,
            with_args=dict(spec.with_args),
            shell_for=self.shell_for,
            aws=self.aws,
            outputs=self.outputs,
            log=lambda line: self._emit("output", spec.id, line),
            cancel=self.cancel_event,
            timeout=self.book.step_timeout(spec, self.params),
            started=time.monotonic(),
            run_id=self.run_id,
            holder=self.holder,
        )

    def _audit(self, event: str, **fields: Any) -> None:
        identity = self._identity
        if identity is not None and identity.done.is_set() and not self._identity_logged:
            self._identity_logged = True
            if identity.arn:
                self.audit.write("identity", self.run_id, aws=identity.arn)
        self.audit.write(event, self.run_id, **fields)

    def _who(self) -> dict[str, Any]:
        identity = self._identity
        arn = identity.arn if identity is not None and identity.done.is_set() else ""
        if arn:
            self._identity_logged = True
        return {"local": self.holder, "kube": self.client.info.user, "aws": arn or None}

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
            ctx = self._ctx(spec)
            try:
                reason = item.action.check(ctx)
                if reason:
                    item.blocked = reason
                    continue
                item.plan = item.action.plan(ctx)
            except StepFailed as exc:
                item.blocked = str(exc)
            except ClusterError as exc:
                item.blocked = str(exc)
        harm = max(
            (p.action.harm for p in planned if p.action.mutates and p.status not in st.DONE),
            default=Harm.NONE,
        )
        return Plan(self.book, self.target, planned, harm)

    def _confirm(self, plan: Plan) -> bool:
        if self.yes or plan.harm == Harm.NONE:
            return True
        if self.confirmer is None:
            raise RunError("this runbook changes the cluster: confirm it, or pass --yes")
        word = self.target if plan.harm >= Harm.HIGH else "y"
        return self.confirmer.confirm(plan.harm, plan.text(), word)

    # -- running ----------------------------------------------------------------------

    def run(self, *, dry_run: bool = False) -> RunResult:
        """Plan, show, confirm, then apply every step (a fresh run or a resume)."""
        resuming = any(s.status != st.PENDING for s in self.state.steps)
        if resuming:
            self._check_resumable()
        self._identity = AwsIdentity()
        plan = self.plan()
        self._emit("plan", message=plan.text(), plan=plan)
        if plan.blocked:
            first = plan.blocked[0]
            why = f"step {first.spec.id} cannot run: {first.blocked}"
            self._audit(
                "refused",
                runbook=self.book.name,
                target=self.target,
                reason=why,
                params=self.params,
            )
            return self._finish_result("blocked", plan, error=why)
        if dry_run:
            self._audit(
                "dry-run",
                runbook=self.book.name,
                target=self.target,
                context=self.client.info.context,
                params=self.params,
                who=self._who(),
                plan=plan.to_json(),
            )
            return RunResult(self.run_id, "dry-run", plan, self.state.steps)
        if not self._confirm(plan):
            self._audit("declined", runbook=self.book.name, target=self.target, who=self._who())
            return RunResult(self.run_id, "declined", plan, self.state.steps)
        lock = self._lock()
        notices: list[str] = []
        try:
            if lock is not None:
                notice = lock.acquire()
                if notice:
                    notices.append(notice)
                    self._emit("notice", message=notice)
                lock.start_renewing(
                    lambda: self._emit("notice", message="the lock was lost (taken over)")
                )
        except LockError as exc:
            self._audit("refused", runbook=self.book.name, target=self.target, reason=str(exc))
            return RunResult(self.run_id, "blocked", plan, self.state.steps, error=str(exc))
        try:
            self.state.status = st.RUNNING
            self.state.pid = os.getpid()
            self.state.save()
            self._audit(
                "resumed" if resuming else "started",
                runbook=self.book.name,
                target=self.target,
                context=self.client.info.context,
                cluster=self.client.info.cluster,
                params=self.params,
                who=self._who(),
                notices=notices,
            )
            result = self._run_steps(plan)
            result.notices = notices + result.notices
            return result
        finally:
            if lock is not None:
                lock.release()

    def _check_resumable(self) -> None:
        status = self.state.status
        if status == st.SUCCEEDED:
            raise RunError(f"run {self.run_id} already succeeded: nothing to resume")
        if status == st.RUN_UNDONE:
            raise RunError(f"run {self.run_id} was undone: start a new run instead")
        if status == st.RUNNING and self.state.alive():
            raise RunError(f"run {self.run_id} is still running (pid {self.state.pid})")

    def _lock(self) -> TargetLock | None:
        if not self.book.mutates:
            return None
        return TargetLock(
            self.client,
            target=self.book.target,
            name=self.target,
            holder=self.holder,
            run_id=self.run_id,
            runbook=self.book.name,
            ttl=self.lock_ttl,
        )

    def _run_steps(self, plan: Plan) -> RunResult:
        for item in plan.steps:
            step_state = self.state.step(item.spec.id)
            if step_state.status in st.DONE:
                continue
            if step_state.status == st.APPLIED and step_state.applied is not None:
                # Killed between apply and verify: verify decides whether it is done.
                outcome = self._verify_only(item, step_state)
                if outcome == st.VERIFIED:
                    continue
            try:
                self._run_step(item, step_state)
            except Cancelled:
                return self._interrupted(plan, item.spec.id)
            except KeyboardInterrupt:
                return self._interrupted(plan, item.spec.id)
            if step_state.status == st.FAILED:
                return self._failed(plan, step_state)
        self.state.status = st.SUCCEEDED
        self.state.save()
        self._audit("finished", outcome=st.SUCCEEDED, report=self._report())
        return self._finish_result(st.SUCCEEDED, plan)

    def _verify_only(self, item: PlannedStep, step_state: st.StepState) -> str:
        ctx = self._ctx(item.spec)
        step_plan = StepPlan.from_json(step_state.plan or {})
        try:
            problem = item.action.verify(ctx, step_plan, step_state.applied or {})
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
            reason = action.check(ctx)
            if reason:
                raise StepFailed(f"precondition: {reason}")
            step_plan = action.plan(ctx)
            step_state.plan = step_plan.to_json()
            if step_plan.nothing_to_do:
                step_state.status = st.SKIPPED
                step_state.applied = dict(step_plan.data)
                self.outputs[spec.id] = step_state.applied
                self._step_done(step_state, "nothing to do")
                return
            applied = self._apply(action, ctx, step_plan, step_state)
            step_state.applied = applied
            step_state.status = st.APPLIED
            self.outputs[spec.id] = applied
            self.state.save()
            problem = action.verify(ctx, step_plan, applied)
            if problem:
                raise StepFailed(f"verify: {problem}")
            step_state.status = st.VERIFIED
            self._step_done(step_state, "verified")
        except StepFailed as exc:
            self._step_failed(step_state, str(exc))
        except ClusterError as exc:
            self._step_failed(step_state, str(exc))
        except Cancelled:
            step_state.error = "interrupted"
            self.state.save()
            raise

    def _apply(
        self, action: Action, ctx: StepContext, step_plan: StepPlan, step_state: st.StepState
    ) -> dict[str, Any]:
        attempts = 1 + max(0, action.retries)
        for attempt in range(1, attempts + 1):
            step_state.attempts = attempt
            self.state.save()
            try:
                return action.apply(ctx, step_plan)
            except StepFailed as exc:
                if not exc.retryable or attempt == attempts or ctx.time_left() <= 0:
                    raise
                self._emit("output", step_state.id, f"retrying after: {exc}")
                ctx.sleep(min(2.0 * attempt, max(0.0, ctx.time_left())))
        raise StepFailed("no attempt left")  # pragma: no cover - the loop returns or raises

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
            self._undo_steps()
            if all(s.status != st.UNDO_FAILED for s in self.state.steps):
                self.state.status = st.RUN_UNDONE
            self.state.save()
        self._audit(
            "finished", outcome=self.state.status, error=self.state.error, report=self._report()
        )
        return self._finish_result(self.state.status, plan, error=self.state.error)

    def _interrupted(self, plan: Plan, step_id: str) -> RunResult:
        self.state.status = st.INTERRUPTED
        self.state.error = f"interrupted during step {step_id}"
        self.state.save()
        self._audit("finished", outcome=st.INTERRUPTED, step=step_id, report=self._report())
        result = self._finish_result(st.INTERRUPTED, plan, error=self.state.error)
        result.notices.append(
            f"nothing was undone; continue with `mignurse run --resume {self.run_id}` or "
            f"undo the completed steps with `mignurse run --undo {self.run_id}`"
        )
        return result

    def _report(self) -> list[str]:
        return RunResult(self.run_id, self.state.status, None, self.state.steps).report_lines()

    def _finish_result(self, status: str, plan: Plan | None, error: str = "") -> RunResult:
        result = RunResult(self.run_id, status, plan, self.state.steps, error=error)
        self._emit("finished", message=status, result=result)
        return result

    # -- undo -------------------------------------------------------------------------

    def _undo_steps(self) -> None:
        """Undo applied steps newest first; each result is recorded, none stops the rest."""
        for spec in reversed(self.book.steps):
            step_state = self.state.step(spec.id)
            if step_state.applied is None or step_state.status not in (
                st.APPLIED,
                st.VERIFIED,
                st.FAILED,
                st.UNDO_FAILED,
            ):
                continue
            action = spec.make()
            if not action.mutates:
                continue
            self._emit("undo-started", spec.id, f"undo {action.title.lower()}")
            if not action.can_undo:
                step_state.undo = "cannot be undone"
                if step_state.status != st.FAILED:
                    step_state.status = st.NOT_UNDOABLE
                self._emit("undo-finished", spec.id, step_state.undo, status=step_state.status)
                self._audit("undo", step=spec.id, result=step_state.undo)
                continue
            ctx = self._ctx(spec)
            ctx.cancel = threading.Event()  # undo runs even after a Ctrl-C stopped the run
            try:
                action.undo(ctx, StepPlan.from_json(step_state.plan or {}), step_state.applied)
            except (StepFailed, ClusterError, Cancelled) as exc:
                step_state.status = st.UNDO_FAILED
                step_state.undo = f"undo failed: {' '.join(str(exc).split())}"
            else:
                step_state.status = st.UNDONE
                step_state.undo = "undone"
            self.state.save()
            self._audit("undo", step=spec.id, result=step_state.undo)
            self._emit("undo-finished", spec.id, step_state.undo, status=step_state.status)

    def undo(self) -> RunResult:
        """`--undo RUN_ID`: undo the completed steps of a failed or interrupted run."""
        status = self.state.status
        if status == st.RUN_UNDONE:
            raise RunError(f"run {self.run_id} is already undone")
        if status == st.SUCCEEDED:
            raise RunError(
                f"run {self.run_id} succeeded; undo is for failed or interrupted runs "
                "(run the opposite runbook instead)"
            )
        if status == st.RUNNING and self.state.alive():
            raise RunError(f"run {self.run_id} is still running (pid {self.state.pid})")
        self._identity = AwsIdentity()
        undoable = [
            spec.make()
            for spec in self.book.steps
            if self.state.step(spec.id).applied is not None
            and self.state.step(spec.id).status
            in (st.APPLIED, st.VERIFIED, st.FAILED, st.UNDO_FAILED)
        ]
        harm = max((a.harm for a in undoable if a.mutates and a.can_undo), default=Harm.NONE)
        lines = [f"undo run {self.run_id} ({self.book.name} on {self.target}), newest first:"]
        lines += [f"  undo {a.title.lower()}" for a in reversed(undoable) if a.mutates]
        text = "\n".join(lines)
        self._emit("notice", message=text)
        if harm > Harm.NONE and not self.yes:
            if self.confirmer is None:
                raise RunError("undo changes the cluster: confirm it, or pass --yes")
            word = self.target if harm >= Harm.HIGH else "y"
            if not self.confirmer.confirm(harm, text, word):
                return RunResult(self.run_id, "declined", None, self.state.steps)
        lock = self._lock()
        if lock is not None:
            try:
                lock.acquire()
            except LockError as exc:
                return RunResult(self.run_id, "blocked", None, self.state.steps, error=str(exc))
        try:
            self.state.pid = os.getpid()
            self._audit("undo-started", runbook=self.book.name, target=self.target, who=self._who())
            self._undo_steps()
            failed = [s for s in self.state.steps if s.status == st.UNDO_FAILED]
            self.state.status = st.RUN_FAILED if failed else st.RUN_UNDONE
            self.state.save()
            self._audit("finished", outcome=self.state.status, report=self._report())
            error = f"undo of {failed[0].id} failed" if failed else ""
            return self._finish_result(self.state.status, None, error=error)
        finally:
            if lock is not None:
                lock.release()
