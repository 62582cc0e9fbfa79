"""Runbook files (`runbooks/NAME.yaml`): loading, validation, and resolving their params.

Decisions:
- The YAML is composed first (`compose_yaml`, which refuses hostile shapes), then built by
  mignurse.yamlfile with the safe constructor (no tags) and the line of every value, so
  every error names the file and the line of the offending value: `runbooks/x.yaml:12:
  steps[2].action: unknown action 'cordn' (known: cordon, drain, …)`.
- A runbook folder is untrusted input: a file is read only when it is a regular file under
  MIGNURSE_MAX_RUNBOOK_BYTES in UTF-8, and its YAML is refused when its aliases refer to
  themselves or expand past mignurse.untrusted's bounds (an alias bomb must not hang).
- Unknown keys are errors, not ignored: a misspelt `timout:` must not silently fall back
  to the default.
- Param values keep the operator's spelling where a step wants it: a `duration` stays
  "90m" (journalctl windows take that form; `duration_seconds()` converts); `path` is
  expanded (`~`); `node` is matched to the cluster's full name (a short `ip-10-0-1-2` is
  accepted, as `mignurse collect` does) and must exist.
- A step's `timeout:` is seconds, or the name of an int/duration param (a runbook lets
  the operator choose the drain timeout: `timeout: drain_timeout`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mignurse.paths import runbooks_dir
from mignurse.runner.step import Action, Harm
from mignurse.runner.steps import action_names, effect, load_action
from mignurse.untrusted import RUNBOOK_BYTES, LimitError, compose_yaml, read_regular_file
from mignurse.yamlfile import LDict, LList, construct_lined

PARAM_TYPES = ("node", "string", "int", "bool", "duration", "path", "choice")
TARGETS = ("node", "cluster")
UNDO_MODES = ("on-failure", "never")
TOP_KEYS = (
    "name",
    "title",
    "description",
    "target",
    "suggested_for",
    "undo",
    "params",
    "steps",
)
PARAM_KEYS = ("type", "required", "default", "help", "choices")
STEP_KEYS = ("id", "action", "with", "timeout")
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The longest duration taken, as `collect --since` (mignurse/cli/collect.py MAX_SINCE_DAYS):
# a journal keeps no more, a step or a radar horizon longer is a typo, and past it a
# timedelta (999,999,999 days) or a datetime (year 9999) overflows.
MAX_DURATION_DAYS = 365
MAX_DURATION_SECONDS = MAX_DURATION_DAYS * 86400
# The finding ids a runbook's `suggested_for` may name: mignurse.diagnose.findings' id
# constants, written out so that loading a runbook loads no diagnosis; a test holds the two
# to each other.
FINDING_IDS = frozenset(
    {
        "node-repair-loop",
        "node-not-ready",
        "replacement-churn",
        "notready-loop",
        "mig-hook-kubelet-restart",
        "accelerated-hardware-not-ready",
        "repair-blocked",
        "mig-config-failed",
        "mig-layout-mismatch",
        "repair-risk",
        "known-bad-combination",
        "gpu-stack-down",
    }
)
_TRUE = ("true", "yes", "y", "1", "on")
_FALSE = ("false", "no", "n", "0", "off")


class RunbookError(Exception):
    """A runbook file or a param value is wrong; str() is the one line to show."""

    exit_code = 2


def duration_seconds(value: str) -> float:
    """ "90m" → 5400.0; ValueError for anything that is not a number and s/m/h/d, and for one
    over a year (MAX_DURATION_DAYS)."""
    match = _DURATION.match(str(value).strip())
    digits = match.group(1).lstrip("0") if match else ""
    if match is None or not digits:
        raise ValueError(f"{value!r} is not a duration like 90s, 90m, 6h or 2d")
    # int() refuses more than 4,300 digits: a number that long is over a year anyway.
    seconds = int(digits) * _UNIT_SECONDS[match.group(2)] if len(digits) <= 20 else None
    if seconds is None or seconds > MAX_DURATION_SECONDS:
        text = str(value).strip()
        shown = text if len(text) <= 40 else text[:39] + "…"
        raise ValueError(f"{shown!r} is over a year: give at most {MAX_DURATION_DAYS}d")
    return float(seconds)


@dataclass(frozen=True)
class ParamSpec:
    name: str
    type: str
    required: bool = False
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type, "required": self.required}
        if self.default is not None:
            out["default"] = self.default
        if self.help:
            out["help"] = self.help
        if self.choices:
            out["choices"] = list(self.choices)
        return out


@dataclass(frozen=True)
class StepSpec:
    id: str
    action: str
    with_args: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | str | None = None  # seconds, or the name of a param
    line: int = 0

    def make(self) -> Action:
        return load_action(self.action)()


@dataclass(frozen=True)
class Runbook:
    name: str
    title: str
    description: str
    target: str
    steps: tuple[StepSpec, ...]
    params: Mapping[str, ParamSpec] = field(default_factory=dict)
    suggested_for: tuple[str, ...] = ()
    undo: str = "never"
    path: str = ""

    @property
    def mutates(self) -> bool:
        return any(effect(step.action).mutates for step in self.steps)

    @property
    def harm(self) -> Harm:
        """The confirmation level: the highest harm among the mutating steps (read from the
        steps' table: listing the runbooks imports no step module)."""
        effects = [effect(step.action) for step in self.steps]
        return max((e.harm for e in effects if e.mutates), default=Harm.NONE)

    def step_timeout(self, step: StepSpec, params: Mapping[str, Any]) -> float:
        if step.timeout is None:
            return float(step.make().timeout)
        if isinstance(step.timeout, str):
            value = params.get(step.timeout)
            if isinstance(value, str):
                return duration_seconds(value)
            return float(value if value is not None else step.make().timeout)
        return float(step.timeout)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "target": self.target,
            "harm": self.harm.name.lower(),
            "mutates": self.mutates,
            "undo": self.undo,
            "suggestedFor": list(self.suggested_for),
            "params": [p.to_json() for p in self.params.values()],
            "steps": [{"id": s.id, "action": s.action} for s in self.steps],
        }


