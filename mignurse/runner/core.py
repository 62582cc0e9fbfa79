"""The state and plumbing one run carries, under the engine's plan, run and undo: the runbook,
its parameters and run state, the listener, the audit log and the lock; how a step is given
its `StepContext` (and how its announced changes reach the run state and the audit log
before they are made), read-only phases retried through API server blips, the
confirmation asked, and the refusals a stopped run's status or lock gives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Self

from mignurse.cluster.client import NODES, ClusterClient, ClusterError, NotFound
from mignurse.model import Node
from mignurse.nodeaccess.base import NodeShell
from mignurse.runner import state as st
from mignurse.runner.audit import AWS_LOOKUP_SECONDS, Audit, AwsIdentity, local_holder
from mignurse.runner.lock import DEFAULT_TTL, LOCK_ANNOTATION, TargetLock
from mignurse.runner.outcome import Listener, RunError, RunEvent, RunResult
from mignurse.runner.plan import Confirmer, Plan
from mignurse.runner.schema import Runbook, StepSpec, load_runbooks
from mignurse.runner.step import Cancelled, Harm, StepContext, StepFailed, StepPlan, transient
from mignurse.runner.steps.kube import cordon_run
from mignurse.runner.steps.repair.deployment import karpenter_pause_record

READ_RETRY_SECONDS = 30.0  # how long check, plan and verify ride out API server blips


class RunCore:
    """What one run of a runbook on one target carries, and how its steps are given a
    context, read with retries and recorded. `engine.Runner` builds on it."""

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
    ) -> Self:
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

    def _names(self) -> dict[str, Any]:
        """What names the run on each line that opens or closes its record (started, declined,
        refused, a dry run): a run that never started has no other line to say them."""
        return {
            "runbook": self.book.name,
            "context": self.client.info.context,
            "cluster": self.client.info.cluster,
            "target": self.target,
        }

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
                self._emit("output", step, f"retrying after: {one_line(exc)}")
                ctx.sleep(delay)
                waited += delay
                delay = min(delay * 2, 8.0)

    # -- confirming ---------------------------------------------------------------

    def _ask(self, harm: Harm, text: str, word: str) -> bool:
        assert self.confirmer is not None
        self.prompting = True
        try:
            answer = self.confirmer.confirm(harm, text, word)
        except KeyboardInterrupt:
            # Ctrl-C answers the prompt: no. The stop signal's own cancel comes from another
            # thread (mignurse/cli/signalwake.py) and may not have landed yet.
            self.cancel()
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
        self._audit("declined", **self._names(), who=self._who(), reason=why)
        return RunResult(self.run_id, "declined", plan, self.state.steps, error=why)

    # -- refusals and the lock -------------------------------------------------------

    def _refused(self, why: str, **fields: Any) -> None:
        self._audit("refused", **self._names(), reason=why, **fields, who=self._who())

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
            return f"cannot read node {self.target} to undo on it: {one_line(exc)}"
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

    def _lock_left(self, result: RunResult, left: str | None) -> None:
        if left:
            result.notices.append(left)
            self._audit("lock-left", target=self.target, detail=left)

    # -- the end -------------------------------------------------------------------

    def standing(self) -> str:
        """Where the target stands now, read back from the cluster: one line for the report,
        so what it says of the target is what the cluster shows, not what the steps meant."""
        if self.book.target != "node":
            record = karpenter_pause_record(self.client)
            if not record:
                return ""
            who = "this run" if record.get("run") == self.run_id else f"run {record.get('run')}"
            return f"now: node repair is paused by {who} since {record.get('at') or '?'}"
        try:
            raw = self.client.get(NODES, self.target)
        except NotFound:
            return f"now: node {self.target} no longer exists"
        except ClusterError as exc:
            return f"now: node {self.target} cannot be read ({one_line(exc)})"
        node = Node.from_api(raw)
        parts = [node.ready_status]
        if node.deleting is not None:
            parts.append(f"being deleted since {node.deleting:%H:%M:%SZ}")
        if node.unschedulable:
            owner = cordon_run(raw)
            by = " by this run" if owner == self.run_id else f" by run {owner}" if owner else ""
            parts.append(f"cordoned{by}")
        else:
            parts.append("schedulable")
        lock = (raw.get("metadata") or {}).get("annotations", {}).get(LOCK_ANNOTATION)
        if lock:
            holder = "this run" if f'"run":"{self.run_id}"' in str(lock) else "another run"
            parts.append(f"locked by {holder}")
        return f"now: node {self.target} is " + ", ".join(parts)

    def _report(self) -> list[str]:
        return RunResult(self.run_id, self.state.status, None, self.state.steps).report_lines()

    def _finish_result(self, status: str, plan: Plan | None, error: str = "") -> RunResult:
        result = RunResult(self.run_id, status, plan, self.state.steps, error=error)
        self._emit("finished", message=status, result=result)
        return result


def one_line(exc: object) -> str:
    return " ".join(str(exc).split())
