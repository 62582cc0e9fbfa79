"""OpenAPI v3 documents of what the simulator serves (`/openapi/v3`), for kubectl.

kubectl explain reads the component schemas; kubectl edit, replace and apply look for the
`fieldValidation` query parameter on each kind's PATCH operation (kubectl 1.32
staging/src/k8s.io/kubectl/pkg/cmd/util QueryParamVerifierV3) and fall back to client-side
validation against `/openapi/v2` when it is missing. Custom resources get their CRD's
`openAPIV3Schema`, built-in kinds a schema generated from the `kubernetes` client's models
(the same field names, types and descriptions as the upstream API reference).
"""

from __future__ import annotations

import hashlib
import json
import typing
from functools import cache
from typing import Any

from mignurse.sim import nodediag, operator_config
from mignurse.sim.crds import CrdSet
from mignurse.sim.discovery import Catalogue, Served

JsonDict = dict[str, Any]
META_PACKAGE = "io.k8s.apimachinery.pkg.apis.meta.v1"
META_MODELS = {
    "ObjectMeta",
    "ListMeta",
    "LabelSelector",
    "LabelSelectorRequirement",
    "OwnerReference",
    "ManagedFieldsEntry",
    "Condition",
    "Status",
    "StatusDetails",
    "StatusCause",
    "DeleteOptions",
    "Preconditions",
}
PACKAGES = {
    "": "io.k8s.api.core.v1",
    "apps": "io.k8s.api.apps.v1",
    "policy": "io.k8s.api.policy.v1",
    "coordination.k8s.io": "io.k8s.api.coordination.v1",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    "authorization.k8s.io": "io.k8s.api.authorization.v1",
    "authentication.k8s.io": "io.k8s.api.authentication.v1",
}
MODEL_OF = {
    ("", "Event"): "CoreV1Event",
    ("policy", "Eviction"): "V1Eviction",
}
PATCH_PARAMS = [
    {"name": n, "in": "query", "schema": {"type": t}, "uniqueItems": True, "description": d}
    for n, t, d in (
        ("dryRun", "string", "When present, indicates that modifications should not be persisted."),
        (
            "fieldManager",
            "string",
            "fieldManager is a name associated with the actor or entity that is making these "
            "changes.",
        ),
        (
            "fieldValidation",
            "string",
            "fieldValidation instructs the server on how to handle objects in the request "
            "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, "
            "Warn (the default), Strict.",
        ),
        ("force", "boolean", 'Force is going to "force" Apply requests.'),
    )
]


def _model_name(model: str) -> str:
    for prefix in ("CoreV1", "V1beta1", "V1beta2", "V1", "V2"):
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


def _ref_name(model: str, package: str) -> str:
    short = _model_name(model)
    return f"{META_PACKAGE}.{short}" if short in META_MODELS else f"{package}.{short}"


