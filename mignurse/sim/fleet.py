"""Several simulated clusters in one process, and contexts that fail as real ones do, in one
kubeconfig (`mignurse sim serve --scenario a --scenario b --unreachable c …`).

The failing kinds:
- `unreachable`: a port on 127.0.0.1 that is bound and not listening, so every connection
  is refused (RST) for as long as this process runs;
- `hung`: a port that listens and never accepts: the kernel completes the TCP handshake and
  the TLS handshake then waits for ever;
- `expired`: the first scenario's API server, reached through an `aws eks get-token`
  credential plugin that fails as the aws CLI does once the AWS SSO session has expired
  (a script written beside the kubeconfig, see `EXPIRED_SCRIPT`);
- `forbidden`: the healthy scenario served with RBAC refusing its user `list nodes`.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from mignurse.sim.scenario import load_scenario
from mignurse.sim.scenario_spec import RbacDeny, Scenario
from mignurse.sim.simcluster import SimCluster

# What `aws eks get-token` writes and how it ends once the SSO session is over: botocore's
# UnauthorizedSSOTokenError (boto/botocore botocore/exceptions.py, 1.44.18), printed by the
# aws CLI between two line feeds (aws/aws-cli awscli/utils.py `write_exception`), exit 255
# (awscli/clidriver.py: any exception the CLI does not handle otherwise).
EXPIRED_MESSAGE = (
    "The SSO session associated with this profile has expired or is otherwise invalid. To "
    "refresh this SSO session run aws sso login with the corresponding profile."
)
EXPIRED_SCRIPT = f"""#!/bin/sh
# Stands in for `aws eks get-token` after the AWS SSO session expired (mignurse sim serve).
printf '\\n%s\\n' '{EXPIRED_MESSAGE}' >&2
exit 255
"""


class SimFleet:
    """Simulated clusters served side by side and the failing contexts beside them."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.sims: list[SimCluster] = []
        self.described: list[tuple[str, str]] = []  # (context, what it is), in order
        self._entries: list[dict[str, Any]] = []  # (cluster, user, context) per context
        self._sockets: list[socket.socket] = []

    def serve(
        self, scenario: Scenario, *, speed: float, port: int = 0, start: datetime | None = None
    ) -> SimCluster:
        sim = SimCluster(scenario, speed=speed, port=port, start=start).start()
        self.sims.append(sim)
        self._add(sim.kubeconfig(), scenario.context_name)
        self.described.append((scenario.context_name, f"scenario {scenario.name!r} at {sim.url}"))
        return sim

    def fail(self, kind: str, name: str, *, speed: float, start: datetime | None = None) -> None:
        if kind == "forbidden":
            healthy = load_scenario("healthy")
            denied = dataclasses.replace(
                healthy, rbac_deny=(*healthy.rbac_deny, RbacDeny("list", "nodes"))
            )
            sim = SimCluster(denied, speed=speed, start=start).start()
            self.sims.append(sim)
            self._add(sim.kubeconfig(name), name)
            self.described.append((name, f"RBAC refuses list nodes, at {sim.url}"))
            return
        if kind == "expired":
            if not self.sims:
                raise ValueError("an expired context needs a scenario served first")
            config = self.sims[0].kubeconfig(name)
            config["users"] = [{"name": name, "user": {"exec": self._expired_plugin(name)}}]
            config["contexts"][0]["context"]["user"] = name
            self._add(config, name)
            self.described.append((name, f"credentials expired (aws sso login --profile {name})"))
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        if kind == "hung":
            listener.listen(64)  # never accepted: connections wait in the backlog
        self._sockets.append(listener)
        url = f"https://127.0.0.1:{listener.getsockname()[1]}"
        words = "refuses connections" if kind == "unreachable" else "accepts and never answers"
        config = {
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": url,
                        "certificate-authority-data": base64.b64encode(
                            self.sims[0].tls.ca_pem if self.sims else b""
                        ).decode(),
                    },
                }
            ],
            "users": [{"name": name, "user": {"token": "sim-" + kind}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        }
        self._add(config, name)
        self.described.append((name, f"{url} {words}"))

    def _expired_plugin(self, name: str) -> dict[str, Any]:
        folder = self.kubeconfig.parent / f"{self.kubeconfig.name}.bin"
        folder.mkdir(mode=0o700, exist_ok=True)
        script = folder / "aws"
        script.write_text(EXPIRED_SCRIPT)
        script.chmod(0o700)
        return {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(script),
            "args": ["--region", "us-west-2", "eks", "get-token", "--cluster-name", name],
            "env": [{"name": "AWS_PROFILE", "value": name}],
            "interactiveMode": "Never",
        }

    def _add(self, config: dict[str, Any], context: str) -> None:
        """A context's cluster and user, renamed where another context took the name."""
        cluster = config["clusters"][0]
        user = config["users"][0]
        taken_clusters = {e["cluster"]["name"] for e in self._entries}
        taken_users = {e["user"]["name"] for e in self._entries}
        if cluster["name"] in taken_clusters:
            cluster = {**cluster, "name": f"{cluster['name']}-{context}"}
        if user["name"] in taken_users:
            user = {**user, "name": f"{user['name']}-{context}"}
        entry = {"cluster": cluster["name"], "user": user["name"]}
        self._entries.append(
            {"cluster": cluster, "user": user, "context": {"name": context, "context": entry}}
        )

    def write_kubeconfig(self) -> Path:
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [e["cluster"] for e in self._entries],
            "users": [e["user"] for e in self._entries],
            "contexts": [e["context"] for e in self._entries],
            "current-context": self._entries[0]["context"]["name"],
        }
        # 0600, never through a link or into a FIFO at the path (as SimCluster writes its own)
        from mignurse.paths import write_private

        write_private(self.kubeconfig, yaml.safe_dump(document, sort_keys=False).encode())
        return self.kubeconfig

    def stop(self) -> None:
        for sim in self.sims:
            sim.stop()
        for listener in self._sockets:
            with contextlib.suppress(OSError):
                listener.close()


