"""SimCluster: a scenario, its controllers and the HTTP server, with a sim clock."""

from __future__ import annotations

import base64
import collections
import contextlib
import copy
import json
import re
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from mignurse.cluster import SIM_EXTENSION
from mignurse.gpu import clusterconfig
from mignurse.sim import crds, nodediag, operator_config
from mignurse.sim.apiserver import SimServer
from mignurse.sim.controllers import ControlLoops
from mignurse.sim.crds import CrdSet
from mignurse.sim.nodediag import NodeDiagnosticAgent
from mignurse.sim.objects import build_namespace, stable_uuid, ts
from mignurse.sim.resources import RESOURCES
from mignurse.sim.scenario_spec import Scenario
from mignurse.sim.store import Store
from mignurse.sim.tls import ServingCert, make_serving_cert

TICK_SECONDS = 0.05
REQUEST_LOG_SIZE = 10000
KUBECTL_AGE_HOURS = 24.0


@dataclass
class Fault:
    """An injected API failure (see SimCluster.fail)."""

    method: str
    path: re.Pattern[str]
    code: int
    times: int | None
    hits: int = 0
    retry_after: int | None = None  # seconds, for the Retry-After header of a 429 or 503


@dataclass
class Race:
    """Another client's write that lands just before a matching request (see SimCluster.race)."""

    method: str
    path: re.Pattern[str]
    write: Callable[[SimCluster], object]
    times: int | None
    conflict: bool
    hits: int = 0


