"""Run every rule over one `DiagnosisInput`; a rule that fails never hides the others."""

from __future__ import annotations

import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field

from mignurse.diagnose.findings import CRITICAL, WARNING, Finding, Rule, sort_findings
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.rules import RULES
from mignurse.gcpause import paused_gc


@dataclass(frozen=True)
class Diagnosis:
    findings: list[Finding]
    rule_errors: list[str] = field(default_factory=list)  # "rule: what went wrong"

    @property
    def exit_code(self) -> int:
        """0 no findings (or info only), 1 warnings, 2 critical (README, `mignurse diagnose`)."""
        severities = {f.severity for f in self.findings}
        if CRITICAL in severities:
            return 2
        if WARNING in severities:
            return 1
        return 0


def all_rules() -> list[tuple[str, Rule]]:
    """Every shipped rule, in registration order (the order findings are raised in)."""
    return RULES


def diagnose(
    inp: DiagnosisInput,
    *,
    rules: Iterable[tuple[str, Rule]] | None = None,
    nodepool: str | None = None,
    node: str | None = None,
) -> Diagnosis:
    findings: list[Finding] = []
    errors: list[str] = []
    # Rules build many short-lived objects over 100,000 events: see mignurse/gcpause.py.
    with paused_gc():
        for name, rule in rules if rules is not None else all_rules():
            try:
                findings.extend(rule(inp))
            except Exception as exc:  # noqa: BLE001 - one broken rule must not hide the rest
                where = traceback.extract_tb(exc.__traceback__)[-1]
                errors.append(
                    f"{name}: {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
                )
    if nodepool is not None:
        findings = [f for f in findings if f.nodepool == nodepool]
    if node is not None:
        findings = [f for f in findings if node in f.nodes]
    return Diagnosis(sort_findings(findings), errors)
