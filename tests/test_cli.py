"""`mignurse nodes` and the error lines, run as a user runs them, against the simulator."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import cliserver
import pytest
import yaml

from mignurse.cli import main
from mignurse.sim import SimCluster, load_scenario
from mignurse.sim.scenario import scenario_path


def gpu_node_names(sim: SimCluster) -> set[str]:
    """GPU nodes by the simulator's own objects: GPU resources or an NVIDIA GPU label."""
    names = set()
    for obj in sim.objects("nodes"):
        labels = obj["metadata"].get("labels") or {}
        capacity = (obj.get("status") or {}).get("capacity") or {}
        if labels.get("karpenter.k8s.aws/instance-gpu-manufacturer") == "nvidia" or any(
            k.startswith("nvidia.com/") for k in capacity
        ):
            names.add(obj["metadata"]["name"])
    return names


def test_json_lists_every_gpu_node_and_no_cpu_node(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sim, kubeconfig = healthy
    assert main(["--kubeconfig", str(kubeconfig), "nodes", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "GPUNodeList"
    assert document["context"] == sim.scenario.context_name
    names = {n["name"] for n in document["nodes"]}
    assert names == gpu_node_names(sim)
    all_nodes = {o["metadata"]["name"] for o in sim.objects("nodes")}
    assert all_nodes - names, "the healthy scenario should have CPU nodes to leave out"
    pools = {n["pool"] for n in document["nodes"]}
    assert "ng-gpu-l4" in pools  # the managed node group is shown beside NodePools
    assert {n["poolKind"] for n in document["nodes"]} >= {"nodepool", "nodegroup"}


def test_flags_work_after_the_command_too(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _sim, kubeconfig = healthy
    assert (
        main(["nodes", "--kubeconfig", str(kubeconfig), "-o", "json", "--nodepool", "ng-gpu-l4"])
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert document["nodes"]
    assert {n["pool"] for n in document["nodes"]} == {"ng-gpu-l4"}


def test_selector_narrows_like_kubectl(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _sim, kubeconfig = healthy
    code = main(
        [
            "--kubeconfig",
            str(kubeconfig),
            "nodes",
            "-o",
            "json",
            "-l",
            "eks.amazonaws.com/nodegroup",
        ]
    )
    assert code == 0
    assert {n["pool"] for n in json.loads(capsys.readouterr().out)["nodes"]} == {"ng-gpu-l4"}


def test_piped_table_and_wide(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sim, kubeconfig = healthy
    assert main(["--kubeconfig", str(kubeconfig), "nodes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "POOL", "TYPE", "STATUS"]
    assert len(lines) - 1 == len(gpu_node_names(sim))
    assert main(["--kubeconfig", str(kubeconfig), "nodes", "-o", "wide"]) == 0
    wide = capsys.readouterr().out.splitlines()
    assert "INSTANCE" in wide[0] and "NODECLAIM" in wide[0]


def test_unknown_pool_is_one_line_naming_the_known_ones(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _sim, kubeconfig = healthy
    assert main(["--kubeconfig", str(kubeconfig), "nodes", "--nodepool", "gpu-typo"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no NodePool or node group named 'gpu-typo'" in err
    assert "ng-gpu-l4" in err


def test_wrong_context_is_one_line_exit_2(
    healthy: tuple[SimCluster, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _sim, kubeconfig = healthy
    assert main(["--kubeconfig", str(kubeconfig), "--context", "nope", "nodes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mignurse: error: context 'nope' not found")
    assert err.count("\n") == 1


def test_unreachable_server_is_one_line_exit_2(
    healthy: tuple[SimCluster, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sim, kubeconfig = healthy
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"
    dead = tmp_path / "dead"
    dead.write_text(yaml.safe_dump(config))
    assert main(["--kubeconfig", str(dead), "nodes"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach the Kubernetes API at http://127.0.0.1:9" in err
    assert err.count("\n") == 1


def test_a_command_starts_without_the_simulator_or_the_collector(tmp_path: Path) -> None:
    """Every `mignurse` call pays for its imports: `nodes` loads neither the simulator nor the
    collector, and its error is still the one line (the user errors are looked up among the
    modules the command loaded)."""
    probe = (
        "import sys\n"
        "from mignurse.cli import main\n"
        f"code = main(['--kubeconfig', {str(tmp_path / 'none')!r}, 'nodes'])\n"
        "print(code, 'mignurse.sim' in sys.modules, 'mignurse.collect.run' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert done.stderr.startswith("mignurse: error: kubeconfig ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "args",
    [["--help"], ["userdata", "--help"], ["probe", "--help"], ["run", "--no-such-flag"]],
    ids=" ".join,
)
def test_commands_that_need_no_cluster_start_without_its_client(args: list[str]) -> None:
    """The kubernetes client, paramiko and botocore are most of a start-up: help, usage errors
    and the commands that talk to no cluster never load them."""
    probe = (
        "import sys\n"
        "from mignurse.cli import main\n"
        "try:\n"
        f"    code = main({args!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "loaded = [m for m in ('kubernetes', 'paramiko', 'botocore') if m in sys.modules]\n"
        "print(code, loaded, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    code, loaded = done.stderr.splitlines()[-1].split(" ", 1)
    assert loaded == "[]", done.stderr
    assert code in ("0", "2"), done.stderr


def test_every_user_error_named_for_the_one_line_exists() -> None:
    import importlib

    from mignurse import cli

    for module, name in cli._USER_ERRORS + cli._RUNBOOK_ERRORS:
        error = getattr(importlib.import_module(module), name)
        assert issubclass(error, Exception), (module, name)
    assert len(cli.user_errors("run")) == len(cli._USER_ERRORS + cli._RUNBOOK_ERRORS)
    assert len(cli.user_errors("nodes")) == len(cli._USER_ERRORS)


def test_rbac_refusal_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load(scenario_path("healthy").read_text())
    data["rbac"] = {"deny": [{"verb": "list", "resource": "nodes"}]}
    path = tmp_path / "denied.yaml"
    path.write_text(yaml.safe_dump(data))
    with SimCluster(load_scenario(str(path)), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        assert main(["--kubeconfig", str(kubeconfig), "nodes"]) == 2
    err = capsys.readouterr().err
    assert "RBAC refused: cannot list nodes" in err
    assert err.count("\n") == 1


def test_bad_scenario_and_speed_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (
        main(["sim", "serve", "--scenario", "no-such", "--kubeconfig-out", str(tmp_path / "k")])
        == 2
    )
    assert capsys.readouterr().err.count("\n") == 1
    # The global --kubeconfig is a cluster to read, never where sim serve writes.
    kubeconfig = tmp_path / "mine"
    assert main(["sim", "serve", "--scenario", "healthy", "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert "needs --kubeconfig-out PATH" in err and f": --kubeconfig-out {kubeconfig}" in err
    assert err.count("\n") == 1 and not kubeconfig.exists()
    assert main(["demo", "--speed", "0"]) == 2
    assert "--speed 0 is out of range" in capsys.readouterr().err


def test_sim_list_names_the_shipped_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("dcgm-repair-loop", "mig-hook-notready", "healthy", "scale-5000"):
        assert name in out


def test_sim_serve_then_nodes_as_a_user_would(tmp_path: Path) -> None:
    """The README's walk-through: serve in one process, query from another."""
    kubeconfig = tmp_path / "k.yaml"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "mignurse", "sim", "serve", "--scenario", "healthy",
         "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("Serving scenario 'healthy' at https://127.0.0.1:"), first
        command = ["--kubeconfig", str(kubeconfig), "nodes", "-o", "json"]
        out = subprocess.run(
            [sys.executable, "-m", "mignurse", *command],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert len(json.loads(out.stdout)["nodes"]) >= 4
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_watch_records_history_until_stopped(tmp_path: Path) -> None:
    """`mignurse watch` as an on-call engineer leaves it running, then stops it with Ctrl-C."""
    from mignurse.cluster.client import ClusterClient
    from mignurse.cluster.history import HistoryStore
    from mignurse.paths import history_file

    with SimCluster(load_scenario("dcgm-repair-loop"), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        state_dir = tmp_path / "state"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = ["--kubeconfig", str(kubeconfig), "watch", "--state-dir", str(state_dir),
                   "--progress-every", "1"]  # fmt: skip
        recorder = subprocess.Popen(
            [sys.executable, "-m", "mignurse", *command],
            stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert recorder.stderr is not None
            lines = []
            for line in recorder.stderr:
                lines.append(line)
                if " listed " in line:
                    break
            assert any("recording context 'sim-dcgm-repair-loop'" in line for line in lines)
            second = subprocess.run(
                [sys.executable, "-m", "mignurse", *command],
                capture_output=True, text=True, timeout=60, env=env,
            )  # fmt: skip
            assert second.returncode == 2, second.stderr
            assert second.stderr.count("\n") == 1  # one line naming the other writer
        finally:
            recorder.send_signal(signal.SIGINT)
            assert recorder.wait(timeout=20) == 0
        client = ClusterClient.connect(kubeconfig=str(kubeconfig))
        client.close()
    (recorded,) = (state_dir / "history").glob("*.sqlite3")  # the cluster's own, and no other
    assert recorded == history_file(client.info, state_dir)
    store = HistoryStore(recorded, readonly=True)
    try:
        lifecycles = store.lifecycles(sim.scenario.context_name, kind="Node")
    finally:
        store.close()
    assert {lc.name for lc in lifecycles} >= {o["metadata"]["name"] for o in sim.objects("nodes")}


@pytest.mark.parametrize("kind", ["missing", "garbage", "empty folder"])
def test_open_refuses_what_is_not_a_bundle_in_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "b.tar.gz"
    if kind == "garbage":
        target.write_text("not a bundle")
    elif kind == "empty folder":
        target = tmp_path / "bundle"
        target.mkdir()
    assert main(["open", str(target)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mignurse: error: ") and "\n" not in err and str(target) in err


# -- global flags in either position --------------------------------------------------------

GLOBAL_FLAGS = [
    (["--read-only"], "read_only", True),
    (["--light"], "light", True),
    (["--auto-collect", "/tmp/bundles"], "auto_collect", "/tmp/bundles"),
    (["--kubeconfig", "/tmp/kube"], "kubeconfig", "/tmp/kube"),
    (["--context", "prod"], "context", "prod"),
    (["--all-contexts"], "all_contexts", True),
    (["--debug"], "debug", True),
]
# What each command needs besides the flags to parse.
COMMANDS = {
    "nodes": [],
    "diagnose": [],
    "inventory": [],
    "radar": [],
    "watch": [],
    "collect": [],
    "probe": [],
    "userdata": ["--config", "all-1g.10gb"],
    "open": ["bundle.tar.gz"],
    "demo": [],
    "sim list": [],
    "sim serve": ["--scenario", "healthy", "--kubeconfig-out", "k"],
    "runbooks": [],
    "run": ["cordon"],
    "runs": [],
    "unlock": ["n1"],
}


def test_every_command_is_in_the_global_flags_table() -> None:
    from mignurse.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    named = {c.split()[0] for c in COMMANDS}
    assert set(sub.choices) == named


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("flag", "dest", "value"), GLOBAL_FLAGS, ids=lambda x: str(x))
def test_every_global_flag_works_before_and_after_every_command(
    command: str, flag: list[str], dest: str, value: object
) -> None:
    from mignurse.cli import build_parser

    words = [*command.split(), *COMMANDS[command]]
    after = build_parser().parse_args([*words, *flag])
    before = build_parser().parse_args([*flag, *words])
    plain = build_parser().parse_args(words)

    assert getattr(after, dest) == value
    assert getattr(before, dest) == value  # the sub-command's parser does not reset it
    assert getattr(plain, dest) in (None, False)


def test_demo_takes_read_only_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    # --speed 0 stops it right after parsing: the flag was accepted, the speed is refused.
    assert main(["demo", "--read-only", "--speed", "0"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments" not in err and "--speed 0 is out of range" in err


def test_demo_builds_its_cluster_inside_the_app_and_stops_it_after(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The app starts at once on a cluster still being built (progress on its status line:
    scale-5000 takes seconds); the build hands it a checked source; quitting stops it."""
    import tempfile

    import mignurse.cli.app as cli
    from mignurse.cluster.client import NODES, ClusterClient, ClusterError
    from mignurse.session import BuildingSource, LiveSource

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the demo's folder, here
    kept = tmp_path / "kubeconfig-kept"
    seen: dict[str, str] = {}

    def run_app(app: object) -> int:
        source = getattr(app, "source", None)
        assert isinstance(source, BuildingSource)
        seen["waiting"] = source.waiting
        built = source.build()  # what the app's build thread does
        assert isinstance(built, LiveSource)
        seen["context"] = built.context
        (config,) = tmp_path.glob("mignurse-demo-*/kubeconfig")
        kept.write_bytes(config.read_bytes())
        built.stop()
        return 0  # quit as from its own key

    monkeypatch.setattr(cli, "_run_app", run_app)

    assert main(["demo", "--scenario", "healthy", "--speed", "1"]) == 0

    assert seen["waiting"].startswith("building the simulated cluster healthy: ")
    assert seen["context"] == load_scenario("healthy").context_name
    assert not list(tmp_path.glob("mignurse-demo-*"))  # its folder went with it
    with pytest.raises(ClusterError):  # and so did its API server
        next(ClusterClient.connect(kubeconfig=str(kept)).list_pages(NODES, limit=1))


# -- a closed pipe does not change the exit code ------------------------------------------------


def _exit_code(
    kubeconfig: Path, env: dict[str, str], args: list[str], *, closed: bool
) -> tuple[int, str]:
    """The command's exit code and stderr, its stdout a terminal-less file or a pipe whose
    reader is already gone (as after `| head` has read what it wanted). The command is forked
    with the CLI already imported (tests/cliserver.py): what is judged here is how it ends,
    flushing into the closed pipe as the interpreter exits, not how it starts."""
    if closed:
        read, write = os.pipe()
        os.close(read)
    else:
        write = os.open(os.devnull, os.O_WRONLY)
    try:
        argv = ["--kubeconfig", str(kubeconfig), *args]
        done = cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=120, stdout=write)
    finally:
        os.close(write)
    return done.returncode, done.stderr


PRINTING = [
    ["nodes"],
    ["nodes", "-o", "json"],
    ["nodes", "-o", "wide"],
    ["diagnose"],
    ["diagnose", "-o", "json"],
    ["diagnose", "--node", "NODE"],
    ["inventory"],
    ["inventory", "-o", "json"],
    ["radar"],
    ["radar", "-o", "json"],
    ["runbooks"],
    ["runbooks", "-o", "json"],
    ["runs"],
    ["run", "cordon", "--node", "NODE", "--dry-run"],
    ["sim", "list"],
    ["userdata", "--config", "all-1g.10gb", "--gpu-product", "h100"],
    ["userdata", "--config", "no-such"],
]


@pytest.fixture(scope="module")
def repair_loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimCluster, Path]]:
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    kubeconfig = sim.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    yield sim, kubeconfig
    sim.stop()


@pytest.mark.parametrize("args", PRINTING, ids=" ".join)
def test_a_closed_pipe_leaves_the_exit_code_and_says_nothing(
    repair_loop: tuple[SimCluster, Path], tmp_path: Path, args: list[str]
) -> None:
    """`mignurse diagnose | head -3` exits as `mignurse diagnose` does (2 for a critical
    finding), quietly, like kubectl."""
    sim, kubeconfig = repair_loop
    node = sorted(gpu_node_names(sim))[0]
    args = [node if a == "NODE" else a for a in args]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE"))}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))

    code, _err = _exit_code(kubeconfig, env, args, closed=False)
    piped, said = _exit_code(kubeconfig, env, args, closed=True)

    assert piped == code
    assert "Traceback" not in said and "Broken pipe" not in said and "Exception" not in said


@pytest.mark.parametrize(
    ("words", "said"),
    [
        # argparse would read `--node` as `--nodepool` and collect a pool named after the node
        (["collect", "--nodepoo", "gpu"], "unrecognized arguments: --nodepoo"),
        (["run", "cordon", "--nod", "n1"], "unrecognized arguments: --nod n1"),
        # an option it does not know before the command's name left its value as the command
        (["--kubecon", "x", "nodes"], "unrecognized option '--kubecon': give options whole"),
        (
            ["--context", "p", "--kubecon", "x", "nodes"],
            "unrecognized option '--kubecon': give options whole",
        ),
        (["--rea", "nodes"], "unrecognized arguments: --rea"),
    ],
)
def test_an_abbreviated_option_is_refused_not_guessed(
    words: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(words)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"mignurse: error: {said}"


def test_collect_takes_nodes_as_words_and_as_node_options_alike() -> None:
    from mignurse.cli import build_parser

    args = build_parser().parse_args(["collect", "a", "--node", "b", "--node", "c"])
    assert (args.nodes, args.named_nodes) == (["a"], ["b", "c"])
