"""What the runbook fault trials run: each shipped runbook on each of its backends (`CASES`,
with the scenario, the node, the params and the moments inside its steps where a fault can
land), the faults (`Fault`: a signal, an API fault, a controller fault, a lock fault), and the
matrix of trials (`matrix()`: every point of every case × every signal, with the operator's
move cycling through --resume, --undo and the same command again, then the API, controller and
lock faults). tests/hostile/fault_trials.py runs one trial.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mignurse.model import LABEL_MIG_CONFIG_STATE
from mignurse.runner.schema import default_folder, load_runbook
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario_spec import LifecycleScript, Scenario, Step

SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL", "SIGHUP", "SIGINT×2")
THENS = ("resume", "undo", "again")
NODEPOOL = "karpenter.sh/nodepool"
NODEGROUP = "eks.amazonaws.com/nodegroup"


# -- which runbook, on what, and where its steps can be caught ---------------------------------


def first_in(pool: str, label: str = NODEPOOL) -> Callable[[SimCluster], str]:
    def pick(sim: SimCluster) -> str:
        return sorted(
            n["metadata"]["name"]
            for n in sim.objects("nodes")
            if n["metadata"]["labels"].get(label) == pool
        )[0]

    return pick


def ready_mig(sim: SimCluster) -> str:
    """A Ready MIG node whose layout is applied (reapply refuses a NotReady one)."""
    return sorted(
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) == "success"
    )[0]


def _not_ready_mig(sim: SimCluster) -> str:
    return sorted(
        n["metadata"]["name"]
        for n in sim.objects("nodes")
        if n["metadata"]["labels"].get(NODEPOOL) == "gpu-mig"
        and n["metadata"]["labels"].get(LABEL_MIG_CONFIG_STATE) != "success"
    )[0]


def _pool(scenario: Scenario, name: str, **changes: Any) -> Scenario:
    pools = tuple(
        dataclasses.replace(p, **changes) if p.name == name else p for p in scenario.pools
    )
    return dataclasses.replace(scenario, pools=pools)


def _no_consolidation(scenario: Scenario) -> Scenario:
    """gpu-train keeps its drained node: the run, not Karpenter's consolidation, replaces it
    (Karpenter deleting it mid-run is a fault of its own: claim-deleted). Its new nodes take
    200 s to be Ready (150 s to register): the run waits for the replacement, and a signal
    can land in that wait."""
    steady = LifecycleScript(None, (Step(after=200.0, ready=True),))
    return _pool(
        scenario,
        "gpu-train",
        consolidate_after="Never",
        register_after=150.0,
        lifecycles=(steady,),
    )


def _never_ready(scenario: Scenario) -> Scenario:
    """gpu-train's new nodes never become Ready (its existing ones are healthy)."""
    scenario = _no_consolidation(scenario)
    (train,) = [p for p in scenario.pools if p.name == "gpu-train"]
    healthy = tuple(
        dataclasses.replace(e, steps=(Step(after=50.0, ready=True),)) for e in train.existing
    )
    broken = LifecycleScript(
        None,
        (
            Step(
                after=50.0,
                ready=False,
                reason="KubeletNotReady",
                message="container runtime is down",
            ),
        ),
    )
    return _pool(scenario, "gpu-train", existing=healthy, lifecycles=(broken,))


@dataclass(frozen=True)
class Moment:
    """A point inside a step where a fault lands: a progress line, and what the cluster needs
    for it (`arm`, before the run) and after it (`then`: the operator clears the cause)."""

    pattern: str
    arm: str = ""  # "pdb": a PodDisruptionBudget that holds the drain
    then: str = ""  # "unpdb": that budget deleted once the fault landed


@dataclass(frozen=True)
class Case:
    """One shipped runbook on one backend, as the trials run it."""

    book: str
    scenario: str
    speed: float
    node: Callable[[SimCluster], str]
    params: Mapping[str, str] = field(default_factory=dict)
    first: str = ""  # run to completion first (a resume needs a pause)
    cluster: bool = False  # the lock is on the kube-system Namespace
    aws: str = ""  # "eks": a node group in moto; "asg": the node's instance in an ASG
    edit: Callable[[Scenario], Scenario] | None = None
    moments: Mapping[str, Moment] = field(default_factory=dict)
    settle: bool = False  # read back after SETTLE sim seconds (a replacement's health)
    only: tuple[str, ...] = ()  # signals land at these points alone (a variant of a case)
    mig_instances: int = 4  # reapply: the MIG instances per GPU a clean run leaves