# -- loading ----------------------------------------------------------------------------


def default_folder() -> Path:
    return runbooks_dir()


def load_runbooks(
    folder: Path | None = None, problems: dict[str, str] | None = None
) -> dict[str, Runbook]:
    """Every `*.yaml` in the folder, by name. A broken file raises RunbookError, unless
    `problems` is given: then its one line goes there under the file's stem and the other
    files still load. A folder that does not exist is a RunbookError either way."""
    chosen = Path(folder or default_folder())
    if not chosen.is_dir():
        from_env = folder is None and os.environ.get("MIGNURSE_RUNBOOKS")
        where = f"MIGNURSE_RUNBOOKS={chosen}" if from_env else f"runbook folder {chosen}"
        raise RunbookError(f"{where}: no such folder")
    try:
        RUNBOOK_BYTES.value()  # set wrong, it is one line, not one per file
    except LimitError as exc:
        raise RunbookError(str(exc)) from None
    books: dict[str, Runbook] = {}
    for path in sorted(chosen.glob("*.yaml")):
        try:
            book = load_runbook(path)
        except RunbookError as exc:
            if problems is None:
                raise
            problems[path.stem] = str(exc)
            continue
        books[book.name] = book
    return books


def _shown(path: Path) -> str:
    """The file as found in its folder (relative to the working folder, else the folder's
    name and its own), never what a link in the folder points at."""
    listed = Path(os.path.abspath(path))  # `..` folded away, links not resolved
    try:
        return str(listed.relative_to(Path.cwd()))
    except ValueError:
        return str(Path(listed.parent.name) / listed.name)


