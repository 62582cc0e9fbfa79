"""Run every rule over one `DiagnosisInput`; a rule that fails never hides the others.

`diagnose` returns the whole diagnosis. `diagnose_stream` yields each rule's result as the
rule finishes, the rules that raise critical findings first (repair loops, then repair
deadlines), so a face can show the worst while the rest still run.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from mignurse.diagnose.findings import (
    ACCELERATED_HARDWARE_NOT_READY,
    CRITICAL,
    MIG_CONFIG_FAILED,
    MIG_HOOK_KUBELET_RESTART,
    MIG_LAYOUT_MISMATCH,
    NODE_NOT_READY,
    NODE_REPAIR_LOOP,
    NOTREADY_LOOP,
    WARNING,
    Finding,
    Rule,
    sort_findings,
)
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules import RULES
from mignurse.gcpause import paused_gc

# The rules that can raise a critical finding, in the order a streaming diagnosis runs
# them: loops first (a node replaced again and again), then nodes a repair replaces soon,
# then MIG failures. Every other rule follows in registration order.
CRITICAL_FIRST = (
    NODE_REPAIR_LOOP,
    NOTREADY_LOOP,
    NODE_NOT_READY,
    ACCELERATED_HARDWARE_NOT_READY,
    MIG_HOOK_KUBELET_RESTART,
    MIG_CONFIG_FAILED,
    MIG_LAYOUT_MISMATCH,
)


@dataclass(frozen=True)
class Diagnosis:
    findings: list[Finding]
    rule_errors: list[str] = field(default_factory=list)  # "rule: what went wrong"

    @property
    def exit_code(self) -> int:
        """0 no findings (or info only), 1 warnings, 2 critical (docs/commands.md,
        `mignurse diagnose`)."""
        severities = {f.severity for f in self.findings}
        if CRITICAL in severities:
            return 2
        if WARNING in severities:
            return 1
        return 0


@dataclass(frozen=True)
class RuleResult:
    """One rule's part of a diagnosis, as the rule finished."""

    rule: str  # the finding id the rule raises
    findings: list[Finding]
    error: str = ""  # "rule: what went wrong"; the findings are then empty


def all_rules() -> list[tuple[str, Rule]]:
    """Every shipped rule, in registration order (the order findings are raised in)."""
    return RULES


def severity_order(rules: Iterable[tuple[str, Rule]]) -> list[tuple[str, Rule]]:
    """`rules` with those that raise critical findings first (CRITICAL_FIRST's order), the
    others after in their own order."""
    rank = {rule_id: i for i, rule_id in enumerate(CRITICAL_FIRST)}
    listed = list(rules)
    return sorted(listed, key=lambda named: rank.get(named[0], len(rank)))


def run_rule(name: str, rule: Rule, inp: DiagnosisInput) -> RuleResult:
    """One rule over `inp`; its exception becomes the result's error line."""
    try:
        return RuleResult(name, rule(inp))
    except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the rest
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return RuleResult(
            name, [], f"{name}: {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
        )


def diagnose_stream(
    inp: DiagnosisInput, *, rules: Iterable[tuple[str, Rule]] | None = None
) -> Iterator[RuleResult]:
    """Each rule's result as it finishes, critical rules first (`severity_order`)."""
    for name, rule in severity_order(rules if rules is not None else all_rules()):
        # Rules build many short-lived objects over 100,000 events: see mignurse/gcpause.py.
        with paused_gc():
            result = run_rule(name, rule, inp)
        yield result


def combine(results: Iterable[RuleResult]) -> Diagnosis:
    """The diagnosis these rule results make, worst first."""
    findings: list[Finding] = []
    errors: list[str] = []
    for result in results:
        findings.extend(result.findings)
        if result.error:
            errors.append(result.error)
    return Diagnosis(sort_findings(findings), errors)


def diagnose(
    inp: DiagnosisInput,
    *,
    rules: Iterable[tuple[str, Rule]] | None = None,
    nodepool: str | None = None,
    node: str | None = None,
) -> Diagnosis:
    # Rules build many short-lived objects over 100,000 events: see mignurse/gcpause.py.
    chosen = rules if rules is not None else all_rules()
    with paused_gc():
        whole = combine(run_rule(name, rule, inp) for name, rule in chosen)
    findings = whole.findings
    if nodepool is not None:
        findings = [f for f in findings if f.nodepool == nodepool]
    if node is not None:
        findings = [f for f in findings if node in f.nodes]
    return Diagnosis(findings, whole.rule_errors)