_TRAIN_PDB = Moment(r"^  drain: \d+ pod\(s\) refused by their disruption budget", "pdb", "unpdb")
_WAITING = Moment(r"^  wait-replacement: waiting for a replacement")
CASES: dict[str, Case] = {
    "cordon": Case("cordon", "healthy", 0, first_in("gpu-train")),
    "uncordon": Case("uncordon", "healthy", 0, first_in("gpu-train"), first="cordon"),
    "cordon-and-collect": Case(
        "cordon-and-collect", "healthy", 0, first_in("gpu-train"), {"since": "1h"}
    ),
    "pause-node-repair/karpenter": Case(
        "pause-node-repair",
        "dcgm-repair-loop",
        30,
        first_in("gpu-inference"),
        cluster=True,
        moments={"rolling-out": Moment(r"^  pause: .*rolling out")},
    ),
    "pause-node-repair/nodegroup": Case(
        "pause-node-repair",
        "healthy",
        30,
        first_in("ng-gpu-l4", NODEGROUP),
        cluster=True,
        aws="eks",
    ),
    "resume-node-repair/karpenter": Case(
        "resume-node-repair",
        "dcgm-repair-loop",
        30,
        first_in("gpu-inference"),
        first="pause-node-repair",
        cluster=True,
        moments={"rolling-out": Moment(r"^  resume: .*rolling out")},
    ),
    "resume-node-repair/nodegroup": Case(
        "resume-node-repair",
        "healthy",
        30,
        first_in("ng-gpu-l4", NODEGROUP),
        first="pause-node-repair",
        cluster=True,
        aws="eks",
    ),
    "reapply-mig-no-hooks": Case(
        "reapply-mig-no-hooks",
        "mig-1g24gb",
        40,
        ready_mig,
        {"config": "all-1g.24gb", "drain_timeout": "60s", "pods_timeout": "60s"},
        moments={
            "operands-going": Moment(r"^  pause-operands: labelled "),
            "pods-going": Moment(r"^  drain-gpu-pods: evicted "),
            "mode-only": Moment(r"^  apply-layout: \$ .* apply --mode-only "),
            "partitioning": Moment(r"^  apply-layout: \$ .* -d apply -f "),
            "operands-back": Moment(r"^  resume-operands: labelled "),
        },
    ),
    # CDI on (the ClusterPolicy leaves cdi.enabled unset): a signal between the new layout and
    # the management CDI spec made again; the layout changes (all-balanced → inference-mixed)
    "reapply-mig-no-hooks/cdi": Case(
        "reapply-mig-no-hooks",
        "mig-custom-config",
        40,
        first_in("gpu-balanced"),
        {"config": "inference-mixed", "drain_timeout": "60s", "pods_timeout": "60s"},
        moments={"cdi-spec": Moment(r"^  apply-layout: \$ .*nvidia-ctk cdi generate ")},
        only=("cdi-spec",),
        mig_instances=3,  # 3g.40gb + 2g.20gb + 1g.10gb
    ),
    "replace-instance/nodeclaim": Case(
        "replace-instance",
        "healthy",
        30,
        first_in("gpu-train"),
        {"wait": "60s", "drain_timeout": "60s", "since": "1h"},
        edit=_no_consolidation,
        moments={"pdb-wait": _TRAIN_PDB, "replacement-wait": _WAITING},
        settle=True,
    ),
    "replace-instance/asg": Case(
        "replace-instance",
        "healthy",
        30,
        first_in("ng-gpu-l4", NODEGROUP),
        {"wait": "60s", "drain_timeout": "60s", "collect": "false"},
        aws="asg",
        moments={"replacement-wait": _WAITING},
        settle=True,
    ),
}


# Step timeouts are wall-clock seconds: a fault that makes a step run out of time gets a short
# one (the simulated clocks run 30 to 40 times faster than the wall's).
FAULT_PARAMS: dict[str, dict[str, str]] = {
    "pdb-timeout": {"drain_timeout": "6s"},
    "never-ready": {"wait": "20s"},
    "no-capacity": {"wait": "20s"},
    "none-expected": {"wait": "20s"},
}
# The replacement of mig-hook-notready is Ready for 20 sim seconds: at speed 3 that is longer
# than wait-replacement's 5-second poll, so the run can see it Ready (and believe it).
FAULT_SPEED = {"ready-then-notready": 3.0}


def trial_scenario(spec: TrialSpec) -> Scenario:
    """The cluster a trial runs on: its case's scenario, or the one its fault needs."""
    name = spec.fault.name
    if name in ("ready-then-notready", "none-expected"):
        return load_scenario("mig-hook-notready")
    scenario = load_scenario(CASES[spec.case].scenario)
    edit = _never_ready if name == "never-ready" else CASES[spec.case].edit
    return edit(scenario) if edit is not None else scenario


def trial_speed(spec: TrialSpec) -> float:
    return FAULT_SPEED.get(spec.fault.name, CASES[spec.case].speed)


def trial_node(spec: TrialSpec, sim: SimCluster) -> str:
    """The node a trial acts on: its case's, or the one its fault is about."""
    if spec.fault.name == "ready-then-notready":
        return ready_mig(sim)  # its evicted pod brings a replacement that goes NotReady
    if spec.fault.name == "none-expected":
        return _not_ready_mig(sim)  # no pod on it: nothing brings a replacement
    return CASES[spec.case].node(sim)


def trial_params(spec: TrialSpec) -> dict[str, str]:
    return {**CASES[spec.case].params, **FAULT_PARAMS.get(spec.fault.name, {})}