class _Doc:
    """A YAML document's values plus the line of every path in it, for error messages."""

    def __init__(self, shown: str, root: yaml.Node) -> None:
        self.shown = shown
        self.value = construct_lined(root, keep_keys=True)
        self.lines: dict[str, int] = {"": root.start_mark.line + 1}
        self.scalars: dict[str, str] = {}  # as written: YAML 1.1 reads `off` as False
        self._paths(self.value, "")

    def _paths(self, value: Any, path: str) -> None:
        if isinstance(value, LDict):
            for key, item in value.items():
                sub = f"{path}.{key}" if path else str(key)
                self.lines[sub + "#key"] = value.key_lines[key]
                self._path(sub, value.value_lines[key], value.scalars.get(key), item)
        elif isinstance(value, LList):
            for i, item in enumerate(value):
                self._path(f"{path}[{i}]", value.item_lines[i], value.scalars.get(i), item)

    def _path(self, path: str, line: int, scalar: str | None, value: Any) -> None:
        self.lines[path] = line
        if scalar is not None:
            self.scalars[path] = scalar
        self._paths(value, path)

    def written(self, path: str, value: Any) -> Any:
        """A scalar as the file spells it, where YAML made it a bool or a number."""
        if isinstance(value, bool | int | float) and path in self.scalars:
            return self.scalars[path]
        return value

    def error(self, path: str, message: str, *, key: bool = False) -> RunbookError:
        line = self.lines.get(path + "#key" if key else path) or self.lines.get(path, 0)
        where = f"{self.shown}:{line}" if line else self.shown
        return RunbookError(f"{where}: {path + ': ' if path else ''}{message}")


