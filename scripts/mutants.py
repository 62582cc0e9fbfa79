"""Mutation testing over a package of mignurse (runner/ unless told): plant one plausible bug
at a time and see whether the package's tests notice.

    make mutants                                  # or, with the venv built:
    nice -n 10 .venv/bin/python scripts/mutants.py [--module lock.py] [--jobs 2]
    make mutants PACKAGE=diagnose MUTANTS="--module rules/repair_loop.py --jobs 1"
    nice -n 10 .venv/bin/python scripts/mutants.py --package mignurse/diagnose [--module …]
    .venv/bin/python scripts/mutants.py --list    # the mutants, without running anything
    .venv/bin/python scripts/mutants.py --again   # only the last run's survivors and timeouts

The mutations are the slips a reviewer misses: a comparison flipped (`==` / `!=`, `in` /
`not in`, `is` / `is not`) or its boundary moved (`<` / `<=`), a `not` dropped, `and` / `or`
swapped, one condition of an `if` dropped, an integer moved by one, `True` / `False` swapped
(defaults and keyword arguments included), `+` / `-` swapped, a call statement deleted (a
`ctx.intend`, a `save()`, a patch), and an early exit deleted (a `return`, `raise`,
`continue` or `break` under an `if`: a UID or resourceVersion check that no longer stops
anything). Strings, f-strings, docstrings, annotations and log lines are left alone.

How a mutant is judged. First, once, the package's tests (for runner/: tests/runner/ and the
runbook fault checks of tests/hostile/; for diagnose/: tests/diagnose/ and the few quick files
elsewhere that reach it; PACKAGES below) run under coverage.py with one context per test: that
maps each line of the package to the tests that execute it, and each module to the tests
that reach it (a line that runs at import, a constant or a default, is judged by those). Each
mutant is then written into a copy of the checkout (.venv/mutants/wN; `--jobs` copies, one
mutant each at a time) and only its tests run there, fastest first, with `-x` and a
per-mutant timeout: a failure kills it; all passing, it survived; over the time limit, it
timed out. Processes the tests start (`python -m mignurse`) import the same copy, so they
carry the mutant too.

Mutants that cannot change behaviour (equivalent) are listed with the reason in
scripts/mutants-equivalent.txt, by file, function and mutation (not by line, so they hold
when code moves); listed ones are not run and not counted. The report gives killed /
survived / timed out per module, the kill rate over the mutants judged, and each survivor as
file:line, function, mutation. Each package keeps its own coverage map, results and report
under .venv/mutants/<package>/ (results.json, report.txt); the copies of the checkout
(.venv/mutants/wN) serve every package.
"""

from __future__ import annotations

import argparse
import ast
import compileall
import contextlib
import hashlib
import json
import os
import py_compile
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".venv" / "mutants"
EQUIVALENT = ROOT / "scripts" / "mutants-equivalent.txt"
CANNOT_PATCH = 99  # the test runner's answer for a mutant it cannot put in place
PLUGIN = "mutants_plugin"  # scripts/mutants_plugin.py: one coverage context per test

# runner/ -------------------------------------------------------------------------------
RUNNER_TESTS = [
    "tests/runner",
    "tests/hostile/runbook_faults_test.py",
    "tests/hostile/test_inputs_runbooks.py",
]

# Judged first (a run cut short has judged these): the lock, the steps that change clusters,
# then the engine.
RUNNER_FIRST = ("lock.py", "steps/repair/", "steps/instance.py", "steps/kube.py", "undo.py",
         "state.py", "core.py", "engine.py", "audit.py", "step.py")  # fmt: skip

