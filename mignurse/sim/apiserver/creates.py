"""How the API server creates: POST to a collection, for the kinds the simulator lets a client
add at run time (PodDisruptionBudgets and Karpenter NodePools), so a test can put a blocking
budget or a NodePool with limits in a run's way as `kubectl create -f` would.

What kube-apiserver does before a create is stored, in its order (k8s.io/apiserver v0.32
pkg/endpoints/handlers/create.go and pkg/registry/rest/create.go BeforeCreate):
- the body decodes as the resource's kind and the URL's apiVersion (400 otherwise); fields the
  kind does not have are dropped with a warning, or refused with `fieldValidation=Strict`;
- the namespace of the body, when given, is the URL's (400 otherwise), and it exists
  (NamespaceLifecycle admission: 404);
- `metadata.name`, or a name made from `generateName` and five random characters; uid,
  creationTimestamp and resourceVersion are the server's; managedFields records the creating
  manager (`operation: Update`);
- the kind's strategy: PodDisruptionBudget clears status and sets generation 1 (kubernetes
  v1.32 pkg/registry/policy/poddisruptionbudget/strategy.go PrepareForCreate) and validates its
  spec (pkg/apis/policy/validation/validation.go ValidatePodDisruptionBudgetSpec); a custom
  resource drops status where the CRD has a status subresource, sets generation 1, is pruned,
  defaulted and validated against its CRD schema with its CEL rules
  (k8s.io/apiextensions-apiserver v0.32 pkg/registry/customresource/strategy.go);
- an object of that name already there is 409 AlreadyExists; `dryRun=All` stores nothing;
- 201 Created with the stored object. Controllers then act on it: the disruption controller
  computes a new budget's status, Karpenter takes a new NodePool into its provisioning
  (mignurse/sim/controllers/karpenter.py `adopt_nodepool`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from mignurse.sim import apply as ssa
from mignurse.sim import nodediag, openapi, schema
from mignurse.sim.apiserver.errors import ApiError, already_exists, invalid, not_allowed
from mignurse.sim.apiserver.writes import CUSTOM, WriteHandler
from mignurse.sim.discovery import Served
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.resources import ResourceType

CREATABLE = ("poddisruptionbudgets", "nodepools", "nodediagnostics")
# apimachinery pkg/util/validation IsDNS1123Subdomain
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
# apps validation ValidatePositiveIntOrPercent / IsNotMoreThan100Percent
_PERCENT = re.compile(r"^[0-9]+%$")
_PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  "
    "or '93%', regex used for validation is '[0-9]+%')"
)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")
_BUILTIN_MODEL = {"poddisruptionbudgets": ("V1PodDisruptionBudget", "io.k8s.api.policy.v1")}


class CreateHandler(WriteHandler):
    def _create(self, served: Served, namespace: str | None, body: bytes) -> None:
        rtype = served.rtype
        if rtype.plural not in CREATABLE:
            raise not_allowed(rtype)
        obj = self._decoded_object(rtype, body)
        if obj.get("apiVersion") not in (None, rtype.api_version):
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({obj.get('apiVersion')}) does not match the "
                f"expected API version ({rtype.api_version})",
            )
        obj.pop("kind", None)
        obj.pop("apiVersion", None)
        if not isinstance(obj.get("metadata", {}), dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        meta: JsonDict = obj.setdefault("metadata", {})
        key_ns = self._create_namespace(rtype, meta, namespace)
        warnings = self._known_fields(rtype, obj)
        name = self._create_name(rtype, meta)
        now = ts(self.sim.loops.now)
        for server_owned in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
            meta.pop(server_owned, None)
        meta["generation"] = 1
        if rtype.plural == "poddisruptionbudgets":
            obj["status"] = {
                "disruptionsAllowed": 0,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            }
            errors = pdb_errors(obj.get("spec"))
            if errors:
                raise invalid(rtype, name, errors)
        else:
            obj.pop("status", None)
            self._custom_create_checks(rtype, name, obj)
        meta["managedFields"] = [
            ssa.Manager(
                self._manager(),
                "Update",
                rtype.api_version,
                now,
                ssa.field_set({k: v for k, v in obj.items() if k != "status"}, self._shapes(rtype)),
            ).entry()
        ]
        dry_run = self._query.get("dryRun") == "All"
        with self.sim.loops.api_txn() as tx:
            if tx.get(rtype.plural, key_ns, name) is not None:
                raise already_exists(rtype, name)
            meta["uid"] = self.sim.loops.uid()
            meta["creationTimestamp"] = now
            if dry_run:
                self._send(201, self._with_kind(rtype, obj), warnings=warnings)
                return
            meta["resourceVersion"] = "0"
            tx.put(rtype.plural, obj)
            self.sim.loops.created(rtype.plural, key_ns, name)
        if rtype.plural == "nodediagnostics" and self.sim.node_diagnostics is not None:
            self.sim.node_diagnostics.created(name)  # the agent on that node takes it up
        stored = self.sim.store.get_raw(rtype.plural, key_ns, name)
        assert stored is not None
        self._send(201, b"{" + rtype.kind_header() + stored[1:], warnings=warnings)

    def _create_namespace(self, rtype: ResourceType, meta: JsonDict, namespace: str | None) -> str:
        """The object's namespace: the URL's (a body naming another is 400), which must exist."""
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return ""
        assert namespace is not None  # routing: a namespaced collection has one
        given = meta.get("namespace")
        if given not in (None, "", namespace):
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the "
                "request",
            )
        meta["namespace"] = namespace
        if not self.sim.store.exists("namespaces", "", namespace):
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                {"name": namespace, "kind": "namespaces"},
            )
        return namespace

    def _create_name(self, rtype: ResourceType, meta: JsonDict) -> str:
        name = meta.get("name")
        generate = meta.get("generateName")
        if not name and isinstance(generate, str) and generate:
            name = generate + self.sim.loops.suffix()
            meta["name"] = name
        if not name:
            raise invalid(
                rtype,
                "",
                [
                    schema.FieldError(
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )
                ],
            )
        if not isinstance(name, str) or not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
            raise invalid(
                rtype, str(name), [schema.invalid("metadata.name", name, _SUBDOMAIN_MESSAGE)]
            )
        return name

    def _known_fields(self, rtype: ResourceType, obj: JsonDict) -> list[str]:
        """Drop the fields a built-in kind does not have: warnings, or 400 with Strict."""
        model = _BUILTIN_MODEL.get(rtype.plural)
        if model is None:
            return []  # a custom resource is pruned by its CRD schema
        schemas = openapi.builtin_schemas(*model)
        unknown: list[str] = []
        root = f"{model[1]}.{openapi._model_name(model[0])}"
        _drop_unknown(obj, schemas, root, "", unknown)
        return self._field_validation(rtype, unknown)

    def _custom_create_checks(self, rtype: ResourceType, name: str, obj: JsonDict) -> None:
        """Prune, default and validate a new custom resource against its CRD (no old object:
        transition rules do not apply)."""
        crds = self.sim.crds
        if rtype.plural == "nodediagnostics":
            structural = nodediag.schema()
        elif crds is None or rtype.plural not in CUSTOM:
            raise not_allowed(rtype)
        else:
            structural = crds.schema(rtype.plural)
        pruned = schema.prune(obj, structural, "", [])
        obj.clear()
        obj.update(pruned)
        schema.apply_defaults(obj, structural)
        body_schema = {
            **structural,
            "properties": {
                k: v for k, v in (structural.get("properties") or {}).items() if k != "metadata"
            },
        }
        errors = schema.validate({k: v for k, v in obj.items() if k != "metadata"}, body_schema)
        if errors:
            raise invalid(rtype, name, errors)


def _drop_unknown(
    obj: Any, schemas: dict[str, JsonDict], ref: str, path: str, unknown: list[str]
) -> None:
    """Remove the keys of `obj` that schema `ref` does not name, noting their paths."""
    component = schemas.get(ref) or {}
    props = component.get("properties")
    if not isinstance(obj, dict) or not isinstance(props, dict):
        return
    for key in list(obj):
        where = f"{path}.{key}" if path else key
        if key not in props:
            unknown.append(where)
            del obj[key]
            continue
        sub = props[key]
        target = _ref_of(sub)
        if target is not None:
            _drop_unknown(obj[key], schemas, target, where, unknown)
        elif sub.get("type") == "array" and isinstance(obj[key], list):
            item_ref = _ref_of(sub.get("items") or {})
            if item_ref is not None:
                for i, item in enumerate(obj[key]):
                    _drop_unknown(item, schemas, item_ref, f"{where}[{i}]", unknown)


def _ref_of(prop: JsonDict) -> str | None:
    for part in prop.get("allOf") or ():
        ref = part.get("$ref", "")
        if ref.startswith("#/components/schemas/"):
            return str(ref.split("/")[-1])
    return None


# --------------------------------------------------------------------------- PodDisruptionBudget


def pdb_errors(spec: Any) -> list[schema.FieldError]:
    """ValidatePodDisruptionBudgetSpec (kubernetes v1.32 pkg/apis/policy/validation)."""
    if spec is None:
        return []
    if not isinstance(spec, dict):
        return [schema.invalid("spec", spec, "must be an object")]
    errors: list[schema.FieldError] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errors.append(
            schema.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
        )
    for key in ("minAvailable", "maxUnavailable"):
        if spec.get(key) is not None:
            errors += _int_or_percent(spec[key], f"spec.{key}")
    errors += label_selector_errors(spec.get("selector"), "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in _EVICTION_POLICIES:
        supported = ", ".join(json.dumps(p) for p in _EVICTION_POLICIES)
        errors.append(
            schema.FieldError(
                "FieldValueNotSupported",
                "spec.unhealthyPodEvictionPolicy",
                f"Unsupported value: {json.dumps(policy)}: supported values: {supported}",
            )
        )
    return errors


def _int_or_percent(value: Any, path: str) -> list[schema.FieldError]:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return [schema.invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        if value < 0:
            return [schema.invalid(path, value, "must be greater than or equal to 0")]
        return []
    if not _PERCENT.match(value):
        return [schema.invalid(path, value, _PERCENT_MESSAGE)]
    if int(value[:-1]) > 100:
        return [schema.invalid(path, value, "must not be greater than 100%")]
    return []


def label_selector_errors(selector: Any, path: str) -> list[schema.FieldError]:
    """metav1 validation ValidateLabelSelector: operators, and values by operator."""
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [schema.invalid(path, selector, "must be an object")]
    errors: list[schema.FieldError] = []
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        where = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            errors.append(schema.invalid(where, expr, "must be an object"))
            continue
        operator = expr.get("operator")
        values = expr.get("values") or []
        if operator not in _OPERATORS:
            errors.append(
                schema.invalid(f"{where}.operator", operator, "not a valid selector operator")
            )
        elif operator in ("In", "NotIn") and not values:
            errors.append(
                schema.FieldError(
                    "FieldValueRequired",
                    f"{where}.values",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )
            )
        elif operator in ("Exists", "DoesNotExist") and values:
            errors.append(
                schema.FieldError(
                    "FieldValueForbidden",
                    f"{where}.values",
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )
            )
    return errors