# `mignurse demo --clusters N`: the clusters in the order they are added. The first four are
# the ones an on-call engineer meets on a bad night: a pool in Karpenter's repair loop, a new
# MIG node that mig-manager's hook left NotReady, a calm cluster, and one that cannot be
# reached; past four, the other troubles the scenarios hold.
DEMO_CLUSTERS: tuple[str, ...] = (
    "dcgm-repair-loop",
    "mig-hook-notready",
    "healthy",
    "unreachable:sim-eu-central-1",
    "mng-dcgm-repair-loop",
    "gpu-plugin-crashloop",
    "preflight-dcgm-g5g",
    "mig-dra-hook-notready",
)
DEMO_MAX_CLUSTERS = len(DEMO_CLUSTERS)


def serve_fleet(
    kubeconfig: Path,
    scenarios: list[Scenario],
    failing: list[tuple[str, str]] = [],  # noqa: B006 (read, never changed)
    *,
    speed: float,
    start: datetime | None = None,
    port: int = 0,
) -> SimFleet:
    """The scenarios served side by side on one clock (from `start`, else the wall clock's;
    the first on `port`), then the failing contexts as (kind, name), their one kubeconfig
    written: on failure, whatever was started is stopped before the error is raised."""
    fleet = SimFleet(kubeconfig)
    try:
        start = start or SimCluster.wall_anchored_start(speed)
        for index, scenario in enumerate(scenarios):
            fleet.serve(scenario, speed=speed, port=port if index == 0 else 0, start=start)
        for kind, name in failing:
            fleet.fail(kind, name, speed=speed, start=start)
        fleet.write_kubeconfig()
    except BaseException:
        fleet.stop()
        raise
    return fleet


def serve_demo(
    kubeconfig: Path, clusters: int, *, speed: float, start: datetime | None = None
) -> SimFleet:
    """The first `clusters` of DEMO_CLUSTERS, as `serve_fleet` serves them."""
    if not 1 <= clusters <= DEMO_MAX_CLUSTERS:
        raise ValueError(f"the demo serves 1 to {DEMO_MAX_CLUSTERS} clusters, not {clusters}")
    chosen = [entry.partition(":") for entry in DEMO_CLUSTERS[:clusters]]
    scenarios = [load_scenario(kind) for kind, _, name in chosen if not name]
    failing = [(kind, name) for kind, _, name in chosen if name]
    return serve_fleet(kubeconfig, scenarios, failing, speed=speed, start=start)