# Each module's own tests, named after the incidents they stand for: every one of them that
# reaches a mutated line runs, whatever --cap says.
RUNNER_OWN: dict[str, list[str]] = {
    "lock.py": ["tests/runner/test_lock_takeover.py", "tests/runner/test_lock_reads.py"],
    "state.py": ["tests/runner/test_run_state_after_a_crash.py"],
    "audit.py": ["tests/runner/test_audit_log_after_a_crash.py"],
    "steps/kube.py": [
        "tests/runner/test_cordon_ownership.py",
        "tests/runner/test_drain_leaves_alone.py",
        "tests/runner/test_kube_steps.py",
        "tests/runner/test_drain_to_the_end.py",
        "tests/runner/test_cordon_after_a_stop.py",
        "tests/runner/test_step_retries.py",
    ],
    "steps/instance.py": [
        "tests/runner/test_nodeclaim_recreated.py",
        "tests/runner/test_asg_instance_gone.py",
        "tests/runner/test_instance_steps.py",
        "tests/runner/test_replace_instance_cases.py",
        "tests/runner/test_replacement_wait.py",
    ],
    "steps/repair/__init__.py": [
        "tests/runner/test_repair_who_repairs.py",
        "tests/runner/test_nodegroup_repair_undo.py",
        "tests/runner/test_step_retries.py",
        "tests/runner/test_karpenter_resume_stops.py",
    ],
    "steps/repair/backend.py": [
        "tests/runner/test_repair_who_repairs.py",
        "tests/runner/test_nodegroup_repair_settles.py",
    ],
    "steps/repair/gates.py": ["tests/runner/test_repair_flag_over_env.py"],
    "steps/repair/deployment.py": [
        "tests/runner/test_repair_rollout.py",
        "tests/runner/test_karpenter_pause_record.py",
        "tests/runner/test_karpenter_resume_stops.py",
    ],
    "steps/repair/hazard.py": ["tests/runner/test_resume_hazard.py"],
    "steps/repair/karpenter.py": [
        "tests/runner/test_karpenter_pause_record.py",
        "tests/runner/test_repair_flag_over_env.py",
        "tests/runner/test_karpenter_resume_stops.py",
    ],
    "steps/repair/nodegroup.py": [
        "tests/runner/test_nodegroup_repair_undo.py",
        "tests/runner/test_repair_steps.py",
        "tests/runner/test_nodegroup_repair_settles.py",
    ],
    "schema.py": [
        "tests/runner/test_runbook_params.py",
        "tests/runner/test_schema.py",
        "tests/hostile/test_inputs_runbooks.py",
        "tests/runner/test_runbook_files.py",
    ],
    "step.py": [
        "tests/runner/test_step_contract.py",
        "tests/runner/test_what_a_run_reports.py",
    ],
    "undo.py": [
        "tests/runner/test_undo_left_incomplete.py",
        "tests/runner/test_undo_walks_back.py",
        "tests/runner/test_undo_records_as_it_goes.py",
    ],
    "core.py": [
        "tests/runner/test_resume_refusals.py",
        "tests/runner/test_run_from_plan_to_end.py",
    ],
    "engine.py": [
        "tests/runner/test_run_records_each_step.py",
        "tests/runner/test_run_from_plan_to_end.py",
        "tests/runner/test_undo_records_as_it_goes.py",
    ],
    "outcome.py": ["tests/runner/test_what_a_run_reports.py"],
    "plan.py": ["tests/runner/test_what_a_run_reports.py"],
    "wiring.py": ["tests/runner/test_how_a_run_reaches_nodes_and_aws.py"],
    "steps/mig/target.py": ["tests/runner/test_mig_target_refusals.py"],
    "steps/mig/layout.py": ["tests/runner/test_mig_node_side.py"],
    "steps/mig/nodecmd.py": ["tests/runner/test_mig_node_side.py"],
    "steps/mig/preflight.py": [
        "tests/runner/test_mig_node_side.py",
        "tests/runner/test_mig_target_refusals.py",
    ],
    "steps/mig/labels.py": ["tests/runner/test_mig_label_steps.py"],
    "steps/mig/resume.py": ["tests/runner/test_mig_label_steps.py"],
    "leftovers.py": ["tests/runner/test_leftovers.py", "tests/runner/test_leftovers_marks.py"],
    "steps/settle.py": [
        "tests/runner/test_settle_window.py",
        "tests/runner/test_settle_reads.py",
        "tests/runner/test_replacement.py",
    ],
    "steps/forecast.py": [
        "tests/runner/test_replacement.py",
        "tests/runner/test_forecast_cases.py",
    ],
    "steps/awserror.py": ["tests/runner/test_aws_refusals.py"],
    "steps/__init__.py": ["tests/runner/test_actions_of_a_fresh_process.py"],
    "steps/collect.py": [
        "tests/runner/test_collect_bundle_step.py",
        "tests/runner/test_collect_bundle_once.py",
    ],
}

# diagnose/ -----------------------------------------------------------------------------
# tests/diagnose/ takes seconds; the other files here reach diagnose/ in a few seconds each
# (the forecast reads outlook.py, the hostile bundles go through inputs.py and sources/, the
# GPU identity corpus through mig_layout.py, the app's panels through findings.py, hostile
# archives through sources/files.py and foreign_bundles.py).
DIAGNOSE_TESTS = [
    "tests/diagnose",
    "tests/runner/test_forecast_cases.py",
    "tests/hostile/test_inputs_bundles.py",
    "tests/test_dra_cluster.py",
    "tests/gpu/test_identity_corpus.py",
    "tests/tui/test_panels.py",
    "tests/hostile/test_archives.py",
]

# The rules first, then what they stand on.
DIAGNOSE_FIRST = ("rules/", "replacements.py", "timeline.py", "events.py", "facts.py", "mng")