class SimCluster:
    """A local Kubernetes API server that behaves like EKS with Karpenter.

    `speed` is sim seconds per wall second; 0 means a manual clock moved only by advance().
    The scenario's warmup runs in the constructor, so the state at `start` is ready at once.
    """

    def __init__(
        self,
        scenario: Scenario,
        *,
        speed: float = 1.0,
        start: datetime | None = None,
        port: int = 0,
        token: str | None = None,
        node_diagnostics: bool | None = None,
    ) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self.scenario = scenario
        self.speed = speed
        self.port = port
        self.token = token or secrets.token_urlsafe(24)
        # Wall seconds between BOOKMARKs on an idle watch: the watch cache sends one a minute
        # (k8s.io/apiserver v0.32 pkg/storage/cacher/cacher.go defaultBookmarkFrequency).
        self.bookmark_interval = 60.0
        self.unavailable = False  # see outage()
        self._faults: list[Fault] = []  # see fail()
        self._races: list[Race] = []  # see race()
        self.restarts = 0  # see restart()
        start = start or datetime.now(UTC)
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware")
        self.store = Store()
        self.loops = ControlLoops(scenario, self.store, start.timestamp())
        self.store.clock = lambda: self.loops.now
        self.crds: CrdSet | None = (
            crds.for_version(scenario.karpenter.version) if scenario.karpenter else None
        )
        self._requests: collections.deque[dict[str, Any]] = collections.deque(
            maxlen=REQUEST_LOG_SIZE
        )
        self._audit = 0
        # The faults, races, request log and audit ids: not the store's lock, which the
        # controllers and every list hold (each request takes this one four times).
        self._books = threading.Lock()
        self.tls: ServingCert = make_serving_cert(scenario.cluster_name)
        self._server: SimServer | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        if scenario.generate is not None:
            from mignurse.sim import generate

            generate.build(self.loops)
        else:
            self.loops.bootstrap()
            self.loops.run_until(self.loops.start)
        if self.crds is not None:
            self._install_karpenter_crds(self.crds)
        if scenario.configmaps or scenario.cluster_policies:
            self._install_operator_objects()
        # the node monitoring agent's NodeDiagnostic (mignurse.sim.nodediag), installed with
        # the agent: off (no CRD) on a cluster none of whose pools runs it, or when asked
        if node_diagnostics is None:
            node_diagnostics = any(p.node_monitoring_agent for p in scenario.pools)
        self.node_diagnostics: NodeDiagnosticAgent | None = None
        if node_diagnostics:
            self.node_diagnostics = NodeDiagnosticAgent(self)
            with self.store.lock:
                crd = nodediag.served_crd(ts(self.loops.begin))
                self.store.put("customresourcedefinitions", crd)

    def _install_karpenter_crds(self, crd_set: CrdSet) -> None:
        """The CRDs the chart installed and the EC2NodeClasses the NodePools name."""
        with self.store.lock:
            nodepools = self.store.all("nodepools")
            first = min(
                (np["metadata"]["creationTimestamp"] for np in nodepools),
                default=ts(self.loops.now),
            )
            for plural in crds.PLURALS:
                crd = crd_set.served_object(plural, first, "0")
                if not self.store.exists("customresourcedefinitions", "", crd["metadata"]["name"]):
                    self.store.put("customresourcedefinitions", crd)
            classes = sorted(
                {np["spec"]["template"]["spec"]["nodeClassRef"]["name"] for np in nodepools}
            )
            for name in classes:
                if not self.store.exists("ec2nodeclasses", "", name):
                    self.store.put("ec2nodeclasses", crds.ec2nodeclass(self.scenario, name, first))

    def _install_operator_objects(self) -> None:
        """The scenario's ConfigMaps (with a namespace where the cluster has none of that
        name) and ClusterPolicies, with the CRD the GPU operator's chart installs."""
        created = ts(self.loops.begin - 86400 * 60)
        with self.store.lock:
            for cm in self.scenario.configmaps:
                namespace = cm["metadata"]["namespace"]
                if not self.store.exists("namespaces", "", namespace):
                    uid = stable_uuid("namespace", namespace)
                    born = self.loops.begin - 86400 * 90
                    self.store.put("namespaces", build_namespace(namespace, uid, born))
                self.store.put("configmaps", operator_config.as_stored(cm, "configmaps", created))
            policies = self.scenario.cluster_policies
            if policies:
                namespace = clusterconfig.operator_namespace(policies[0]) or "gpu-operator"
                crd = operator_config.served_crd(created, namespace)
                self.store.put("customresourcedefinitions", crd)
            for policy in policies:
                stored = operator_config.as_stored(policy, operator_config.PLURAL, created)
                self.store.put(operator_config.PLURAL, stored)

    @staticmethod
    def wall_anchored_start(speed: float, hours: float = KUBECTL_AGE_HOURS) -> datetime:
        """A start that keeps a clock running `speed` times faster than the wall clock behind
        it for `hours` of serving: kubectl computes `describe` and `events` ages from the wall
        clock and prints `<invalid>` for a time in its future."""
        lead = max(0.0, speed - 1.0) * hours * 3600.0
        return datetime.now(UTC) - timedelta(seconds=lead)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> SimCluster:
        if self._server is not None:
            return self
        self._stop.clear()
        self._threads = [self._serve(self.port, f"sim-api-{self.scenario.name}")]
        if self.speed > 0:
            ticker = threading.Thread(target=self._tick, name="sim-clock", daemon=True)
            ticker.start()
            self._threads.append(ticker)
        return self

    def stop(self) -> None:
        self._stop.set()
        server, self._server = self._server, None
        if server is not None:
            server.stopping = True
            self.store.wake_watchers()
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _tick(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK_SECONDS):
            now = time.monotonic()
            self.advance((now - last) * self.speed)
            last = now

    # ------------------------------------------------------------------ clock

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.loops.now, tz=UTC)

    def advance(self, seconds: float) -> None:
        """Run the controllers `seconds` of sim time forward (deterministic for speed=0)."""
        if seconds < 0:
            raise ValueError("the sim clock only moves forward")
        with self.store.lock:
            self.loops.run_until(self.loops.now + seconds)

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """The API server is down inside the block: every request gets 503 and open
        watches end, as during a control-plane restart; time can still be advanced."""
        self.unavailable = True
        self.store.wake_watchers()
        try:
            yield
        finally:
            self.unavailable = False

    def fail(
        self,
        method: str,
        path: str,
        *,
        code: int = 500,
        times: int | None = 1,
        retry_after: int | None = None,
    ) -> Fault:
        """Answer the next `times` requests (None: all) whose method matches and whose path
        matches the regular expression `path` (searched) with `code` and the Status the real
        server sends for it (500 InternalError, 503 ServiceUnavailable, 429 TooManyRequests as
        API Priority and Fairness rejects a request, with `Retry-After: retry_after`, else 1):
        a fault in the middle of a run, for the runbook engine's tests."""
        fault = Fault(method.upper(), re.compile(path), code, times, retry_after=retry_after)
        with self._books:
            self._faults.append(fault)
        return fault

    def race(
        self,
        method: str,
        path: str,
        write: Callable[[SimCluster], object],
        *,
        times: int | None = 1,
        conflict: bool = True,
    ) -> Race:
        """Another client writes (`write(sim)`) just before the next `times` requests whose
        method and path match are served: the request meets the object as the other write left
        it. With `conflict`, the request is then answered 409 Conflict as one that carried the
        resourceVersion it had read is (the object has been modified): the concurrent writer
        between a step's read and its write."""
        race = Race(method.upper(), re.compile(path), write, times, conflict)
        with self._books:
            self._races.append(race)
        return race

    def clear_faults(self) -> None:
        with self._books:
            self._faults.clear()
            self._races.clear()

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._books:
            for fault in self._faults:
                if fault.method in (method, "*") and fault.path.search(path):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self._faults.remove(fault)
                    fault.hits += 1
                    return fault
        return None

    def _race_for(self, method: str, path: str) -> Race | None:
        """The race that matches this request (its write already made), or None."""
        with self._books:
            race = next(
                (r for r in self._races if r.method in (method, "*") and r.path.search(path)),
                None,
            )
            if race is None:
                return None
            if race.times is not None:
                race.times -= 1
                if race.times <= 0:
                    self._races.remove(race)
            race.hits += 1
        race.write(self)  # outside the lock: the other client's write takes it itself
        return race

    def restart(self, down: float = 2.0) -> None:
        """An API server restart: every connection is dropped (open watches end without a
        closing frame, requests in flight get no answer), new connections are refused for
        `down` wall seconds, then the server listens again on the same port with the same
        certificate, token and objects, as a control-plane instance does when it comes back."""
        server = self._server
        if server is None:
            raise RuntimeError("the simulator is not started; call start()")
        port = server.server_address[1]
        server.stopping = True
        self.store.wake_watchers()
        server.shutdown()
        server.server_close()
        server.drop_connections()
        for thread in self._threads[:1]:
            thread.join(timeout=5)
        self.restarts += 1
        if self._stop.wait(max(0.0, down)):
            return  # stopped meanwhile
        self._threads[0] = self._serve(port, f"sim-api-{self.scenario.name}-{self.restarts}")

    def _serve(self, port: int, name: str) -> threading.Thread:
        """A new API server on `port` (0: any free one), served from a thread named `name`."""
        self._server = SimServer(self, port, self.tls.server_context())
        serving = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=name,
            daemon=True,
        )
        serving.start()
        return serving

    def compact(self) -> None:
        """Drop all watch history, like an etcd compaction."""
        self.store.compact()

    # ------------------------------------------------------------------ access

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the simulator is not started; call start()")
        return f"https://127.0.0.1:{self._server.server_address[1]}"

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context that trusts this simulator's CA, for Python clients."""
        return self.tls.client_context()

    def kubeconfig(self, context: str | None = None) -> dict[str, Any]:
        context = context or self.scenario.context_name
        cluster = self.scenario.cluster_name
        user = self.scenario.rbac_user.replace(":", "-")
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [
                {
                    "name": cluster,
                    "cluster": {
                        "server": self.url,
                        "certificate-authority-data": base64.b64encode(self.tls.ca_pem).decode(),
                        # Tells `mignurse collect` the nodes are simulated: it reaches them
                        # through local sandboxes instead of SSM or SSH.
                        "extensions": [
                            {"name": SIM_EXTENSION, "extension": {"scenario": self.scenario.name}}
                        ],
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
            "current-context": context,
        }

    def write_kubeconfig(self, path: str | Path, context: str | None = None) -> Path:
        """The kubeconfig, 0600 (it holds the token), written as mignurse writes its own
        files (`paths.open_private`): never through a link at `path`, never blocked on a
        FIFO; anything but a regular file there is StateFileError."""
        from mignurse.paths import write_private

        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_private(target, yaml.safe_dump(self.kubeconfig(context), sort_keys=False).encode())
        return target

    def objects(self, kind: str) -> list[dict[str, Any]]:
        if kind not in RESOURCES:
            raise KeyError(f"unknown kind {kind!r}; known: {', '.join(RESOURCES)}")
        return self.store.all(kind)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._books:
            return copy.deepcopy(list(self._requests))

    def _log_request(self, method: str, path: str, query: dict[str, str], status: int) -> None:
        with self._books:
            self._requests.append(
                {"method": method, "path": path, "query": dict(query), "status": status}
            )

    def _audit_id(self) -> str:
        with self._books:
            self._audit += 1
            return f"{self._audit:08x}-sim"

    def dump(self, kind: str) -> str:
        """`kubectl get <kind> -o json` of the current state (handy for fixtures)."""
        rtype = RESOURCES[kind]
        items = [
            {"apiVersion": rtype.api_version, "kind": rtype.kind, **o} for o in self.objects(kind)
        ]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2)
