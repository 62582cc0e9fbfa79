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
  again only where the step allows (`Action.retries`). A 401, 403, 404 or 409 fails at once.
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
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from mignurse.cluster.client import NODES, ClusterClient, ClusterError, NotFound
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.runner import state as st
from mignurse.runner.audit import (
    AWS_LOOKUP_SECONDS,
    Audit,
    AwsIdentity,
    local_holder,
    read_audit,
)
from mignurse.runner.lock import DEFAULT_TTL, LockError, TargetLock
from mignurse.runner.schema import Runbook, StepSpec, load_runbooks
from mignurse.runner.step import (
    Action,
    Cancelled,
    Harm,
    LockLost,
    StepContext,
    StepFailed,
    StepPlan,
    transient,
)

if TYPE_CHECKING:  # paramiko and boto3 load only when a node or AWS is reached
    from mignurse.collect.access import Access

READ_RETRY_SECONDS = 30.0  # how long check, plan and verify ride out API server blips


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


def aws_for(access: Access) -> Callable[[str], Any]:
    """`ctx.aws(service)`: boto3 clients from the session `access` resolves to (the user's
    --profile and --region), made when a step first asks; a step fails in one line when
    AWS cannot be reached as asked."""
    clients: dict[str, Any] = {}

    def make(service: str) -> Any:
        from mignurse.collect.access import AccessError, aws_client

        if service not in clients:
            try:
                clients[service] = aws_client(access, service, need_credentials=True)
            except AccessError as exc:
                raise StepFailed(str(exc)) from None
        return clients[service]

    return make


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
        self.prompting = False  # a confirmation is on screen: Ctrl-C answers it at once
        self.finishing = False  # recording the end and releasing the lock: let it finish
        self.confirmation = ""  # how the run was confirmed, for the audit
        self._lock_held: TargetLock | None = None
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
        """Ctrl-C or the app's cancel: nothing new is applied; a wait stops at once."""
        self.cancel_event.set()

    def _stop_if_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled("cancelled")

    def _cluster_name(self) -> str:
        return self.client.info.cluster or self.client.info.context

    def _emit(self, kind: str, step: str = "", message: str = "", **data: Any) -> None:
        self.listener(RunEvent(kind, step, message, data))

    def _ctx(self, spec: StepSpec, phase: str = "apply") -> StepContext:
        step_state = self.state.step(spec.id)
        planned = step_state.planned
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
            # undo's own writes must not add to what the step recorded as prior
            prior=step_state.prior if phase == "apply" else dict(step_state.prior),
            saved_plan=StepPlan.from_json(planned) if planned else None,
            guard=self._guard,
            journal=self._journal(step_state, phase),
        )

    def _guard(self) -> None:
        if self._lock_held is not None:
            self._lock_held.confirm()

    def _journal(
        self, step_state: st.StepState, phase: str
    ) -> Callable[[str, dict[str, Any]], None]:
        def write(event: str, fields: dict[str, Any]) -> None:
            if event != "intent":
                self._audit(event, step=step_state.id, **fields)
            elif phase == "apply":
                step_state.intents += 1
                self.state.save()  # the prior values are on disk before the change is sent
                self._audit("intent", step=step_state.id, **fields)
            else:
                self._audit("undo-intent", step=step_state.id, change=fields.get("change"))

        return write

    def _audit(self, event: str, **fields: Any) -> None:
        identity = self._identity
        if event == "finished" and identity is not None:
            identity.done.wait(AWS_LOOKUP_SECONDS)  # a fast run still records its AWS caller
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

    def _read(self, ctx: StepContext, step: str, call: Callable[[], Any]) -> Any:
        """Call a read-only phase, riding out failures that pass on their own."""
        delay, waited = 0.5, 0.0
        while True:
            try:
                return call()
            except (StepFailed, ClusterError) as exc:
                if not transient(exc) or waited >= READ_RETRY_SECONDS or ctx.time_left() <= delay:
                    raise
                self._emit("output", step, f"retrying after: {_one_line(exc)}")
                ctx.sleep(delay)
                waited += delay
                delay = min(delay * 2, 8.0)

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
                item.blocked = _one_line(exc)
            except Cancelled:
                item.blocked = "interrupted while planning"
        harm = max(
            (p.action.harm for p in planned if p.action.mutates and p.status not in st.DONE),
            default=Harm.NONE,
        )
        return Plan(self.book, self.target, planned, harm)

    def _confirm(self, plan: Plan) -> bool:
        if plan.harm == Harm.NONE:
            self.confirmation = self.confirmation or "not needed (no change)"
            return True
        if self.yes:
            self.confirmation = self.confirmation or "--yes"
            return True
        if self.confirmer is None:
            raise RunError("this runbook changes the cluster: confirm it, or pass --yes")
        word = self.target if plan.harm >= Harm.HIGH else "y"
        return self._ask(plan.harm, plan.text(), word)

    def _ask(self, harm: Harm, text: str, word: str) -> bool:
        assert self.confirmer is not None
        self.prompting = True
        try:
            answer = self.confirmer.confirm(harm, text, word)
        except KeyboardInterrupt:
            answer = False
        finally:
            self.prompting = False
        if answer and not self.cancel_event.is_set():
            self.confirmation = f"typed {word}" if harm >= Harm.HIGH else "answered y"
            return True
        return False

    def _declined(self, plan: Plan | None) -> RunResult:
        why = (
            "interrupted before the first change: nothing changed"
            if self.cancel_event.is_set()
            else ""
        )
        self._audit(
            "declined", runbook=self.book.name, target=self.target, who=self._who(), reason=why
        )
        return RunResult(self.run_id, "declined", plan, self.state.steps, error=why)

    # -- running ----------------------------------------------------------------------

    def run(self, *, dry_run: bool = False) -> RunResult:
        """Plan, show, confirm, then apply every step (a fresh run or a resume)."""
        resuming = any(s.status != st.PENDING or s.intents for s in self.state.steps)
        if resuming:
            self._check_resumable()
        self._identity = AwsIdentity(self.aws)
        plan = self.plan()
        self._emit("plan", message=plan.text(), plan=plan)
        if self.cancel_event.is_set():
            return self._declined(plan)  # Ctrl-C while planning: nothing changed
        if plan.blocked:
            first = plan.blocked[0]
            why = f"step {first.spec.id} cannot run: {first.blocked}"
            self._audit(
                "refused",
                runbook=self.book.name,
                target=self.target,
                reason=why,
                params=self.params,
                resume=resuming,
                who=self._who(),
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
        if not self._confirm(plan) or self.cancel_event.is_set():
            return self._declined(plan)
        for item in plan.steps:
            step_state = self.state.step(item.spec.id)
            if item.plan is not None and step_state.planned is None:
                step_state.planned = item.plan.to_json()
        previous = self.state.status
        self.state.status = st.RUNNING
        self.state.pid = os.getpid()
        self.state.host = st.this_host()
        self.state.save()  # before the lock: a lock always names a run that has a state
        lock = self._lock()
        notices: list[str] = []
        try:
            if lock is not None:
                notice = lock.acquire()
                if notice:
                    notices.append(notice)
                    self._emit("notice", message=notice)
        except LockError as exc:
            self._audit(
                "refused",
                runbook=self.book.name,
                target=self.target,
                reason=str(exc),
                resume=resuming,
                who=self._who(),
            )
            if resuming:
                self.state.status = previous
                self.state.save()
            else:
                self.state.delete()  # never started: nothing to resume or undo
            return RunResult(self.run_id, "blocked", plan, self.state.steps, error=str(exc))
        if lock is not None and lock.held:
            lock.start_renewing(
                lambda: self._emit("notice", message=lock.lost or "the lock was lost")
            )
        self._lock_held = lock
        try:
            self._audit(
                "resumed" if resuming else "started",
                runbook=self.book.name,
                target=self.target,
                context=self.client.info.context,
                cluster=self.client.info.cluster,
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
        return result

    def _lock_left(self, result: RunResult, left: str | None) -> None:
        if left:
            result.notices.append(left)
            self._audit("lock-left", target=self.target, detail=left)

    def _check_resumable(self) -> None:
        why = self._state_refusal(undo=False)
        if why:
            self._refused(why, resume=True)
            raise RunError(why)

    def _refused(self, why: str, **fields: Any) -> None:
        self._audit(
            "refused",
            runbook=self.book.name,
            target=self.target,
            reason=why,
            **fields,
            who=self._who(),
        )

    # -- what can follow a stopped run ------------------------------------------------

    def followups(self) -> dict[str, Followup]:
        """Whether `--resume` and `--undo` of this run can run now (see possible_followups)."""
        return {"resume": self._resume_followup(), "undo": self._undo_followup()}

    def _resume_followup(self) -> Followup:
        why = self._state_refusal(undo=False) or self._lock_refusal()
        if why:
            return Followup(False, why)
        plan = self.plan()
        if plan.blocked:
            first = plan.blocked[0]
            return Followup(False, f"step {first.spec.id} cannot run: {first.blocked}")
        left = [s.spec.id for s in plan.steps if s.status not in st.DONE]
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
            return Followup(False, _barrier_refusal(barrier, self._kept(barrier)))
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

    def _state_refusal(self, *, undo: bool) -> str:
        """Why the run's status alone rules out a resume (or an undo), or ""."""
        status = self.state.status
        if status == st.RUNNING and self.state.alive():
            return f"run {self.run_id} is still running (pid {self.state.pid} on {self.state.host})"
        if undo and status == st.RUN_UNDONE:
            return f"run {self.run_id} is already undone"
        if undo and status == st.SUCCEEDED:
            return (
                f"run {self.run_id} succeeded; undo is for failed or interrupted runs "
                "(run the opposite runbook instead)"
            )
        if status == st.SUCCEEDED:
            return f"run {self.run_id} already succeeded: nothing to resume"
        if status == st.RUN_UNDONE:
            return f"run {self.run_id} was undone: start a new run instead"
        return ""

    def _lock_refusal(self) -> str:
        """The live lock of another run on the target (who holds it), or ""."""
        lock = self._lock()
        return lock.refusal() if lock is not None else ""

    def _target_gone(self) -> str:
        """For undo: why the node has nothing left to put back (gone or being deleted), or ""."""
        if self.book.target != "node" or not self.target:
            return ""
        try:
            raw = self.client.get(NODES, self.target)
        except NotFound:
            return f"node {self.target} no longer exists: there is nothing on it to put back"
        except ClusterError as exc:
            return f"cannot read node {self.target} to undo on it: {_one_line(exc)}"
        if (raw.get("metadata") or {}).get("deletionTimestamp"):
            return f"node {self.target} is being deleted: there is nothing on it to put back"
        return ""

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
            applied = self._apply(action, ctx, step_plan, step_state)
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
        self, action: Action, ctx: StepContext, step_plan: StepPlan, step_state: st.StepState
    ) -> dict[str, Any]:
        attempts = 1 + max(0, action.retries)
        for attempt in range(1, attempts + 1):
            step_state.attempts = attempt
            self.state.save()
            try:
                return action.apply(ctx, step_plan)
            except (StepFailed, ClusterError) as exc:
                if not transient(exc) or attempt == attempts or ctx.time_left() <= 0:
                    raise
                self._emit("output", step_state.id, f"retrying after: {_one_line(exc)}")
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
        notices: list[str] = []
        if self.book.undo == "on-failure":
            try:
                items, barrier = self._undo_list()
                problems = self._undo_items(items)
            except (Cancelled, KeyboardInterrupt):
                problems, barrier = ["the undo was stopped by Ctrl-C"], ""
            except LockLost as exc:
                problems, barrier = [str(exc)], ""
            if barrier:
                problems.append(_barrier_refusal(barrier, self._kept(barrier)))
                notices.append(_kept_notice(self.run_id, barrier))
            if problems:
                self.state.error += "; undo incomplete: " + "; ".join(problems)
            else:
                self.state.status = st.RUN_UNDONE
        self.finishing = True
        self.state.save()
        self._audit(
            "finished", outcome=self.state.status, error=self.state.error, report=self._report()
        )
        result = self._finish_result(self.state.status, plan, error=self.state.error)
        result.notices += notices
        return result

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

    def _report(self) -> list[str]:
        return RunResult(self.run_id, self.state.status, None, self.state.steps).report_lines()

    def _finish_result(self, status: str, plan: Plan | None, error: str = "") -> RunResult:
        result = RunResult(self.run_id, status, plan, self.state.steps, error=error)
        self._emit("finished", message=status, result=result)
        return result

    # -- undo -------------------------------------------------------------------------

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
                    barrier = f"cannot tell what it left behind ({_one_line(exc)})"
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
                step_state.undo = f"undo failed: {_one_line(exc)}"
                problems.append(f"{spec.id}: {_one_line(exc)}")
            else:
                if left:
                    step_state.status = st.UNDO_FAILED
                    step_state.undo = f"not restored: {_one_line(left)}"
                    problems.append(f"{spec.id}: {_one_line(left)}")
                else:
                    step_state.status = st.UNDONE
                    step_state.undo = "undone"
            self.state.save()
            self._audit("undo", step=spec.id, result=step_state.undo, status=step_state.status)
            self._emit("undo-finished", spec.id, step_state.undo, status=step_state.status)
        return problems

    def undo(self) -> RunResult:
        """`--undo RUN_ID`: undo what a failed or interrupted run changed."""
        why = self._state_refusal(undo=True)
        if why:
            self._refused(why, undo=True)
            raise RunError(why)
        self._identity = AwsIdentity(self.aws)
        items, barrier = self._undo_list()
        undoable = [i for i in items if i.action.can_undo]
        if barrier and not undoable:
            why = _barrier_refusal(barrier, self._kept(barrier))
            self._refused(why, undo=True)
            result = self._finish_result("blocked", None, error=why)
            result.notices.append(_kept_notice(self.run_id, barrier))
            return result
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
                runbook=self.book.name,
                target=self.target,
                who=self._who(),
                confirmed=self.confirmation,
            )
            result = self._undo_run(items, barrier)
        finally:
            self.finishing = True
            self._lock_held = None
            left = lock.release() if lock is not None else None
        self._lock_left(result, left)
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
            problems.append(_barrier_refusal(barrier, self._kept(barrier)))
        self.state.status = st.RUN_FAILED if problems else st.RUN_UNDONE
        error = "undo incomplete: " + "; ".join(problems) if problems else ""
        if problems:
            self.state.error = error
        self.state.save()
        self._audit("finished", outcome=self.state.status, error=error, report=self._report())
        result = self._finish_result(self.state.status, None, error=error)
        if barrier:
            result.notices.append(_kept_notice(self.run_id, barrier))
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


def _barrier_refusal(barrier: str, kept: list[str]) -> str:
    step, _, why = barrier.partition(": ")
    return (
        f"cannot be undone past step {step}: {why}; the steps before it "
        f"({', '.join(kept)}) stay as they are, the safe state"
    )


def _kept_notice(run_id: str, barrier: str) -> str:
    step = barrier.split(":", 1)[0]
    return (
        f"undo stops at step {step}; `mignurse run --resume {run_id}` continues the run from "
        "where it stopped"
    )


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())