# The modules whose tables and helpers every rule reads: a mutant there reaches nearly every
# test, so the tests written for the module itself run first.
DIAGNOSE_OWN: dict[str, list[str]] = {
    "facts.py": ["tests/diagnose/test_facts_of_the_field.py"],
    "inputs.py": ["tests/diagnose/test_karpenter_settings.py"],
    "findings.py": ["tests/diagnose/test_karpenter_settings.py"],
    "engine.py": ["tests/diagnose/test_engine_and_wording.py"],
    "rules/__init__.py": ["tests/diagnose/test_engine_and_wording.py"],
    "wording.py": ["tests/diagnose/test_engine_and_wording.py"],
    "rules/mig_layout.py": ["tests/diagnose/test_layout_sources.py"],
    "rules/churn.py": ["tests/diagnose/test_churn_weighing.py"],
    "rules/hardware.py": ["tests/diagnose/test_hardware_advice.py"],
    "rules/mig_hook.py": ["tests/diagnose/test_mig_hook_edges.py"],
    "rules/mig_config.py": ["tests/diagnose/test_mig_config_states.py"],
    "rules/repair_risk.py": ["tests/diagnose/test_repair_risk_traps.py"],
    "rules/repair_blocked.py": ["tests/diagnose/test_repair_guard_held.py"],
    "rules/preflight.py": ["tests/diagnose/test_preflight_neighbours.py"],
    "rules/not_ready.py": ["tests/diagnose/test_repair_outlook.py"],
    "outlook.py": ["tests/diagnose/test_repair_outlook.py"],
    "replacements.py": [
        "tests/diagnose/test_gone_nodeclaims.py",
        "tests/diagnose/test_replacement_sources.py",
    ],
    "agent_reasons.py": ["tests/diagnose/test_agent_reasons.py"],
    "daemonsets.py": ["tests/diagnose/test_preflight_rules.py"],
    "mng.py": ["tests/diagnose/test_node_group_repair_settings.py"],
    "mng_repairs.py": ["tests/diagnose/test_node_group_repairs_read.py"],
}

# The boundary tests pin every window, threshold and pairing: they run for every mutant of
# diagnose/, mapped or not (a file written since the map runs whole).
DIAGNOSE_ALWAYS = ["tests/diagnose/test_rule_boundaries.py"]


@dataclass(frozen=True)
class Package:
    path: str  # mignurse/<name>
    tests: list[str]
    first: tuple[str, ...]
    own: dict[str, list[str]]
    always: list[str]
    cap: float  # --cap's default: seconds of a mutant's tests to run at most

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def work(self) -> Path:
        """Its coverage map, results and report."""
        return WORK / self.name

    def own_tests(self, module: str) -> list[str]:
        return [*self.own.get(module, []), *self.always]


PACKAGES = {
    p.path: p
    for p in (
        Package("mignurse/runner", RUNNER_TESTS, RUNNER_FIRST, RUNNER_OWN, [], cap=4.0),
        # diagnose/'s tests take 30 s all together: every one that reaches a line runs
        Package(
            "mignurse/diagnose",
            DIAGNOSE_TESTS,
            DIAGNOSE_FIRST,
            DIAGNOSE_OWN,
            DIAGNOSE_ALWAYS,
            cap=30.0,
        ),
    )
}

# Calls whose deletion changes only what is printed: never mutated away.
QUIET_CALLS = {"log", "debug", "info", "warning", "print"}

# `value or dict()`-style defaults: their `or` is not a decision, and is not swapped.
DEFAULTS = {"dict", "list", "tuple", "set", "str", "frozenset"}

COMPARE_SWAP: dict[type[ast.cmpop], str] = {
    ast.Lt: "<=",
    ast.LtE: "<",
    ast.Gt: ">=",
    ast.GtE: ">",
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.In: "not in",
    ast.NotIn: "in",
    ast.Is: "is not",
    ast.IsNot: "is",
}
COMPARE_TEXT: dict[type[ast.cmpop], str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
}


@dataclass(frozen=True)
class Mutant:
    path: str  # relative to the checkout
    line: int
    function: str  # qualified name of the enclosing def/class, "<module>" at the top
    kind: str  # "compare", "not", "boolop", "drop-condition", "number", "bool", ...
    before: str  # the source replaced (one line, shortened)
    after: str
    start: int  # character offsets of the replaced text in the file
    end: int
    text: str  # what replaces it (as many lines as it replaces: later lines keep their numbers)
    outer: str = ""  # co_qualname of the outermost function holding it ("" at import time)
    outer_line: int = 0  # that function's co_firstlineno (its first decorator's line)
    occurrence: int = 1  # the same mutation of the same text earlier in the same function

    @property
    def key(self) -> str:
        """How the exclusion file names it: file, function and mutation, not the line."""
        again = f" #{self.occurrence}" if self.occurrence > 1 else ""
        return f"{self.path} | {self.function} | `{self.before}` -> `{self.after}`{again}"

    @property
    def module(self) -> str:
        return self.path.split("/", 2)[-1]  # mignurse/<package>/<module>

    def describe(self) -> str:
        return f"{self.path}:{self.line} {self.function}: `{self.before}` -> `{self.after}`"