def step_ids(book: str) -> list[str]:
    return [s.id for s in load_runbook(default_folder() / f"{book}.yaml").steps]


def points(case: str) -> list[str]:
    """Where a signal can land in a case: each step as it starts, each mid-step moment, and
    after the last step (a variant's own points only, where it names them)."""
    if CASES[case].only:
        return list(CASES[case].only)
    return [*step_ids(CASES[case].book), *CASES[case].moments, "end"]


# -- the faults --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What goes wrong, and when (a step id, a moment of the case, "end", or "")."""

    family: str  # signal | api | controller | lock
    name: str
    at: str = ""

    @property
    def label(self) -> str:
        return f"{self.name}@{self.at}" if self.at else self.name


@dataclass(frozen=True)
class TrialSpec:
    case: str
    fault: Fault
    then: str  # resume | undo | again

    @property
    def id(self) -> str:
        return f"{self.case}:{self.fault.label}:{self.then}".replace("×", "x")


# -- the matrix --------------------------------------------------------------------------------


def signal_trials() -> list[TrialSpec]:
    """Every point of every case × every signal; the operator's moves cycle so that each
    point meets resume, undo and again (and each signal all three across the points)."""
    specs = []
    for case in CASES:
        for i, point in enumerate(points(case)):
            for j, sig in enumerate(SIGNALS):
                then = THENS[(i + j) % len(THENS)]
                specs.append(TrialSpec(case, Fault("signal", sig, point), then))
    return specs


API_FAULTS: list[tuple[str, str, str]] = [  # (case, fault, at)
    ("cordon", "409-race", "cordon"),
    ("reapply-mig-no-hooks", "409-race", "pause-operands"),
    ("pause-node-repair/karpenter", "409-race", "pause"),
    ("uncordon", "429-retry-after", "uncordon"),
    ("replace-instance/nodeclaim", "429-retry-after", "delete-nodeclaim"),
    ("resume-node-repair/karpenter", "429-retry-after", "resume"),
    ("cordon-and-collect", "5xx", "cordon"),
    ("reapply-mig-no-hooks", "5xx", "mig-manager-off"),
    ("replace-instance/asg", "5xx", "cordon"),
    ("reapply-mig-no-hooks", "outage", "resume-operands"),
    ("pause-node-repair/karpenter", "outage", "pause"),
    ("replace-instance/nodeclaim", "outage", "wait-replacement"),
    ("reapply-mig-no-hooks", "restart", "drain-gpu-pods"),
    ("replace-instance/nodeclaim", "restart", "drain"),
    ("resume-node-repair/karpenter", "restart", "resume"),
    ("cordon", "restart", "cordon"),
]
CONTROLLER_FAULTS: list[tuple[str, str, str]] = [
    ("replace-instance/nodeclaim", "claim-deleted", "pdb-wait"),
    ("replace-instance/nodeclaim", "node-deleted", "pdb-wait"),
    ("reapply-mig-no-hooks", "claim-deleted", "pods-going"),
    ("replace-instance/nodeclaim", "pdb-timeout", "drain"),
    ("reapply-mig-no-hooks", "pdb-timeout", "drain-gpu-pods"),
    ("replace-instance/nodeclaim", "never-ready", "wait-replacement"),
    ("replace-instance/nodeclaim", "no-capacity", "wait-replacement"),
    ("replace-instance/nodeclaim", "ready-then-notready", "wait-replacement"),
    ("replace-instance/nodeclaim", "none-expected", "wait-replacement"),
]
LOCK_FAULTS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("cordon-and-collect", "two-runs", "collect", ("resume",)),
    ("reapply-mig-no-hooks", "two-runs", "operands-going", ("resume",)),
    ("replace-instance/nodeclaim", "two-runs", "replacement-wait", ("resume",)),
    ("pause-node-repair/karpenter", "two-runs", "rolling-out", ("resume",)),
    ("cordon", "stale-lock", "", ("again", "resume")),
    ("pause-node-repair/karpenter", "stale-lock", "", ("again", "resume")),
    ("reapply-mig-no-hooks", "stale-lock", "", ("again",)),
    ("replace-instance/nodeclaim", "sigstop", "pdb-wait", ("resume", "undo")),
    ("pause-node-repair/karpenter", "sigstop", "rolling-out", ("resume", "undo")),
    ("reapply-mig-no-hooks", "sigstop", "operands-going", ("resume", "undo")),
]


def matrix() -> list[TrialSpec]:
    specs = signal_trials()
    specs += [TrialSpec(c, Fault("api", f, at), "resume") for c, f, at in API_FAULTS]
    specs += [
        TrialSpec(c, Fault("controller", f, at), then)
        for c, f, at in CONTROLLER_FAULTS
        for then in ("resume", "undo")
    ]
    specs += [
        TrialSpec(c, Fault("lock", f, at), then)
        for c, f, at, thens in LOCK_FAULTS
        for then in thens
    ]
    return specs


def by_id(trial_id: str) -> TrialSpec:
    for spec in matrix():
        if spec.id == trial_id:
            return spec
    raise KeyError(trial_id)
