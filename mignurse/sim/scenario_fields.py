"""Reading a scenario's YAML: typed fields whose errors name the file and line.

`ParseContext` wraps the YAML built by `mignurse.yamlfile.load_lined` (every key and value
with its line) and turns each malformed field into one `ScenarioError`,
`<file>:<line>: <what is wrong>`, with a "did you mean" hint for a misspelt key. The
scenario's parsers (`scenario.py`, `scenario_pools.py`, `scenario_steps.py`) read every
field through it.
"""

from __future__ import annotations

import re
from typing import Any

from mignurse.sim.scenario_spec import parse_duration
from mignurse.yamlfile import LDict, LList

DNS_1123_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# kubernetes v1.32 staging/src/k8s.io/apimachinery/pkg/util/validation IsDNS1123Subdomain: a
# ConfigMap's or a custom resource's name (at most 253 characters)
DNS_1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


class ScenarioError(Exception):
    """One line: `<file>:<line>: <what is wrong>`."""


class ParseContext:
    """Where we are in the file, to build `<file>:<line>: …` errors."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, line: int, message: str) -> ScenarioError:
        return ScenarioError(f"{self.path}:{line}: {message}")

    def line_of(self, obj: Any, key: str | None = None) -> int:
        if isinstance(obj, LDict):
            if key is not None and key in obj.key_lines:
                return obj.key_lines[key]
            return obj.line
        if isinstance(obj, LList):
            return obj.line
        return 0

    def mapping(self, obj: Any, where: str, line: int, allowed: set[str]) -> LDict:
        if not isinstance(obj, dict):
            raise self.fail(line, f"{where} must be a mapping, got {type(obj).__name__}")
        assert isinstance(obj, LDict)
        for key in obj:
            if key not in allowed:
                hint = _closest(key, allowed)
                raise self.fail(
                    self.line_of(obj, key),
                    f"unknown field {key!r} in {where}"
                    + (f" (did you mean {hint!r}?)" if hint else ""),
                )
        return obj

    def seq(self, obj: Any, where: str, line: int) -> LList:
        if obj is None:
            empty = LList()
            empty.line, empty.item_lines = line, []
            return empty
        if not isinstance(obj, list):
            raise self.fail(line, f"{where} must be a list, got {type(obj).__name__}")
        assert isinstance(obj, LList)
        return obj

    def required(self, d: LDict, key: str, where: str) -> Any:
        if key not in d or d[key] is None:
            raise self.fail(d.line, f"{where} needs {key!r}")
        return d[key]

    def string(self, d: LDict, key: str, where: str, default: str | None = None) -> str:
        value = d.get(key, default)
        if value is None:
            raise self.fail(d.line, f"{where} needs {key!r}")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be a string")
        return str(value)

    def integer(self, d: LDict, key: str, where: str, default: int, minimum: int = 0) -> int:
        value = d.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be an integer >= {minimum}")
        return value

    def boolean(self, d: LDict, key: str, where: str, default: bool) -> bool:
        value = d.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be true or false")
        return value

    def duration(
        self, d: LDict, key: str, where: str, default: float | None, signed: bool = False
    ) -> float:
        value = d.get(key)
        if value is None:
            if default is None:
                raise self.fail(d.line, f"{where} needs {key!r}")
            return default
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise self.fail(self.line_of(d, key), f"{where}.{key}: {exc}") from None
        if seconds < 0 and not signed:
            raise self.fail(self.line_of(d, key), f"{where}.{key} must not be negative")
        return seconds

    def str_map(self, d: LDict, key: str, where: str, nullable: bool = False) -> dict[str, Any]:
        value = d.get(key) or {}
        if not isinstance(value, dict):
            raise self.fail(self.line_of(d, key), f"{where}.{key} must be a mapping")
        out: dict[str, Any] = {}
        for k, v in value.items():
            if v is None and nullable:
                out[k] = None
            elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
                out[k] = str(v)
            elif isinstance(v, bool):
                out[k] = "true" if v else "false"
            else:
                raise self.fail(
                    self.line_of(value, k),
                    f"{where}.{key}.{k} must be a string" + (" or null" if nullable else ""),
                )
        return out


def _closest(word: str, options: set[str]) -> str | None:
    import difflib

    match = difflib.get_close_matches(word, sorted(options), n=1, cutoff=0.6)
    return match[0] if match else None


def empty_mapping(line: int) -> LDict:
    """An empty mapping at `line`: what an optional section left out reads as."""
    d = LDict()
    d.line, d.key_lines = line, {}
    return d