def _short(text: str, limit: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


class _Finder(ast.NodeVisitor):
    """Every mutant of one module, in source order."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        lines = source.splitlines(keepends=True)
        # ast's columns are UTF-8 byte offsets: map (line, byte column) to a str offset
        self._line_starts: list[int] = [0]
        for line in lines:
            self._line_starts.append(self._line_starts[-1] + len(line))
        self._lines = lines
        self.found: list[Mutant] = []
        self._scope: list[str] = []
        self._outer: tuple[str, int] | None = None  # set inside a function's body
        self._tests: set[int] = set()  # id() of expressions used as a condition

    # -- positions

    def _offset(self, line: int, byte_col: int) -> int:
        text = self._lines[line - 1].encode()[:byte_col].decode()
        return self._line_starts[line - 1] + len(text)

    def _span(self, node: ast.AST) -> tuple[int, int]:
        start = self._offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self._offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def _src(self, node: ast.AST) -> str:
        start, end = self._span(node)
        return self.source[start:end]

    def _add(self, node: ast.AST, kind: str, text: str, after: str | None = None) -> None:
        start, end = self._span(node)
        missing = self.source[start:end].count("\n") - text.count("\n")
        if missing > 0:
            text = text[:-1] + "\n" * missing + ")" if text.endswith(")") else text + "\n" * missing
        outer, outer_line = self._outer or ("", 0)
        self.found.append(
            Mutant(
                path=self.path,
                line=node.lineno,  # type: ignore[attr-defined]
                function=".".join(self._scope) or "<module>",
                kind=kind,
                before=_short(self.source[start:end]),
                after=_short(after if after is not None else text),
                start=start,
                end=end,
                text=text,
                outer=outer,
                outer_line=outer_line,
            )
        )

    def visit(self, node: ast.AST) -> None:
        handler = getattr(self, "on_" + type(node).__name__, None)
        if handler is None:
            self.generic_visit(node)
        else:
            handler(node)

    # -- scopes and what is never mutated

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._scope.append(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        if not isinstance(node, ast.ClassDef):
            self._arguments(node.args)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        entered = self._outer is None and not isinstance(node, ast.ClassDef)
        if entered:
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            self._outer = (".".join(self._scope), first)
        self._body(body)
        if entered:
            self._outer = None
        self._scope.pop()

    on_FunctionDef = _scoped
    on_AsyncFunctionDef = _scoped
    on_ClassDef = _scoped

    def _arguments(self, args: ast.arguments) -> None:
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default)

    def on_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def on_JoinedStr(self, node: ast.JoinedStr) -> None:
        return  # messages

    def on_If(self, node: ast.If) -> None:
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self._tests.add(id(node.test))
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def on_While(self, node: ast.While) -> None:
        self._tests.add(id(node.test))
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def on_IfExp(self, node: ast.IfExp) -> None:
        self._tests.add(id(node.test))
        self.generic_visit(node)

    def on_Assert(self, node: ast.Assert) -> None:
        return  # a developer's check, not behaviour

    def on_Module(self, node: ast.Module) -> None:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        self._body(body)

    # -- statements: deleting a call, deleting an early exit

    def _body(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.visit(stmt)

    def on_Expr(self, node: ast.Expr) -> None:
        call = node.value
        if isinstance(call, ast.Call) and _call_name(call) not in QUIET_CALLS:
            self._add(node, "delete-call", "pass")
        self.visit(call)

    def _exit(self, node: ast.Return | ast.Raise | ast.Continue | ast.Break) -> None:
        if self._under_if(node):
            self._add(node, "delete-exit", "pass")

    def on_Return(self, node: ast.Return) -> None:
        self._exit(node)
        if node.value is not None:
            self.visit(node.value)

    def on_Raise(self, node: ast.Raise) -> None:
        self._exit(node)  # the exception's own arguments are messages: left alone

    def on_Continue(self, node: ast.Continue) -> None:
        self._exit(node)

    def on_Break(self, node: ast.Break) -> None:
        self._exit(node)

    def _under_if(self, node: ast.stmt) -> bool:
        return node.lineno in self._if_body_lines

    @property
    def _if_body_lines(self) -> set[int]:
        if not hasattr(self, "_if_lines"):
            lines: set[int] = set()
            for each in ast.walk(ast.parse(self.source)):
                if isinstance(each, ast.If):
                    for stmt in [*each.body, *each.orelse]:
                        if isinstance(stmt, ast.Return | ast.Raise | ast.Continue | ast.Break):
                            lines.add(stmt.lineno)
            self._if_lines = lines
        return self._if_lines

    # -- expressions

    def on_Compare(self, node: ast.Compare) -> None:
        parts = [self._src(node.left)]
        for op, right in zip(node.ops, node.comparators, strict=True):
            parts += [COMPARE_TEXT[type(op)], self._src(right)]
        for i, op in enumerate(node.ops):
            swapped = list(parts)
            swapped[1 + 2 * i] = COMPARE_SWAP[type(op)]
            self._add(node, "compare", "(" + " ".join(swapped) + ")", " ".join(swapped))
        self.generic_visit(node)

    def on_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            operand = self._src(node.operand)
            self._add(node, "drop-not", f"({operand})", operand)
            if id(node) in self._tests:
                self._tests.add(id(node.operand))
        self.generic_visit(node)

    def on_BoolOp(self, node: ast.BoolOp) -> None:
        values = [self._src(v) for v in node.values]
        other = " or " if isinstance(node.op, ast.And) else " and "
        swapped = other.join(f"({v})" for v in values)
        last = node.values[-1]
        defaulting = isinstance(node.op, ast.Or) and (
            isinstance(last, ast.Constant | ast.Dict | ast.List | ast.Tuple | ast.JoinedStr)
            or (isinstance(last, ast.Call) and _call_name(last) in DEFAULTS)
        )
        if not defaulting:  # `x or {}` / `x or ""`: a default, not a decision
            self._add(node, "boolop", f"({swapped})", other.join(values))
        if id(node) in self._tests:  # a condition: each part may be forgotten
            for i in range(len(values)):
                kept = values[:i] + values[i + 1 :]
                joined = (" and " if isinstance(node.op, ast.And) else " or ").join(
                    f"({v})" for v in kept
                )
                self._add(node, "drop-condition", f"({joined})", f"without `{values[i]}`")
            for value in node.values:
                self._tests.add(id(value))
        self.generic_visit(node)

    def on_BinOp(self, node: ast.BinOp) -> None:
        strings = (ast.JoinedStr,)
        sides = (node.left, node.right)
        textual = any(
            isinstance(s, strings) or (isinstance(s, ast.Constant) and isinstance(s.value, str))
            for s in sides
        )
        if isinstance(node.op, ast.Add | ast.Sub) and not textual:
            op = " - " if isinstance(node.op, ast.Add) else " + "
            text = f"({self._src(node.left)}){op}({self._src(node.right)})"
            self._add(node, "arith", f"({text})", text)
        self.generic_visit(node)

    def on_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool):
            self._add(node, "bool", str(not value))
        elif isinstance(value, int):
            self._add(node, "number", str(value + 1))

    def on_Call(self, node: ast.Call) -> None:
        if _call_name(node) in QUIET_CALLS:
            return
        self.generic_visit(node)


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def find_mutants(path: Path) -> list[Mutant]:
    source = path.read_text()
    finder = _Finder(str(path.relative_to(ROOT)), source)
    finder.visit(ast.parse(source))
    seen: dict[str, int] = defaultdict(int)
    numbered = []
    for mutant in sorted(finder.found, key=lambda m: (m.start, m.kind, m.after)):
        seen[mutant.key] += 1
        numbered.append(replace(mutant, occurrence=seen[mutant.key]))
    return numbered


def all_mutants(package: Package, modules: list[str]) -> list[Mutant]:
    found: list[Mutant] = []
    for path in sorted((ROOT / package.path).rglob("*.py")):
        rel = str(path.relative_to(ROOT / package.path))
        if modules and not any(rel == m or rel.startswith(m.rstrip("/") + "/") for m in modules):
            continue
        for mutant in find_mutants(path):
            mutated = mutant_source(mutant)
            try:
                ast.parse(mutated)
            except SyntaxError:
                continue
            found.append(mutant)
    return found


def mutant_source(mutant: Mutant) -> str:
    source = (ROOT / mutant.path).read_text()
    return source[: mutant.start] + mutant.text + source[mutant.end :]


def read_equivalent() -> dict[str, str]:
    """The exclusion file: `KEY || why it cannot change behaviour`, one a line."""
    listed: dict[str, str] = {}
    if not EQUIVALENT.exists():
        return listed
    for line in EQUIVALENT.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, sep, why = line.partition(" || ")
        if not sep or not why.strip():
            raise SystemExit(f"{EQUIVALENT.name}: a line without ` || reason`: {line}")
        listed[key.strip()] = why.strip()
    return listed


# -- the coverage map ---------------------------------------------------------------------


def _checkout_files() -> Iterator[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for name in out.splitlines():
        if name.startswith(("screenshots/", "benchmarks/")) or not (ROOT / name).is_file():
            continue
        yield name


def make_copy(dest: Path) -> None:
    """A copy of the checkout the mutants are written into; bytecode checked by source hash,
    so a mutated file is never run from the original's .pyc, nor the original from the
    mutant's."""
    if dest.exists():
        shutil.rmtree(dest)
    for name in _checkout_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    compileall.compile_dir(
        str(dest / "mignurse"),
        quiet=1,
        invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
    )


def _env(copy: Path, package: Package) -> dict[str, str]:
    env = dict(os.environ)
    env["MUTANTS_PACKAGE"] = package.path  # what scripts/mutants_server.py imports first
    env["PYTHONPATH"] = os.pathsep.join([str(copy), str(ROOT / "scripts")])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["MUTANTS_DURATIONS"] = str(copy / ".mutant-outcome.json")
    return env


def build_map(package: Package, jobs: int, only: list[str] | None = None) -> dict[str, object]:
    """Run the package's tests once under coverage, a context per test: which tests execute
    which line of the package, and how long each test takes. `only`: these test files again,
    their part of the existing map replaced (a test file written or changed since)."""
    work = package.work
    work.mkdir(parents=True, exist_ok=True)
    files = only or sorted(
        str(p.relative_to(ROOT))
        for t in package.tests
        for p in ([ROOT / t] if t.endswith(".py") else sorted((ROOT / t).glob("test_*.py")))
    )
    jobs = min(jobs, len(files))
    # the files are dealt to the jobs in turn
    shares = [files[i::jobs] for i in range(jobs)]
    procs = []
    for i, share in enumerate(shares):
        copy = WORK / f"cover{i}"
        make_copy(copy)
        rc = work / f"coveragerc{i}"
        rc.write_text(
            f"[run]\nsource = {copy / package.path}\ndata_file = {work / f'coverage{i}'}\n"
            "branch = false\n"
        )
        log = open(work / f"cover{i}.log", "w")  # noqa: SIM115 (closed after the wait)
        env = _env(copy, package)
        env["MUTANTS_DURATIONS"] = str(work / f"durations{i}.json")
        cmd = [
            sys.executable,
            "-m",
            "coverage",
            "run",
            f"--rcfile={rc}",
            "-m",
            "pytest",
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",
            "-q",
            *share,
        ]
        procs.append((subprocess.Popen(cmd, cwd=copy, env=env, stdout=log, stderr=log), log))
    for proc, log in procs:
        proc.wait()
        log.close()
    lines: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    durations: dict[str, float] = {}
    failed: list[str] = []
    import coverage

    for i in range(jobs):
        durations.update(json.loads((work / f"durations{i}.json").read_text())["durations"])
        failed += json.loads((work / f"durations{i}.json").read_text())["failed"]
        data = coverage.CoverageData(basename=str(work / f"coverage{i}"))
        data.read()
        copy = WORK / f"cover{i}"
        for measured in data.measured_files():
            rel = str(Path(measured).relative_to(copy))
            for line, contexts in (data.contexts_by_lineno(measured) or {}).items():
                for context in contexts:
                    lines[rel][line].add(context)
    if failed:
        print(f"warning: {len(failed)} test(s) fail without any mutant: {', '.join(failed)}")
    if only and (work / "map.json").exists():
        old = json.loads((work / "map.json").read_text())
        again = tuple(only)

        def kept(tests: list[str]) -> set[str]:
            return {t for t in tests if not t.startswith(again)}

        for path, by_line in old["lines"].items():
            for number, tests in by_line.items():
                lines[path][int(number)] |= kept(tests)
        durations = {**{t: d for t, d in old["durations"].items() if t in kept([t])}, **durations}
        failed = sorted(kept(old["failed"]) | set(failed))
    mapping = {
        "lines": {f: {str(n): sorted(c) for n, c in ls.items()} for f, ls in lines.items()},
        "durations": durations,
        "failed": failed,
    }
    (work / "map.json").write_text(json.dumps(mapping))
    return mapping


# -- running the mutants ------------------------------------------------------------------


@dataclass
class Result:
    key: str
    describe: str
    module: str
    status: str  # killed | survived | timeout | no-tests
    tests: int
    seconds: float
    killer: str = ""
    source: str = ""  # sha256 of the module the mutant was judged in


def module_hash(path: str) -> str:
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()


def tests_for(mutant: Mutant, mapping: dict[str, object]) -> list[str]:
    lines: dict[str, dict[str, list[str]]] = mapping["lines"]  # type: ignore[assignment]
    durations: dict[str, float] = mapping["durations"]  # type: ignore[assignment]
    failed = set(mapping["failed"])  # type: ignore[arg-type]
    in_file = lines.get(mutant.path, {})
    chosen = {t for t in in_file.get(str(mutant.line), []) if t}
    if not chosen:
        # a line run at import (a constant, a default, a decorator): every test of the module
        chosen = (
            {t for ts in in_file.values() for t in ts if t}
            if mutant.line in {int(n) for n, ts in in_file.items() if "" in ts}
            else set()
        )
    chosen -= failed
    # Tests about this module first: those that run many of its lines for little time (a
    # lock test before a runbook that takes the lock on its way), then the rest by time.
    reach: dict[str, int] = defaultdict(int)
    for tests in in_file.values():
        for test in tests:
            reach[test] += 1
    return sorted(chosen, key=lambda t: (durations.get(t, 60.0) / (1 + reach[t]), t))


class Worker:
    """A copy of the checkout and its test runner (scripts/mutants_server.py); one mutant at
    a time."""

    def __init__(self, copy: Path, package: Package) -> None:
        make_copy(copy)
        self.copy = copy
        self.package = package
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "mutants_server.py")],
            cwd=copy,
            env=_env(copy, package),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready:
            raise SystemExit(f"the test runner in {copy} did not start")

    def ask(self, request: dict[str, object]) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer: dict[str, object] = json.loads(self.proc.stdout.readline())
        return answer

    def fresh(self, args: list[str], timeout: float) -> dict[str, object]:
        """The tests in a new interpreter (a mutant the runner cannot put in place)."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *args],
            cwd=self.copy,
            env=_env(self.copy, self.package),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            return {"rc": proc.wait(timeout=timeout)}
        except subprocess.TimeoutExpired:
            return {"rc": None, "timeout": True}
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Workers:
    def __init__(self, jobs: int, package: Package) -> None:
        self.free = [Worker(WORK / f"w{i}", package) for i in range(jobs)]
        self.all = list(self.free)
        self.lock = threading.Lock()

    def take(self) -> Worker:
        with self.lock:
            return self.free.pop()

    def give(self, worker: Worker) -> None:
        with self.lock:
            self.free.append(worker)

    def close(self) -> None:
        for worker in self.all:
            worker.close()


def run_mutant(
    mutant: Mutant,
    tests: list[str],
    workers: Workers,
    durations: dict[str, float],
    cap: float,
    own_tests: list[str],
) -> Result:
    def result(status: str, seconds: float = 0.0, killer: str = "") -> Result:
        return Result(
            mutant.key,
            mutant.describe(),
            mutant.module,
            status,
            len(tests),
            seconds,
            killer,
            module_hash(mutant.path),
        )

    # The module's own test files always run (first); other tests that reach the line
    # follow, most relevant first, up to `cap` seconds of their usual time.
    own = tuple(own_tests)
    chosen = [t for t in tests if own and t.startswith(own)]
    mapped = {t.split("::")[0] for t in durations}
    chosen += [f for f in own if f not in mapped]  # written since the map: run it whole
    if mutant.function == "<module>":
        # a line that runs at import (a table, a registry) is reached by no test's own
        # context: the module's own files run whole for it
        ran = {t.split("::")[0] for t in chosen}
        chosen += [f for f in own if f not in ran]
    if not chosen and not tests:
        return result("no-tests")
    spent = sum(durations.get(t, 10.0) for t in chosen)
    for test in tests:
        if test in chosen:
            continue
        if chosen and spent + durations.get(test, 30.0) > cap:
            break
        chosen.append(test)
        spent += durations.get(test, 30.0)
    worker = workers.take()
    target = worker.copy / mutant.path
    original = target.read_text()
    started = time.monotonic()
    budget = 15.0 + 2 * spent  # a mutant that loops forever (a retry without its limit)
    per_test = max(60, int(3 * max(durations.get(t, 30.0) for t in chosen)) + 30)
    outcome = worker.copy / ".mutant-outcome.json"
    args = ["-x", "-q", "-p", "no:cacheprovider", "-p", PLUGIN, "-o", f"timeout={per_test}"]
    try:
        target.write_text(mutant_source(mutant))
        outcome.unlink(missing_ok=True)
        request = {
            "path": str(target),
            "outer": mutant.outer,
            "outer_line": mutant.outer_line,
            "args": [*args, *chosen],
            "timeout": budget,
        }
        answer = worker.ask(request) if mutant.outer else {"rc": CANNOT_PATCH}
        if answer.get("rc") == CANNOT_PATCH:
            answer = worker.fresh([*args, *chosen], budget + 10)
        seconds = time.monotonic() - started
        if answer.get("timeout"):
            return result("timeout", seconds)
        killer = ""
        if outcome.exists():
            failed = json.loads(outcome.read_text())["failed"]
            killer = failed[0] if failed else ""
        rc = answer["rc"]
        if rc == 0:
            capped = not set(tests) <= set(chosen)
            return result("survived-capped" if capped else "survived", seconds)
        if rc == 5:
            return result("no-tests", seconds)  # the tests were not found: never a kill
        return result("killed", seconds, killer or f"pytest exit {rc}")
    finally:
        target.write_text(original)
        workers.give(worker)


def report(results: list[Result], excluded: int, out: Path | None, unjudged: int = 0) -> None:
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in results:
        per[r.module][r.status] += 1
    lines = [
        f"{'module':<28} {'killed':>6} {'survived':>8} {'capped':>6} {'timeout':>7} {'no test':>7}"
    ]
    for module in sorted(per):
        c = per[module]
        lines.append(
            f"{module:<28} {c['killed']:>6} {c['survived']:>8} {c['survived-capped']:>6} "
            f"{c['timeout']:>7} {c['no-tests']:>7}"
        )
    total = len(results)
    killed = sum(1 for r in results if r.status in ("killed", "timeout"))
    rate = 100.0 * killed / total if total else 0.0
    lines.append(
        f"\n{total} mutants judged ({excluded} listed as equivalent, not run): {killed} killed "
        f"(timeouts included), kill rate {rate:.1f} %"
        + (f"; {unjudged} not judged yet" if unjudged else "")
    )
    survivors = sorted(
        (r for r in results if r.status not in ("killed", "timeout")), key=lambda r: r.describe
    )
    notes = {
        "no-tests": " [no test reaches it]",
        "survived-capped": " [its slower tests were not run: --cap]",
    }
    if survivors:
        lines.append("\nsurvivors (file:line function: mutation):")
        lines += [f"  {r.describe}{notes.get(r.status, '')}" for r in survivors]
    timeouts = [r for r in results if r.status == "timeout"]
    if timeouts:
        lines.append("\ntimed out (counted as killed):")
        lines += [f"  {r.describe}" for r in timeouts]
    text = "\n".join(lines)
    print(text)
    if out is not None:
        out.write_text(text + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--package",
        type=lambda name: "mignurse/" + name.strip("/").removeprefix("mignurse/"),
        choices=sorted(PACKAGES),
        default="mignurse/runner",
        help="the package whose mutants are judged, with its own tests and results",
    )
    parser.add_argument(
        "--module", action="append", default=[], help="lock.py, steps/repair/, rules/churn.py"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="report the kept results of every module (or --module) and stop, running nothing",
    )
    parser.add_argument("--again", action="store_true", help="rerun last survivors only")
    parser.add_argument("--remap", action="store_true", help="rebuild the coverage map")
    parser.add_argument(
        "--remap-file",
        action="append",
        default=[],
        help="map this test file again (written or changed since the map), the rest kept",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="where the report is also written (.venv/mutants/<package>/report.txt)",
    )
    parser.add_argument(
        "--cap",
        type=float,
        default=None,
        help="seconds of a mutant's tests (by their usual time, fastest first) to run at most "
        "(runner: 4, diagnose: 30)",
    )
    args = parser.parse_args()

    package = PACKAGES[args.package]
    mutants = all_mutants(package, args.module)
    equivalent = {
        k: why for k, why in read_equivalent().items() if k.startswith(package.path + "/")
    }
    unknown = sorted(set(equivalent) - {m.key for m in all_mutants(package, [])})
    for key in unknown:
        print(f"note: {EQUIVALENT.name} lists a mutant that no longer exists: {key}")
    judged = [m for m in mutants if m.key not in equivalent]
    judged.sort(
        key=lambda m: (
            next(
                (i for i, p in enumerate(package.first) if m.module.startswith(p)),
                len(package.first),
            ),
            m.path,
            m.start,
        )
    )
    excluded = len(mutants) - len(judged)
    if args.list:
        for m in judged:
            print(m.describe())
        print(f"{len(judged)} mutants ({excluded} listed as equivalent)")
        return 0

    work = package.work
    results_file = work / "results.json"
    previous: dict[str, dict[str, object]] = {}
    if results_file.exists():
        previous = {r["key"]: r for r in json.loads(results_file.read_text())}
    current = {m.key for m in judged}
    if args.summary:
        kept = [Result(**v) for k, v in previous.items() if k in current]  # type: ignore[arg-type]
        report(kept, excluded, args.report or work / "report.txt", len(current) - len(kept))
        return 0

    map_file = work / "map.json"
    if args.remap or not map_file.exists():
        print(f"mapping the tests to {package.path}/ lines (one coverage run)…", flush=True)
        mapping = build_map(package, args.jobs)
    elif args.remap_file:
        mapping = build_map(package, args.jobs, args.remap_file)
    else:
        mapping = json.loads(map_file.read_text())
    if args.again:
        # judged again: what survived, and every mutant of a module that changed since
        judged = [
            m
            for m in judged
            if previous.get(m.key, {}).get("status") not in ("killed", "timeout")
            or previous[m.key].get("source") != module_hash(m.path)
        ]
    durations: dict[str, float] = mapping["durations"]  # type: ignore[assignment]
    workers = Workers(args.jobs, package)
    results: dict[str, Result] = {
        k: Result(**v)
        for k, v in previous.items()  # type: ignore[arg-type]
    }
    done = 0
    lock = threading.Lock()

    stopping = threading.Event()

    def one(mutant: Mutant) -> None:
        nonlocal done
        tests = tests_for(mutant, mapping)
        # the copies are taken at the start: a test file written since is not in them
        own = [t for t in package.own_tests(mutant.module) if (workers.all[0].copy / t).exists()]
        cap = args.cap if args.cap is not None else package.cap
        result = run_mutant(mutant, tests, workers, durations, cap, own)
        with lock:
            if stopping.is_set():
                return  # Ctrl-C reached its tests too: what they answered is no verdict
            done += 1
            results[mutant.key] = result
            print(f"[{done}/{len(judged)}] {result.status:<8} {mutant.describe()}", flush=True)
            if done % 10 == 0:
                results_file.write_text(json.dumps([asdict(r) for r in results.values()]))

    pool = ThreadPoolExecutor(max_workers=args.jobs)
    interrupted = False
    try:
        list(pool.map(one, judged))
    except KeyboardInterrupt:
        # Ctrl-C: no mutant starts after it and none that was running counts; the verdicts
        # reached before it are kept.
        interrupted = True
        stopping.set()
        print("interrupted: keeping the verdicts so far (--again goes on from them)", flush=True)
    finally:
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            pool.shutdown(wait=True, cancel_futures=True)
        workers.close()
    results_file.write_text(json.dumps([asdict(r) for r in results.values()]))
    if interrupted:
        return 130
    kept = [r for k, r in results.items() if k in current]
    report(kept, excluded, args.report or work / "report.txt", len(current) - len(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())