def load_runbook(path: Path) -> Runbook:
    path = Path(path)
    shown = _shown(path)
    try:
        # A link in the runbook folder is not followed: it could make a runbook (and its
        # errors, which quote it) of any file this user can read.
        raw = read_regular_file(path, RUNBOOK_BYTES, shown, follow=False)
    except OSError as exc:
        raise RunbookError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    except LimitError as exc:
        raise RunbookError(str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunbookError(
            f"{shown}: not UTF-8 text (byte {exc.start}): a runbook is a YAML file"
        ) from None
    try:
        root = compose_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RunbookError(f"{shown}{line}: not valid YAML: {' '.join(problem.split())}") from None
    except LimitError as exc:
        line = f":{exc.line}" if exc.line else ""
        raise RunbookError(f"{shown}{line}: refused: {exc}") from None
    if root is None:
        raise RunbookError(f"{shown}: empty file")
    try:
        doc = _Doc(shown, root)
    except yaml.YAMLError as exc:
        raise RunbookError(f"{shown}: not valid YAML: {' '.join(str(exc).split())}") from None
    return _build(doc, path)


def _mapping(doc: _Doc, path: str, value: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise doc.error(path, "must be a mapping")
    for key in value:
        if key not in allowed:
            raise doc.error(
                f"{path}.{key}" if path else str(key),
                f"unknown key (known: {', '.join(allowed)})",
                key=True,
            )
    return value


def _text(doc: _Doc, path: str, value: Any, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise doc.error(path, "must be a non-empty string" if required else "must be a string")
    return value.strip()


def _build(doc: _Doc, path: Path) -> Runbook:
    top = _mapping(doc, "", doc.value, TOP_KEYS)
    for key in ("name", "title", "target", "steps"):
        if key not in top:
            raise doc.error("", f"missing required key {key!r}")
    name = _text(doc, "name", top["name"])
    if name != path.stem:
        raise doc.error("name", f"{name!r} must match the file name {path.stem!r}")
    title = _text(doc, "title", top["title"])
    description = _text(doc, "description", top.get("description"), required=False)
    target = top["target"]
    if target not in TARGETS:
        raise doc.error("target", f"{target!r} is not one of: {', '.join(TARGETS)}")
    undo = top.get("undo", "never")
    if undo not in UNDO_MODES:
        raise doc.error("undo", f"{undo!r} is not one of: {', '.join(UNDO_MODES)}")
    suggested = top.get("suggested_for") or []
    if not isinstance(suggested, list) or not all(isinstance(s, str) for s in suggested):
        raise doc.error("suggested_for", "must be a list of finding ids")
    for i, finding in enumerate(suggested):
        if finding not in FINDING_IDS:
            raise doc.error(
                f"suggested_for[{i}]",
                f"unknown finding {finding!r} (known: {', '.join(sorted(FINDING_IDS))})",
            )
    params = _params(doc, top.get("params") or {})
    if target == "node" and (params.get("node") is None or params["node"].type != "node"):
        raise doc.error("target", "a `target: node` runbook needs a param `node` of type node")
    steps = _steps(doc, top["steps"], params)
    return Runbook(
        name=name,
        title=title,
        description=description,
        target=target,
        steps=tuple(steps),
        params=params,
        suggested_for=tuple(suggested),
        undo=undo,
        path=str(path),
    )


def _params(doc: _Doc, raw: Any) -> dict[str, ParamSpec]:
    if not isinstance(raw, dict):
        raise doc.error("params", "must be a mapping of name: {type: …}")
    params: dict[str, ParamSpec] = {}
    for name, spec_raw in raw.items():
        where = f"params.{name}"
        if not isinstance(name, str) or not _ID.match(name):
            raise doc.error(where, "a param name is lower-case letters, digits, - and _", key=True)
        spec = _mapping(doc, where, spec_raw, PARAM_KEYS)
        kind = spec.get("type")
        if kind not in PARAM_TYPES:
            raise doc.error(f"{where}.type", f"{kind!r} is not one of: {', '.join(PARAM_TYPES)}")
        choices = spec.get("choices") or []
        if isinstance(choices, list):
            choices = [doc.written(f"{where}.choices[{i}]", c) for i, c in enumerate(choices)]
        if kind == "choice":
            if not choices or not isinstance(choices, list):
                raise doc.error(where, "a choice param needs `choices: [a, b]`")
        elif choices:
            raise doc.error(f"{where}.choices", "only a `type: choice` param has choices")
        param = ParamSpec(
            name=name,
            type=kind,
            required=bool(spec.get("required", False)),
            default=doc.written(f"{where}.default", spec.get("default"))
            if kind in ("choice", "string", "duration", "path", "node")
            else spec.get("default"),
            help=_text(doc, f"{where}.help", spec.get("help"), required=False),
            choices=tuple(str(c) for c in choices),
        )
        if param.default is not None:
            try:
                param = ParamSpec(
                    name=param.name,
                    type=param.type,
                    required=param.required,
                    default=convert(param, param.default),
                    help=param.help,
                    choices=param.choices,
                )
            except ValueError as exc:
                raise doc.error(f"{where}.default", str(exc)) from None
        params[name] = param
    return params


def _steps(doc: _Doc, raw: Any, params: Mapping[str, ParamSpec]) -> list[StepSpec]:
    if not isinstance(raw, list) or not raw:
        raise doc.error("steps", "must be a non-empty list")
    actions = action_names()
    steps: list[StepSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        where = f"steps[{i}]"
        spec = _mapping(doc, where, item, STEP_KEYS)
        step_id = spec.get("id")
        if not isinstance(step_id, str) or not _ID.match(step_id):
            raise doc.error(f"{where}.id" if "id" in spec else where, "needs an id (a-z, 0-9, -)")
        if step_id in seen:
            raise doc.error(f"{where}.id", f"{step_id!r} is used twice")
        seen.add(step_id)
        action_name = spec.get("action")
        if action_name not in actions:
            raise doc.error(
                f"{where}.action" if "action" in spec else where,
                f"unknown action {action_name!r} (known: {', '.join(sorted(actions))})",
            )
        with_args = spec.get("with") or {}
        if not isinstance(with_args, dict):
            raise doc.error(f"{where}.with", "must be a mapping")
        timeout = spec.get("timeout")
        if isinstance(timeout, str):
            ref = params.get(timeout)
            if ref is None or ref.type not in ("int", "duration"):
                raise doc.error(
                    f"{where}.timeout", f"{timeout!r} is not a param of type int or duration"
                )
        elif timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise doc.error(f"{where}.timeout", "must be seconds (> 0) or a param name")
        elif timeout is not None and not timeout <= MAX_DURATION_SECONDS:  # .inf, .nan too
            raise doc.error(
                f"{where}.timeout", f"is over a year: give at most {MAX_DURATION_SECONDS} s"
            )
        steps.append(
            StepSpec(
                id=step_id,
                action=str(action_name),
                with_args=dict(with_args),
                timeout=timeout,
                line=doc.lines.get(where, 0),
            )
        )
    return steps


# -- params -----------------------------------------------------------------------------


def convert(param: ParamSpec, value: Any) -> Any:
    """A param's value (a YAML default or a --param string) as its type; ValueError."""
    text = str(value).strip()
    if param.type == "int":
        if isinstance(value, bool):
            raise ValueError(f"{param.name}: {value!r} is not a whole number")
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{param.name}: {value!r} is not a whole number") from None
    if param.type == "bool":
        if isinstance(value, bool):
            return value
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{param.name}: {value!r} is not true or false")
    if param.type == "duration":
        duration_seconds(text)  # raises with the accepted forms, or the longest one
        return text
    if param.type == "choice":
        if text not in param.choices:
            raise ValueError(f"{param.name}: {text!r} is not one of: {', '.join(param.choices)}")
        return text
    if param.type == "path":
        return str(Path(text).expanduser())
    if not text:
        raise ValueError(f"{param.name}: empty value")
    return text


def parse_assignments(pairs: list[str]) -> dict[str, str]:
    """`--param k=v` strings → {k: v}; RunbookError for one without `=`, and for a name
    given two values (the last one was taken, and the first never said)."""
    given: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        name = key.strip()
        if not sep or not name:
            raise RunbookError(f"--param {pair!r}: write it as NAME=VALUE")
        if given.setdefault(name, value) != value:
            raise RunbookError(
                f"--param {name} given twice ({given[name]!r}, {value!r}): give it once"
            )
    return given


def resolve_params(
    book: Runbook,
    given: Mapping[str, Any],
    *,
    find_node: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """Typed params: the given values, then defaults; unknown or missing ones refused.

    `find_node(name)` returns the cluster's full node name for a name or short name, or
    None when there is no such node; without it node names are taken as given."""
    unknown = sorted(set(given) - set(book.params))
    if unknown:
        known = ", ".join(book.params) or "none"
        raise RunbookError(f"{book.name}: unknown param {unknown[0]!r} (known: {known})")
    resolved: dict[str, Any] = {}
    for name, param in book.params.items():
        if name in given and given[name] is not None:
            try:
                value = convert(param, given[name])
            except ValueError as exc:  # a duration's line does not name its param: this does
                named = f"{name}: " if param.type == "duration" else ""
                raise RunbookError(f"{book.name}: {named}{exc}") from None
        elif param.default is not None:
            value = param.default
        elif param.required:
            flag = "--node NAME" if name == "node" else f"--param {name}=…"
            raise RunbookError(f"{book.name} needs {name}: pass {flag}")
        else:
            continue
        if param.type == "node" and find_node is not None:
            full = find_node(str(value))
            if full is None:
                raise RunbookError(
                    f"no node {value!r} in this cluster: `mignurse nodes` lists them"
                )
            value = full
        resolved[name] = value
    for step in book.steps:  # an int param that is a step's timeout: seconds, at most a year
        value = resolved.get(step.timeout) if isinstance(step.timeout, str) else None
        if isinstance(value, int) and value > MAX_DURATION_SECONDS:
            raise RunbookError(
                f"{book.name}: {step.timeout}: {value} s is over a year: give at most "
                f"{MAX_DURATION_SECONDS} (it is step {step.id}'s timeout)"
            )
    return resolved


# Runbooks whose effect one of the others reverses: the confirmation and the report say so.
OPPOSITES = {
    "cordon": "uncordon",
    "uncordon": "cordon",
    "pause-node-repair": "resume-node-repair",
    "resume-node-repair": "pause-node-repair",
}


def reversal_words(book: Runbook, *, undo: str = "undo (u)") -> str:
    """How the runbook's change is put back, for the confirmation ("" for no change)."""
    opposite = OPPOSITES.get(book.name)
    if opposite:
        return f"reversible: {opposite} puts it back"
    actions = [step.make() for step in book.steps]
    if all(a.can_undo for a in actions if a.mutates):
        return f"reversible: {undo} puts back what it changed"
    return "cannot be undone" if book.harm >= Harm.HIGH else ""