def _schema_for(annotation: Any, package: str, todo: list[str]) -> JsonDict:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return _schema_for(inner[0], package, todo) if inner else {}
    if origin is typing.Annotated:
        return _schema_for(args[0], package, todo)
    if origin in (list, typing.List):  # noqa: UP006 - what the client's models annotate with
        return {"type": "array", "items": _schema_for(args[0], package, todo)}
    if origin in (dict, typing.Dict):  # noqa: UP006
        return {"type": "object", "additionalProperties": _schema_for(args[1], package, todo)}
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer", "format": "int64"}
    if annotation is float:
        return {"type": "number", "format": "double"}
    name = getattr(annotation, "__name__", "")
    if name in ("datetime", "date"):
        return {"type": "string", "format": "date-time"}
    if hasattr(annotation, "model_fields"):
        todo.append(name)
        return {"allOf": [{"$ref": f"#/components/schemas/{_ref_name(name, package)}"}]}
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _description(model: Any) -> str:
    doc = (model.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n    ", " ").strip() if not doc.startswith("NOTE") else ""


@cache
def builtin_schemas(model: str, package: str) -> dict[str, JsonDict]:
    """Component schemas of a client model and every model it refers to."""
    import kubernetes.client.models as models

    out: dict[str, JsonDict] = {}
    todo = [model]
    while todo:
        name = todo.pop()
        ref = _ref_name(name, package)
        if ref in out:
            continue
        cls = getattr(models, name, None)
        if cls is None or not hasattr(cls, "model_fields"):
            out[ref] = {"type": "object"}
            continue
        props: JsonDict = {}
        required = []
        for field_name, info in cls.model_fields.items():
            json_name = info.serialization_alias or info.alias or field_name
            schema = _schema_for(info.annotation, package, todo)
            if info.description:
                schema = {**schema, "description": info.description}
            props[json_name] = schema
            if info.is_required():
                required.append(json_name)
        out[ref] = {"type": "object", "description": _description(cls), "properties": props}
        if required:
            out[ref]["required"] = required
    return out


def _gvk(group: str, version: str, kind: str) -> JsonDict:
    return {"group": group, "version": version, "kind": kind}


def crd_component(crds: CrdSet, plural: str) -> tuple[str, JsonDict]:
    doc = crds.documents[plural]["spec"]
    return custom_component(doc["group"], "v1", doc["names"]["kind"], crds.schema(plural))


def custom_component(
    group: str, version: str, kind: str, structural: JsonDict
) -> tuple[str, JsonDict]:
    """A custom resource's model as kube-apiserver publishes it from its CRD's schema."""
    name = ".".join(reversed(group.split("."))) + f".{version}.{kind}"
    schema = json.loads(json.dumps(structural))
    schema.setdefault("properties", {})["metadata"] = {
        "allOf": [{"$ref": f"#/components/schemas/{META_PACKAGE}.ObjectMeta"}],
        "description": "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    }
    schema["x-kubernetes-group-version-kind"] = [_gvk(group, version, kind)]
    return name, schema


def _paths(s: Served) -> JsonDict:
    r = s.rtype
    base = f"/apis/{r.group}/{r.version}" if r.group else f"/api/{r.version}"
    scope = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
    gvk = {"x-kubernetes-group-version-kind": _gvk(r.group, r.version, r.kind)}
    item: JsonDict = {"get": {"operationId": f"read{r.kind}", **gvk}}
    if "patch" in s.verbs:
        item["patch"] = {"operationId": f"patch{r.kind}", "parameters": PATCH_PARAMS, **gvk}
    if "update" in s.verbs:
        item["put"] = {"operationId": f"replace{r.kind}", "parameters": PATCH_PARAMS, **gvk}
    if "delete" in s.verbs:
        item["delete"] = {"operationId": f"delete{r.kind}", **gvk}
    return {scope: {"get": {"operationId": f"list{r.kind}", **gvk}}, f"{scope}/{{name}}": item}


def group_document(served: Catalogue, crds: CrdSet | None, group: str, version: str) -> JsonDict:
    schemas: dict[str, JsonDict] = {}
    paths: JsonDict = {}
    for s in served.values():
        r = s.rtype
        if r.group != group or r.version != version:
            continue
        paths.update(_paths(s))
        custom = None
        if crds is not None and r.plural in crds.documents:
            custom = crd_component(crds, r.plural)
        elif r.plural == nodediag.PLURAL:
            custom = custom_component(group, version, r.kind, nodediag.schema())
        elif r.plural == operator_config.PLURAL:
            custom = custom_component(group, version, r.kind, operator_config.schema())
        if custom is not None:
            name, schema = custom
            schemas[name] = schema
            schemas.update(builtin_schemas("V1ObjectMeta", META_PACKAGE))
            continue
        # the client names a version's models after it: V1ResourceSlice, V1beta1ResourceSlice
        prefix = "V1" if version == "v1" else f"V{version[1:]}"
        model = MODEL_OF.get((group, r.kind), f"{prefix}{r.kind}")
        package = PACKAGES.get(group, f"io.k8s.api.{group.split('.')[0]}.{version}")
        found = builtin_schemas(model, package)
        top = _ref_name(model, package)
        if top in found:
            found = {
                **found,
                top: {
                    **found[top],
                    "x-kubernetes-group-version-kind": [_gvk(group, version, r.kind)],
                },
            }
        schemas.update(found)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.3"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def index(served: Catalogue, group_versions: list[tuple[str, str]]) -> JsonDict:
    paths: JsonDict = {}
    for group, version in [("", "v1"), *group_versions]:
        key = f"apis/{group}/{version}" if group else f"api/{version}"
        digest = hashlib.sha512(
            f"{key}:{sorted(k for k in served if k[0] == group)}".encode()
        ).hexdigest()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest[:128].upper()}"}
    return {"paths": paths}
