"""Helpers shared by the sim tests: a kubernetes client and raw HTTP against a SimCluster."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from kubernetes import client, config

from mignurse.sim import SimCluster


def kube(sim: SimCluster) -> client.ApiClient:
    return config.new_client_from_config_dict(sim.kubeconfig())


class Http:
    """Raw HTTP against the sim, returning (status, decoded JSON or text)."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        token: str | None = "default",
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type}
        if token is not None:
            headers["Authorization"] = f"Bearer {self.sim.token if token == 'default' else token}"
        req = urllib.request.Request(self.sim.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.sim.ssl_context()) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _decode(err.read())

    def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        return self.request("GET", path, **kw)

    def watch(self, path: str) -> list[dict[str, Any]]:
        """Read a whole (finite) watch stream: pass timeoutSeconds in the query."""
        req = urllib.request.Request(
            self.sim.url + path, headers={"Authorization": f"Bearer {self.sim.token}"}
        )
        with urllib.request.urlopen(req, timeout=30, context=self.sim.ssl_context()) as resp:
            return [json.loads(line) for line in resp.read().splitlines() if line.strip()]


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")
