"""Structural-schema handling of custom resources, as apiextensions-apiserver does it.

On every write: unknown fields are pruned (or refused under `fieldValidation=Strict`),
`default`s are applied, then the object is validated against the OpenAPI v3 schema and the
`x-kubernetes-validations` CEL rules. Messages follow apiextensions-apiserver v0.32
pkg/apiserver/validation (kube-openapi errors turned into field errors) and
apimachinery pkg/util/validation/field.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mignurse.sim import cel

JsonDict = dict[str, Any]


@dataclass(frozen=True)
class FieldError:
    reason: str  # FieldValueInvalid, FieldValueRequired, ...
    field: str
    body: str  # the message after "<field>: "

    @property
    def message(self) -> str:
        return f"{self.field}: {self.body}" if self.field else self.body

    def cause(self) -> JsonDict:
        return {"reason": self.reason, "message": self.body, "field": self.field}


def _value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return "null" if value is None else str(value)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, f"Invalid value: {_value(value)}: {detail}")


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _matches_type(want: str, value: Any) -> bool:
    got = _type_of(value)
    return got == want or (want == "number" and got == "integer")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=1024)
def _rule(text: str) -> cel.CelExpr:
    return cel.compile_rule(text)


# --------------------------------------------------------------------------- pruning


def prune(obj: Any, schema: JsonDict, path: str = "", unknown: list[str] | None = None) -> Any:
    """Drop fields the schema does not declare; their paths go to `unknown`."""
    if unknown is None:
        unknown = []
    if not isinstance(schema, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = {}
        for key, value in obj.items():
            if path == "" and key in ("apiVersion", "kind", "metadata"):
                out[key] = value  # the object's envelope is never pruned
            elif isinstance(props, dict) and key in props:
                out[key] = prune(value, props[key], _join(path, key), unknown)
            elif isinstance(extra, dict):
                out[key] = prune(value, extra, _join(path, key), unknown)
            elif extra is True or (props is None and extra is None and not schema.get("type")):
                out[key] = value
            else:
                unknown.append(_join(path, key))
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], f"{path}[{i}]", unknown) for i, v in enumerate(obj)]
    return obj


# --------------------------------------------------------------------------- defaulting


def apply_defaults(obj: Any, schema: JsonDict) -> Any:
    if not isinstance(schema, dict):
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and isinstance(sub, dict) and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                obj[key] = apply_defaults(obj[key], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in list(obj):
                if key not in props:
                    obj[key] = apply_defaults(obj[key], extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(v, schema["items"]) for v in obj]
    return obj


# --------------------------------------------------------------------------- validation


def validate(
    obj: Any, schema: JsonDict, old: Any = None, *, path: str = "", has_old: bool = False
) -> list[FieldError]:
    errors: list[FieldError] = []
    _validate(obj, schema, old, path, has_old, errors)
    return errors


def _validate(
    value: Any, schema: JsonDict, old: Any, path: str, has_old: bool, errors: list[FieldError]
) -> None:
    if not isinstance(schema, dict):
        return
    if value is None and schema.get("nullable"):
        return
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    want = schema.get("type")
    if int_or_string:
        if _type_of(value) not in ("integer", "string"):
            errors.append(
                invalid(
                    path,
                    value,
                    f'{path} in body must be of type integer,string: "{_type_of(value)}"',
                )
            )
            return
    elif want and not _matches_type(want, value):
        errors.append(
            invalid(path, value, f'{path} in body must be of type {want}: "{_type_of(value)}"')
        )
        return
    before = len(errors)
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_value(v) for v in schema["enum"])
        errors.append(
            FieldError(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {_value(value)}: supported values: {supported}",
            )
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "maximum" in schema:
            mx = schema["maximum"]
            if schema.get("exclusiveMaximum") and value >= mx:
                errors.append(
                    invalid(path, value, f"{path} in body should be less than {_value(mx)}")
                )
            elif value > mx:
                errors.append(
                    invalid(
                        path, value, f"{path} in body should be less than or equal to {_value(mx)}"
                    )
                )
        if "minimum" in schema:
            mn = schema["minimum"]
            if schema.get("exclusiveMinimum") and value <= mn:
                errors.append(
                    invalid(path, value, f"{path} in body should be greater than {_value(mn)}")
                )
            elif value < mn:
                errors.append(
                    invalid(
                        path,
                        value,
                        f"{path} in body should be greater than or equal to {_value(mn)}",
                    )
                )
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(invalid(path, value, f"{path} in body must be a finite number"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError(
                    "FieldValueTooLong",
                    path,
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                )
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                invalid(
                    path,
                    value,
                    f"{path} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            errors.append(
                invalid(path, value, f"{path} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                FieldError(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                )
            )
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(
                invalid(
                    path, value, f"{path} in body should have at least {schema['minItems']} items"
                )
            )
        items = schema.get("items")
        if isinstance(items, dict):
            old_items = old if isinstance(old, list) else []
            for i, item in enumerate(value):
                # list items are correlated with their old selves only by index for atomic lists
                prev = old_items[i] if i < len(old_items) else None
                _validate(item, items, prev, f"{path}[{i}]", has_old and i < len(old_items), errors)
    if isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(
                FieldError(
                    "FieldValueTooMany",
                    path,
                    f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                )
            )
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            errors.append(
                invalid(
                    path,
                    value,
                    f"{path} in body should have at least {schema['minProperties']} properties",
                )
            )
        for key in schema.get("required") or ():
            if key not in value:
                errors.append(FieldError("FieldValueRequired", _join(path, key), "Required value"))
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, sub in value.items():
            sub_schema = (
                props.get(key) if key in props else extra if isinstance(extra, dict) else None
            )
            if isinstance(sub_schema, dict):
                _validate(
                    sub,
                    sub_schema,
                    old_map.get(key),
                    _join(path, key),
                    has_old and key in old_map,
                    errors,
                )
    for choice in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(choice) or ():
            # the CRD schemas use these only for type unions already handled above
            if choice == "allOf":
                _validate(value, sub, old, path, has_old, errors)
    if len(errors) == before:
        _cel(value, schema, old, path, has_old, errors)


def _cel(
    value: Any, schema: JsonDict, old: Any, path: str, has_old: bool, errors: list[FieldError]
) -> None:
    for rule in schema.get("x-kubernetes-validations") or ():
        text = str(rule.get("rule", ""))
        uses_old = "oldSelf" in text
        if uses_old and not has_old:
            continue  # transition rules run only on updates of an existing value
        env = {"self": value}
        if uses_old:
            env["oldSelf"] = old
        try:
            ok = cel.evaluate(_rule(text), env)
        except cel.CelError as exc:
            errors.append(invalid(path, _schema_type(schema), f"{text}: {exc}"))
            continue
        if ok is not True:
            message = rule.get("message") or f"failed rule: {text}"
            field = path
            if rule.get("fieldPath"):
                field = (
                    path + str(rule["fieldPath"]) if path else str(rule["fieldPath"]).lstrip(".")
                )
            reason = {
                "FieldValueForbidden": "FieldValueForbidden",
                "FieldValueRequired": "FieldValueRequired",
                "FieldValueDuplicate": "FieldValueDuplicate",
            }.get(str(rule.get("reason", "")), "FieldValueInvalid")
            if reason == "FieldValueInvalid":
                errors.append(invalid(field, _schema_type(schema), str(message)))
            else:
                errors.append(FieldError(reason, field, str(message)))


def _schema_type(schema: JsonDict) -> str:
    if schema.get("x-kubernetes-int-or-string"):
        return "string"
    return str(schema.get("type") or "object")
