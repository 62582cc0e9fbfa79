"""How the API server writes: PATCH in its four forms (merge, strategic, JSON patch,
server-side apply with field managers), PUT with resourceVersion preconditions, the
status subresource's rules, custom resources pruned, defaulted and validated by their CRD
schema, DELETE with grace periods, and the Eviction API with PodDisruptionBudgets.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from mignurse.sim import apply as ssa
from mignurse.sim import patches, schema
from mignurse.sim.apiserver.base import HandlerBase
from mignurse.sim.apiserver.errors import ApiError, conflict, invalid, not_found
from mignurse.sim.discovery import Served
from mignurse.sim.objects import JsonDict, ts
from mignurse.sim.resources import RESOURCES, ResourceType
from mignurse.sim.workloads import POD_TERMINATION_GRACE

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+cbor": "apply-cbor",
}
# Built-in kinds that keep a metadata.generation (their strategies bump it on spec changes).
GENERATION_KINDS = {"deployments", "poddisruptionbudgets", "replicasets", "daemonsets"}
CUSTOM = ("nodeclaims", "nodepools", "ec2nodeclasses")


def _manager_from(user_agent: str) -> str:
    """The default field manager: the User-Agent up to its first '/' (apiserver handlers)."""
    return (user_agent.split("/", 1)[0] or "unknown")[:128]


def _metadata_named(obj: JsonDict, name: str) -> JsonDict:
    """The body's metadata, whose name must be the one on the URL (400, as kube-apiserver)."""
    meta: JsonDict = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    if meta.get("name") != name:
        raise ApiError(
            400,
            "BadRequest",
            f"the name of the object ({meta.get('name')}) does not match the name on the "
            f"URL ({name})",
        )
    return meta


