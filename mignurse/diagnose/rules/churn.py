"""`replacement-churn`: nodes of a pool replaced again and again for reasons other than repair.

Which NodeClaims ended and why is `mignurse.diagnose.replacements`; this rule groups those
not ended by repair (node-repair-loop's business) by NodePool and weighs their rate, causes
and lifetimes.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from mignurse.diagnose.findings import INFO, REPLACEMENT_CHURN, WARNING, Finding
from mignurse.diagnose.inputs import DiagnosisInput
from mignurse.diagnose.replacements import CAUSE_WORDS, Replacement, replacements
from mignurse.diagnose.wording import human_duration

# Churn thresholds: `replacement-churn`'s severity goes by rate (docs/commands.md's finding table).
MIN_REPLACEMENTS = 2  # one replacement is ordinary life; two in the window is a pattern
SHORT_LIFETIME = timedelta(minutes=30)  # a GPU node that lives less than this wastes its boot
REPEATED_REGISTRATION_FAILURES = 2  # NodePool NodeRegistrationHealthy flips on repeats
REPEATED_INTERRUPTIONS = 3
REPEATED_GONE = 2  # instances terminated outside Karpenter: no one of them is ordinary
HIGH_RATE_PER_HOUR = 4.0  # non-consolidation replacements per hour that deserve a look


def rule(inp: DiagnosisInput) -> list[Finding]:
    by_pool: dict[str, list[Replacement]] = {}
    for rep in replacements(inp):
        if rep.cause == "repair":
            continue  # node-repair-loop's business
        by_pool.setdefault(rep.pool, []).append(rep)
    findings = []
    for pool, reps in sorted(by_pool.items()):
        finding = _pool_finding(inp, pool, reps)
        if finding is not None:
            findings.append(finding)
    return findings


def _median(lifetimes: list[timedelta]) -> timedelta:
    import statistics  # only a pool that has churned loads it: most diagnoses have none

    return timedelta(seconds=statistics.median(lt.total_seconds() for lt in lifetimes))


def _pool_finding(inp: DiagnosisInput, pool: str, reps: list[Replacement]) -> Finding | None:
    causes = Counter(r.cause for r in reps)
    registration = causes.get("registration", 0)
    if len(reps) < MIN_REPLACEMENTS and registration < REPEATED_REGISTRATION_FAILURES:
        return None
    earliest = min((r.ended for r in reps if r.ended is not None), default=inp.now)
    span = max(inp.now - earliest, timedelta(hours=1))
    rate = len(reps) / (span.total_seconds() / 3600)
    lifetimes = [lt for r in reps if (lt := r.lifetime) is not None]
    median = _median(lifetimes) if lifetimes else None
    benign = causes.get("consolidation", 0) + causes.get("drift", 0)
    non_benign_rate = (len(reps) - benign) / (span.total_seconds() / 3600)
    reasons: list[str] = []
    if median is not None and len(lifetimes) >= MIN_REPLACEMENTS and median < SHORT_LIFETIME:
        reasons.append(f"median node lifetime {human_duration(median)} (< 30m)")
    if registration >= REPEATED_REGISTRATION_FAILURES:
        reasons.append(f"{registration} registration failures")
    if causes.get("interruption", 0) >= REPEATED_INTERRUPTIONS:
        reasons.append(f"{causes['interruption']} interruptions")
    if causes.get("instance-gone", 0) >= REPEATED_GONE:
        reasons.append(
            f"{causes['instance-gone']} instances gone outside Karpenter (spot reclaims no "
            "interruption queue reported, or something else terminates them)"
        )
    if non_benign_rate >= HIGH_RATE_PER_HOUR:
        reasons.append(f"{non_benign_rate:.1f} non-consolidation replacements/h")
    severity = WARNING if reasons else INFO
    dominant = causes.most_common(1)[0][0]
    mix = ", ".join(f"{n} {CAUSE_WORDS.get(c, c)}" for c, n in causes.most_common())
    summary = (
        f"NodePool {pool or '(none)'}: {len(reps)} nodes replaced in the last "
        f"{human_duration(span)} ({rate:.1f}/h), mostly {CAUSE_WORDS.get(dominant, dominant)} "
        f"({mix})"
        + (f"; median lifetime {human_duration(median)}" if median is not None else "")
        + (f"; {'; '.join(reasons)}" if reasons else "")
    )
    evidence = [e for r in reps for e in r.evidence]
    nodes = tuple(dict.fromkeys(r.node for r in reps if r.node))
    return Finding(
        id=REPLACEMENT_CHURN,
        severity=severity,
        nodepool=pool,
        nodes=nodes,
        summary=summary,
        evidence=tuple(dict.fromkeys(evidence)),
        runbooks=(),
    )
