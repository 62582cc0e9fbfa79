"""The `resource.k8s.io` group as an EKS control plane serves it at each Kubernetes release.

Which versions are on:
- 1.34: `v1` only. DRA is GA and on by default; the beta versions need `--runtime-config`
  (kubernetes.io/blog/2025/09/01/kubernetes-v1-34-dra-updates; kubernetes v1.34
  test/integration/dra/dra_test.go turns `v1beta1`/`v1beta2` on explicitly, KEP-3136 keeps
  new beta APIs off by default).
- 1.33: the beta API, `v1beta2` (new in 1.33, preferred) and `v1beta1`: EKS turns it on
  (docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions-standard.html, "Kubernetes
  1.33: The Dynamic Resource Allocation beta Kubernetes API is enabled").
- 1.32 and older: none (EKS leaves the beta API off).
A scenario may name the versions itself (`cluster.resourceApiVersions`), as a control plane
with other `--runtime-config` would serve them. Preference follows kube-apiserver's version
priority: v1, v1beta2, v1beta1 (pkg/apis/resource/install/install.go).

Objects are stored as `v1` (the storage version from 1.34) and converted on the way out. The
shapes differ only where mignurse and kubectl look (kubernetes v1.34
staging/src/k8s.io/api/resource/{v1,v1beta2,v1beta1}/types.go): in `v1beta1` a device's
attributes, capacity and the rest sit under `basic`, and a claim's request carries
`deviceClassName`, `selectors`, `allocationMode`, `count` itself instead of under `exactly`.
"""

from __future__ import annotations

import json
from typing import Any

JsonDict = dict[str, Any]
GROUP = "resource.k8s.io"
STORAGE_VERSION = "v1"
PRIORITY = ("v1", "v1beta2", "v1beta1")
PLURALS = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")


def minor_of(kubernetes_version: str) -> int:
    """`1.34` → 34; 0 when it cannot be read."""
    parts = kubernetes_version.strip().lstrip("v").split(".")
    try:
        return int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0


def default_versions(kubernetes_version: str) -> tuple[str, ...]:
    """The versions an EKS cluster of that release serves, most preferred first."""
    minor = minor_of(kubernetes_version)
    if minor >= 34:
        return ("v1",)
    if minor == 33:
        return ("v1beta2", "v1beta1")
    return ()


def ordered(versions: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Versions in kube-apiserver's priority order (the first is the preferred one)."""
    return tuple(v for v in PRIORITY if v in versions)


def _request_to_v1beta1(request: JsonDict) -> JsonDict:
    out = {k: v for k, v in request.items() if k != "exactly"}
    exactly = request.get("exactly")
    if isinstance(exactly, dict):
        out.update(exactly)
    return out


def _claim_spec_to_v1beta1(spec: JsonDict) -> JsonDict:
    devices = spec.get("devices")
    if not isinstance(devices, dict) or not isinstance(devices.get("requests"), list):
        return spec
    requests = [_request_to_v1beta1(r) if isinstance(r, dict) else r for r in devices["requests"]]
    return {**spec, "devices": {**devices, "requests": requests}}


def _device_to_v1beta1(device: JsonDict) -> JsonDict:
    basic = {k: v for k, v in device.items() if k != "name"}
    return {"name": device.get("name"), "basic": basic}


def convert(plural: str, obj: JsonDict, version: str) -> JsonDict:
    """A stored (v1) object as `version` shows it; kind and apiVersion are left to the caller."""
    if version != "v1beta1":
        return obj  # v1beta2 has v1's shape for every field simulated here
    out = dict(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return out
    if plural == "resourceslices" and isinstance(spec.get("devices"), list):
        out["spec"] = {
            **spec,
            "devices": [
                _device_to_v1beta1(d) if isinstance(d, dict) else d for d in spec["devices"]
            ],
        }
    elif plural == "resourceclaims":
        out["spec"] = _claim_spec_to_v1beta1(spec)
    elif plural == "resourceclaimtemplates" and isinstance(spec.get("spec"), dict):
        out["spec"] = {**spec, "spec": _claim_spec_to_v1beta1(spec["spec"])}
    return out


def converter(plural: str, version: str) -> Any:
    """bytes → bytes for list items, watch objects and gets; None when nothing changes."""
    if version == STORAGE_VERSION or version == "v1beta2":
        return None

    def run(raw: bytes) -> bytes:
        converted = convert(plural, json.loads(raw), version)
        return json.dumps(converted, separators=(",", ":"), ensure_ascii=False).encode()

    return run