class WriteHandler(HandlerBase):
    def _shapes(self, rtype: ResourceType) -> ssa.Shapes:
        custom = (
            self.sim.crds.schema(rtype.plural) if self.sim.crds and rtype.plural in CUSTOM else None
        )
        return ssa.Shapes(custom, patches.MERGE_KEYS, patches.PRIMITIVE_MERGE_LISTS)

    def _manager(self) -> str:
        return self._query.get("fieldManager") or _manager_from(
            self.headers.get("User-Agent") or ""
        )

    def _decode_body(self, rtype: ResourceType, body: bytes, yaml_ok: bool) -> Any:
        try:
            return yaml.safe_load(body) if yaml_ok else json.loads(body or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a '
                f"{rtype.kind}: {exc}",
            ) from None

    def _patch(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        kind = PATCH_TYPES.get(content_type)
        custom = rtype.plural in CUSTOM
        if kind is None or kind == "apply-cbor" or (kind == "strategic" and custom):
            # No PATCH route consumes it (k8s.io/apiserver v0.34.0 pkg/endpoints/installer.go):
            # go-restful's 415, made a Status by pkg/server/handler.go serviceErrorHandler
            # (apierrors.NewGenericServerResponse), as kube-apiserver v1.34.4 answers it.
            raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
        if kind == "apply":
            self._apply(served, namespace, name, sub, body)
            return
        try:
            patch = json.loads(body or b"null")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding patch: {exc}") from None

        def compute(current: JsonDict) -> JsonDict:
            try:
                if kind == "merge":
                    patched = patches.merge_patch(current, patch)
                elif kind == "strategic":
                    patched = patches.strategic_merge_patch(current, patch)
                else:
                    patched = patches.json_patch(current, patch)
            except patches.PatchError as exc:
                reason = "Invalid" if exc.code == 422 else "BadRequest"
                raise ApiError(exc.code, reason, str(exc)) from None
            if not isinstance(patched, dict):
                raise ApiError(422, "Invalid", "the patch does not produce an object")
            return patched

        self._modify(served, namespace, name, sub, compute)

    def _decoded_object(self, rtype: ResourceType, body: bytes) -> JsonDict:
        """A create's or an update's body: a JSON object of the resource's kind (or none)."""
        obj = self._decode_body(rtype, body, yaml_ok=False)
        if not isinstance(obj, dict):
            raise ApiError(400, "BadRequest", "the body of the request must be an object")
        if obj.get("kind") not in (None, rtype.kind):
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f'the kind "{obj.get("kind")}" does not match "{rtype.kind}"',
            )
        return obj

    def _update(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        new = self._decoded_object(rtype, body)
        meta = _metadata_named(new, name)
        if rtype.plural in CUSTOM and not meta.get("resourceVersion"):
            # customresource strategy: AllowUnconditionalUpdate is false
            raise invalid(
                rtype,
                name,
                [schema.invalid("metadata.resourceVersion", 0, "must be specified for an update")],
            )
        self._modify(served, namespace, name, sub, lambda current: new, operation="Update")

    def _apply(
        self, served: Served, namespace: str, name: str, sub: str | None, body: bytes
    ) -> None:
        rtype = served.rtype
        config = self._decode_body(rtype, body, yaml_ok=True)
        if not isinstance(config, dict):
            raise ApiError(
                400, "BadRequest", "error decoding YAML: the apply configuration is not an object"
            )
        manager = self._query.get("fieldManager")
        if not manager:
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        if config.get("kind") != rtype.kind or config.get("apiVersion") != rtype.api_version:
            raise ApiError(
                400,
                "BadRequest",
                f"the API version in the data ({config.get('apiVersion')}) does not match the "
                f"expected API version ({rtype.api_version})",
            )
        _metadata_named(config, name)  # the name on the URL
        force = self._query.get("force") in ("true", "1")
        shapes = self._shapes(rtype)
        status_separate = "status" in rtype.subresources

        def compute(current: JsonDict) -> JsonDict:
            try:
                return ssa.server_side_apply(
                    current,
                    config,
                    manager=manager,
                    force=force,
                    api_version=rtype.api_version,
                    now=ts(self.sim.loops.now),
                    shapes=shapes,
                    status_separate=status_separate,
                )
            except ssa.ApplyConflict as exc:
                raise ApiError(409, "Conflict", exc.message, {"causes": exc.causes()}) from None

        self._modify(served, namespace, name, sub, compute, operation="Apply")

    def _custom_checks(
        self, rtype: ResourceType, name: str, current: JsonDict, new: JsonDict
    ) -> list[str]:
        """Prune, default and validate a custom resource; returns unknown-field warnings."""
        crds = self.sim.crds
        if crds is None or rtype.plural not in CUSTOM:
            return []
        structural = crds.schema(rtype.plural)
        unknown: list[str] = []
        pruned = schema.prune(new, structural, "", unknown)
        warnings = self._field_validation(rtype, unknown)
        new.clear()
        new.update(pruned)
        schema.apply_defaults(new, structural)
        errors = schema.validate(
            {k: v for k, v in new.items() if k != "metadata"},
            {
                **structural,
                "properties": {
                    k: v for k, v in (structural.get("properties") or {}).items() if k != "metadata"
                },
            },
            {k: v for k, v in current.items() if k != "metadata"},
            has_old=True,
        )
        if errors:
            raise invalid(rtype, name, errors)
        return warnings

    def _field_validation(self, rtype: ResourceType, unknown: list[str]) -> list[str]:
        """The request's fieldValidation over the fields dropped from its body: Strict refuses
        it (400), Ignore says nothing, Warn (the default) returns the warnings to send."""
        mode = self._query.get("fieldValidation", "Warn") or "Warn"
        if unknown and mode == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in unknown)
            raise ApiError(
                400,
                "BadRequest",
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: '
                f"strict decoding error: {listed}",
            )
        return [] if mode == "Ignore" else [f'unknown field "{u}"' for u in unknown]

    def _modify(
        self,
        served: Served,
        namespace: str,
        name: str,
        sub: str | None,
        compute: Any,
        operation: str = "Patch",
    ) -> None:
        rtype = served.rtype
        sim = self.sim
        key_ns = namespace if rtype.namespaced else ""
        warnings: list[str] = []
        with sim.loops.api_txn() as tx:
            stored = tx.get(rtype.plural, key_ns, name)
            if stored is None:
                raise not_found(rtype, name)
            current: JsonDict = json.loads(json.dumps(stored))  # writes must not alias the store
            patched = compute(json.loads(json.dumps(current)))
            patched.pop("kind", None)
            patched.pop("apiVersion", None)
            patched.setdefault("metadata", {})
            if not isinstance(patched["metadata"], dict):
                raise ApiError(422, "Invalid", "metadata must be an object")
            want_rv = patched["metadata"].get("resourceVersion")
            if want_rv and want_rv != current["metadata"].get("resourceVersion"):
                raise conflict(rtype, name)
            patched = self._apply_subresource_rules(rtype, current, patched, sub)
            warnings = self._custom_checks(rtype, name, current, patched)
            if operation != "Apply":
                ssa.record_update(
                    current,
                    patched,
                    manager=self._manager(),
                    api_version=rtype.api_version,
                    now=ts(sim.loops.now),
                    shapes=self._shapes(rtype),
                    status_separate="status" in rtype.subresources,
                    subresource=sub or "",
                )
            if patched == current:
                self._send(200, self._with_kind(rtype, current), warnings=warnings)
                return
            before = current
            spec_changed = {
                k: v for k, v in patched.items() if k not in ("metadata", "status")
            } != {k: v for k, v in before.items() if k not in ("metadata", "status")}
            if spec_changed and (rtype.plural in CUSTOM or rtype.plural in GENERATION_KINDS):
                patched["metadata"]["generation"] = int(before["metadata"].get("generation", 1)) + 1
            template_changed = (patched.get("spec") or {}).get("template") != (
                before.get("spec") or {}
            ).get("template")
            if rtype.plural == "deployments" and template_changed:
                ann = patched["metadata"].setdefault("annotations", {})
                ann["deployment.kubernetes.io/revision"] = str(
                    int(ann.get("deployment.kubernetes.io/revision", "1")) + 1
                )
            tx.put(rtype.plural, patched)
            if rtype.plural == "nodes":
                sim.loops.node_changed(name)
            elif rtype.plural == "deployments":
                sim.loops.deployment_patched(namespace, name, before, patched)
            elif rtype.plural == "poddisruptionbudgets" and sub != "status":
                sim.loops.pdbs_changed(namespace)
        result = sim.store.get_raw(rtype.plural, key_ns, name)
        assert result is not None
        self._send(200, b"{" + rtype.kind_header() + result[1:], warnings=warnings)

    @staticmethod
    def _apply_subresource_rules(
        rtype: ResourceType, current: JsonDict, patched: JsonDict, sub: str | None
    ) -> JsonDict:
        """Main resource ignores status; /status changes only status (real strategy rules)."""
        for immutable in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if immutable in current["metadata"]:
                patched.setdefault("metadata", {})[immutable] = current["metadata"][immutable]
        for server_owned in ("generation",):
            if server_owned in current["metadata"]:
                patched["metadata"][server_owned] = current["metadata"][server_owned]
        patched["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
        if "status" not in rtype.subresources:
            return patched
        if sub == "status":
            result = json.loads(json.dumps(current))
            result["status"] = patched.get("status", {})
            return result
        if "status" in current:
            patched["status"] = current["status"]
        else:
            patched.pop("status", None)
        return patched

    @staticmethod
    def _with_kind(rtype: ResourceType, obj: JsonDict) -> bytes:
        return json.dumps(
            {"kind": rtype.kind, "apiVersion": rtype.api_version, **obj}, separators=(",", ":")
        ).encode()

    def _delete(self, rtype: ResourceType, namespace: str, name: str, body: bytes = b"") -> None:
        sim = self.sim
        key_ns = namespace if rtype.namespaced else ""
        if rtype.plural not in (
            "nodes",
            "nodeclaims",
            "pods",
            "poddisruptionbudgets",
            "nodediagnostics",
        ):
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        with sim.loops.api_txn() as tx:
            current = tx.get(rtype.plural, key_ns, name)
            if current is None:
                raise not_found(rtype, name)
            self._check_preconditions(rtype, name, current, body)
            if self._query.get("dryRun") == "All":
                result = self._dry_run_deleted(rtype, current, body)
            elif rtype.plural == "nodediagnostics":
                # no finalizers: gone at once; a running capture ends unseen (the agent's
                # handleDelete cancels packet captures only, a log capture just finishes)
                tx.delete(rtype.plural, key_ns, name)
                result = current
            elif rtype.plural == "poddisruptionbudgets":
                # No finalizers: gone at once (generic registry Delete), and the disruption
                # controller forgets it.
                tx.delete(rtype.plural, key_ns, name)
                sim.loops.pdbs_changed(namespace)
                result = current
            elif rtype.plural == "nodeclaims":
                sim.loops.nodeclaim_deleted(name)
                result = tx.get(rtype.plural, key_ns, name) or current
            elif rtype.plural == "nodes":
                stays = sim.loops.node_deleted(name)
                result = (tx.get(rtype.plural, key_ns, name) if stays else None) or current
                if result.get("metadata", {}).get("deletionTimestamp") is None:
                    result["metadata"]["deletionTimestamp"] = ts(sim.loops.now)
            else:
                deleted = sim.loops.delete_pod(namespace, name, self._grace_period(body))
                if deleted is None:
                    raise not_found(rtype, name)
                result = deleted
        if rtype.plural != "pods" and not result.get("metadata", {}).get("deletionTimestamp"):
            # Gone at once: the generic store answers a Status naming it, unless the kind
            # returns the deleted object (pods do) (k8s.io/apiserver v0.34.0
            # pkg/registry/generic/registry/store.go finalizeDelete)
            meta = result.get("metadata") or {}
            details = {"name": meta.get("name"), "kind": rtype.plural, "uid": meta.get("uid")}
            if rtype.group:
                details["group"] = rtype.group
            success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
            self._send_json(200, {**success, "details": details})
            return
        self._send(200, self._with_kind(rtype, result))

    def _dry_run_deleted(self, rtype: ResourceType, current: JsonDict, body: bytes) -> JsonDict:
        """What a dryRun=All DELETE answers: the object as the delete would leave it, with
        nothing stored and no controller told (k8s.io/apiserver v0.34.0
        pkg/registry/generic/registry/store.go Delete skips only the storage write on a dry
        run; pkg/registry/rest/delete.go BeforeDelete sets the deletion timestamp of a graceful
        delete, store.go markAsDeleting that of an object finalizers keep)."""
        result = copy.deepcopy(current)
        meta = result.setdefault("metadata", {})
        if meta.get("deletionTimestamp") is not None:
            return result
        now = self.sim.loops.now
        if rtype.plural == "pods":
            grace = self._grace_period(body)
            spec = result.get("spec") or {}
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", POD_TERMINATION_GRACE))
            # pkg/registry/core/pod/strategy.go CheckGracefulDelete: an unbound or finished pod
            # goes at once
            phase = (result.get("status") or {}).get("phase")
            if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
                grace = 0
            meta["deletionTimestamp"] = ts(now + grace)
            meta["deletionGracePeriodSeconds"] = grace
        elif meta.get("finalizers"):
            meta["deletionTimestamp"] = ts(now)
            meta["deletionGracePeriodSeconds"] = 0
        return result

    @staticmethod
    def _check_preconditions(
        rtype: ResourceType, name: str, current: JsonDict, body: bytes
    ) -> None:
        """DeleteOptions.preconditions (uid, resourceVersion): a mismatch is a 409 and deletes
        nothing (k8s.io/apiserver v0.34.0 pkg/storage/interfaces.go Preconditions.Check, turned
        into a Conflict by pkg/registry/generic/registry/store.go Delete)."""
        try:
            options = json.loads(body) if body else {}
        except ValueError:
            raise ApiError(400, "BadRequest", "error decoding DeleteOptions") from None
        wanted = (options.get("preconditions") or {}) if isinstance(options, dict) else {}
        meta = current.get("metadata") or {}
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            if wanted.get(field) is not None and wanted[field] != meta.get(field):
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {rtype.qualified} "{name}": Precondition '
                    f"failed: {label} in precondition: {wanted[field]}, {label} in object meta: "
                    f"{meta.get(field)}",
                    {"name": name, "kind": rtype.plural,
                     **({"group": rtype.group} if rtype.group else {})},
                )  # fmt: skip

    def _grace_period(self, body: bytes) -> int | None:
        """DeleteOptions.gracePeriodSeconds from the query or the body (None: the pod's own)."""
        text = self._query.get("gracePeriodSeconds")
        if text is None and body:
            try:
                options = json.loads(body)
            except ValueError:
                raise ApiError(400, "BadRequest", "error decoding DeleteOptions") from None
            value = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
            text = None if value is None else str(value)
        if text is None:
            return None
        try:
            return int(text)
        except ValueError:
            raise ApiError(400, "BadRequest", f'invalid gracePeriodSeconds "{text}"') from None

    def _evict(self, namespace: str, name: str, body: bytes) -> None:
        sim = self.sim
        rtype = RESOURCES["pods"]
        try:
            eviction = json.loads(body or b"{}")
        except ValueError as exc:
            raise ApiError(400, "BadRequest", f"error decoding eviction: {exc}") from None
        if not isinstance(eviction, dict) or eviction.get("kind", "Eviction") != "Eviction":
            raise ApiError(400, "BadRequest", "the body must be a policy/v1 Eviction")
        body_name = (eviction.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        with sim.loops.api_txn() as tx:
            pod = tx.get("pods", namespace, name)
            if pod is None:
                raise not_found(rtype, name)
            options = eviction.get("deleteOptions") or {}
            grace = options.get("gracePeriodSeconds") if isinstance(options, dict) else None
            pdb = sim.loops.evict_pod(namespace, name, None if grace is None else int(grace))
            if pdb is not None:
                pdb_status = pdb.get("status", {})
                cause = (
                    f"The disruption budget {pdb['metadata']['name']} needs "
                    f"{pdb_status.get('desiredHealthy', 0)} healthy pods and has "
                    f"{pdb_status.get('currentHealthy', 0)} currently"
                )
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
                )
        self._send_json(
            201,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            },
        )
