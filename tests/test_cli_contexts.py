"""`nodes` and `diagnose` across several kube contexts, run as a user runs them, against
several simulated clusters served in one process with one kubeconfig (`sim serve`'s
`SimFleet`), one of them failing in each way: refused connections, an expired AWS SSO login
behind `aws eks get-token`, RBAC refusing `list nodes`, and an API server that accepts and
never answers."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import cliserver
import pytest
import yaml

from mignurse.sim.fleet import SimFleet

SCENARIOS = ("healthy", "dcgm-repair-loop")
WORKING = "sim-*,prod-eu,prod-us,staging"  # every context but the hung one
# The hung context's reads end at this deadline; the command's own run is judged by what it
# printed, never by how long it took.
DEADLINE = "6"


@pytest.fixture(scope="module")
def fleet(failing_fleet: tuple[SimFleet, Path]) -> tuple[SimFleet, Path]:
    return failing_fleet


def mignurse(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MIGNURSE_COMMAND_TIMEOUT": DEADLINE, "COLUMNS": "200"}
    argv = ["--kubeconfig", str(kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=120)


def errors(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each failing context's one stderr line, by context."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("mignurse: error:")]
    by_context = {line.split("'")[1]: line for line in lines}
    assert len(by_context) == len(lines), done.stderr  # one line per cluster
    return by_context


def gpu_nodes(served: SimFleet, context: str) -> set[str]:
    sim = next(s for s in served.sims if s.scenario.context_name == context)
    return {
        o["metadata"]["name"]
        for o in sim.objects("nodes")
        if any(k.startswith("nvidia.com/") for k in (o.get("status") or {}).get("capacity") or {})
    }


def test_one_context_whose_login_expired_says_what_to_run_as_several_do(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for command in ("nodes", "diagnose"):
        done = mignurse(kubeconfig, "--context", "prod-us", command)
        assert done.returncode == 2, done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(
            "mignurse: error: context 'prod-us': credentials expired: "
            "run `aws sso login --profile prod-us`: credential plugin `aws eks get-token` failed"
        ), line
        assert line.count("credentials expired") == 1, line


def test_each_failing_cluster_is_one_line_and_the_others_still_print(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", WORKING, "nodes")
    assert done.returncode == 2, done.stderr
    failed = errors(done)
    assert set(failed) == {"prod-eu", "prod-us", "staging"}
    assert "unreachable" in failed["prod-eu"] and "127.0.0.1:" in failed["prod-eu"]
    assert "connection refused" in failed["prod-eu"]
    assert "credentials expired: run `aws sso login --profile prod-us`" in failed["prod-us"]
    assert "The SSO session associated with this profile has expired" in failed["prod-us"]
    assert failed["prod-us"].count("context 'prod-us'") == 1  # said once, at the start
    assert "RBAC denied" in failed["staging"] and "cannot list nodes" in failed["staging"]
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["CLUSTER", "NAME", "POOL"]
    shown = {(line.split()[0], line.split()[1]) for line in lines[1:]}
    for context in ("sim-healthy", "sim-dcgm-repair-loop"):
        assert {name for c, name in shown if c == context} == gpu_nodes(served, context)


def test_the_worst_node_of_any_cluster_comes_first(fleet: tuple[SimFleet, Path]) -> None:
    _served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", "sim-*", "nodes")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[1].split()
    # the repair loop's node whose AcceleratedHardwareReady is False, ahead of the healthy
    # cluster's nodes listed before it in the kubeconfig
    assert first[0] == "sim-dcgm-repair-loop"
    assert "DCGMError" in first


def test_json_names_the_cluster_of_every_node_and_each_failed_cluster(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", WORKING, "nodes", "-o", "json")
    assert done.returncode == 2, done.stderr
    document = json.loads(done.stdout)
    assert document["kind"] == "GPUNodeList"
    assert document["contexts"] == [
        "sim-healthy", "sim-dcgm-repair-loop", "prod-eu", "prod-us", "staging",
    ]  # fmt: skip
    records = {r["context"]: r for r in document["clusters"]}
    assert {c: r["status"] for c, r in records.items()} == {
        "sim-healthy": "connected",
        "sim-dcgm-repair-loop": "connected",
        "prod-eu": "unreachable",
        "prod-us": "credentials-expired",
        "staging": "rbac-denied",
    }
    assert records["prod-us"]["login"] == "aws sso login --profile prod-us"
    assert "cannot list nodes" in records["staging"]["message"]
    assert (records["staging"]["verb"], records["staging"]["resource"]) == ("list", "nodes")
    assert records["prod-eu"]["server"].startswith("https://127.0.0.1:")
    assert records["sim-healthy"]["version"].startswith("v1.")
    assert isinstance(records["sim-healthy"]["clockSkewSeconds"], float)
    clusters = {r["context"]: r["cluster"] for r in document["clusters"]}
    for node in document["nodes"]:
        assert node["cluster"] == clusters[node["context"]]
    for context in ("sim-healthy", "sim-dcgm-repair-loop"):
        named = {n["name"] for n in document["nodes"] if n["context"] == context}
        assert named == gpu_nodes(served, context)


def test_diagnose_across_clusters_names_each_finding_s_cluster_and_exits_with_the_worst(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    alone = mignurse(kubeconfig, "--context", "sim-healthy", "diagnose")
    assert alone.returncode == 0, alone.stderr  # the healthy cluster alone: info at most
    done = mignurse(kubeconfig, "--context", "sim-healthy,prod-eu", "diagnose", "-o", "json")
    assert done.returncode == 2, done.stderr  # the unreachable one counts as its error
    assert set(errors(done)) == {"prod-eu"}
    document = json.loads(done.stdout)
    assert document["findings"]
    assert {f["context"] for f in document["findings"]} == {"sim-healthy"}
    assert [r["status"] for r in document["clusters"]] == ["connected", "unreachable"]

    both = mignurse(kubeconfig, "--context", "sim-*", "diagnose")
    assert both.returncode == 2, both.stderr  # the repair loop is critical
    heads = [line for line in both.stdout.splitlines() if line and not line.startswith(" ")]
    assert heads[0].split()[:3] == ["sim-dcgm-repair-loop", "CRITICAL", "node-repair-loop"]
    assert any(line.startswith("sim-healthy  INFO") for line in heads)


def test_comma_and_glob_select_in_kubeconfig_order_each_once(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", "sim-dcgm-repair-loop,sim-*", "nodes", "-o", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["contexts"] == ["sim-healthy", "sim-dcgm-repair-loop"]


def test_a_selection_that_matches_nothing_is_one_line_naming_the_contexts(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for selection in ("prod-*,nope-*", "sim-healthy,typo"):
        done = mignurse(kubeconfig, "--context", selection, "nodes")
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1, done.stderr
        assert "matches no context" in done.stderr
        assert "use one of: sim-healthy, sim-dcgm-repair-loop, prod-eu" in done.stderr
        assert done.stdout == ""


def test_a_glob_that_selects_one_context_prints_what_that_context_prints(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for output in ("json", "table"):
        one = mignurse(kubeconfig, "--context", "sim-healthy", "nodes", "-o", output)
        globbed = mignurse(kubeconfig, "--context", "sim-heal*", "nodes", "-o", output)
        assert one.returncode == globbed.returncode == 0
        assert same_moment(one.stdout) == same_moment(globbed.stdout) and one.stdout


def same_moment(printed: str) -> str:
    """Output as if read at one moment: two runs a second apart differ only in the API
    server's clock (`now`) and the ages counted from it."""
    printed = re.sub(r'"now": "[^"]*"', '"now": "T"', printed)
    return re.sub(r'"ageSeconds": \d+', '"ageSeconds": 0', printed)


def test_a_hung_cluster_times_out_alone_and_the_others_print(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--all-contexts", "nodes", "-o", "json")
    assert done.returncode == 2, done.stderr
    failed = errors(done)
    assert set(failed) == {"prod-eu", "prod-us", "staging", "prod-ap"}
    assert "timed out" in failed["prod-ap"]
    document = json.loads(done.stdout)
    statuses = {r["context"]: r["status"] for r in document["clusters"]}
    assert statuses["prod-ap"] == "timed-out"
    assert statuses["sim-healthy"] == statuses["sim-dcgm-repair-loop"] == "connected"
    named = {n["name"] for n in document["nodes"] if n["context"] == "sim-healthy"}
    assert named == gpu_nodes(served, "sim-healthy")


def test_unlock_and_the_offline_diagnosis_take_one_context(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for command in (["unlock", "n1"], ["run", "cordon", "--node", "n1"]):
        refused = mignurse(kubeconfig, "--context", "sim-*", *command)
        assert refused.returncode == 2, command
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert "works on one context at a time: give one --context NAME" in refused.stderr
    offline = mignurse(kubeconfig, "--all-contexts", "diagnose", "--from", "/nonexistent")
    assert offline.returncode == 2
    assert offline.stderr.count("\n") == 1 and "--from reads one" in offline.stderr


def test_sim_serve_several_scenarios_then_every_context_as_a_user_would(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "fleet.yaml"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "mignurse", "sim", "serve", "--scenario", "healthy",
         "--scenario", "mig-hook-notready", "--unreachable", "prod-eu",
         "--kubeconfig-out", str(kubeconfig)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        first = server.stdout.readline()
        assert first.startswith("Serving 2 scenarios and 1 failing context"), first
        config = yaml.safe_load(kubeconfig.read_text())
        assert config["current-context"] == "sim-healthy"
        assert [c["name"] for c in config["contexts"]] == [
            "sim-healthy", "sim-mig-hook-notready", "prod-eu",
        ]  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig),
             "--all-contexts", "nodes"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert done.returncode == 2
        assert done.stderr.count("\n") == 1 and "'prod-eu': unreachable" in done.stderr
        clusters = {line.split()[0] for line in done.stdout.splitlines()[1:]}
        assert clusters == {"sim-healthy", "sim-mig-hook-notready"}
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_documented_several_context_json_has_the_keys_nodes_prints(
    fleet: tuple[SimFleet, Path],
) -> None:
    """docs/commands.md's example of a several-context document is what `nodes` writes."""
    _served, kubeconfig = fleet
    text = (Path(__file__).parent.parent / "docs" / "commands.md").read_text()
    section = text[text.index("## Several clusters at once") :]
    start = section.index("```json") + len("```json")
    documented = json.loads(section[start : section.index("```", start)].replace("…", ""))
    done = mignurse(kubeconfig, "--context", "sim-healthy,prod-us", "nodes", "-o", "json")
    printed = json.loads(done.stdout)
    assert set(documented) == set(printed)
    for shown, written in zip(documented["clusters"], printed["clusters"], strict=True):
        assert set(shown) == set(written)
    assert set(documented["nodes"][0]) - {""} <= set(printed["nodes"][0])


def test_a_bug_in_one_cluster_s_read_is_an_internal_error_line_and_exit_3(
    fleet: tuple[SimFleet, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A read that breaks on one cluster's data (a bug) is that cluster's line, worded as
    `mignurse` words a bug, and exit 3; the other cluster still prints."""
    from mignurse.cli import main
    from mignurse.cluster import load

    _served, kubeconfig = fleet
    real = load.load_snapshot

    def breaks_on_one(client: Any, **kwargs: Any) -> Any:
        if client.info.context == "sim-dcgm-repair-loop":
            raise KeyError("status")
        return real(client, **kwargs)

    monkeypatch.setattr(load, "load_snapshot", breaks_on_one)
    assert main(["--kubeconfig", str(kubeconfig), "--context", "sim-*", "nodes"]) == 3
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "mignurse: internal error: context 'sim-dcgm-repair-loop': KeyError: 'status' (run "
        "again with --debug for the traceback, and report it)"
    ]
    assert {line.split()[0] for line in out.splitlines()[1:]} == {"sim-healthy"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_cluster_column_comes_first_too(
    fleet: tuple[SimFleet, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.cli import main

    _served, kubeconfig = fleet
    screen = _Terminal()
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys, "stdout", screen)
    assert main(["--kubeconfig", str(kubeconfig), "--context", "sim-*", "nodes"]) == 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())  # the styles drawn
    lines = [line for line in plain.splitlines() if line.strip()]
    assert lines[0].split()[:2] == ["CLUSTER", "NAME"]
    assert lines[1].split()[0] == "sim-dcgm-repair-loop"  # the worst node first
    rows = [line.split() for line in lines[1:] if line.startswith("sim-")]  # not a cell's fold
    assert {row[0] for row in rows} == {"sim-healthy", "sim-dcgm-repair-loop"}
    assert "TYPE" not in lines[0]  # stepped aside for the CLUSTER column at 120 columns


def test_context_names_with_escapes_are_shown_inert_in_the_column_and_the_lines(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    """A kubeconfig someone sent may name its contexts with terminal escapes and bidi
    controls: the CLUSTER column and each failing cluster's line show them, never obey."""
    _served, kubeconfig = fleet
    config = yaml.safe_load(kubeconfig.read_text())
    hostile = {
        "sim-healthy": "prod\x1b]52;c;cm0gLXJmIH4=\x07-eu",
        "prod-eu": "stag\u202eing\x9b2J",
    }
    for context in config["contexts"]:
        context["name"] = hostile.get(context["name"], context["name"])
    config["contexts"] = [c for c in config["contexts"] if c["name"] in hostile.values()]
    renamed = tmp_path / "hostile.yaml"
    renamed.write_text(yaml.safe_dump(config))
    done = mignurse(renamed, "--all-contexts", "nodes")
    assert done.returncode == 2
    for text in (done.stdout, done.stderr):
        assert not {"\x1b", "\x07", "\x9b", "\u202e"} & set(text), repr(text)
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07-eu" in done.stdout  # shown, as inert text
    assert done.stderr.count("\n") == 1 and "unreachable" in done.stderr


def test_inventory_across_clusters_shows_where_they_differ_and_a_line_per_failed_one(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", WORKING, "inventory", "-o", "json")

    assert done.returncode == 2, done.stderr
    assert set(errors(done)) == {"prod-eu", "prod-us", "staging"}  # each once, on stderr
    document = json.loads(done.stdout)
    by_cluster = {c["context"]: c for c in document["clusters"]}
    assert set(by_cluster) == {"sim-healthy", "sim-dcgm-repair-loop", "prod-eu", "prod-us",
                               "staging"}  # fmt: skip
    assert "credentials expired" in by_cluster["prod-us"]["error"]
    assert "error" not in by_cluster["sim-healthy"]
    differing = {d["field"] for d in document["differences"]}
    assert "osImage" in differing  # the repair loop's pool runs an older AMI release
    table = mignurse(kubeconfig, "--context", "sim-*", "inventory")
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("Where sim-healthy, sim-dcgm-repair-loop differ:")


def test_radar_lists_the_repair_due_in_any_cluster_with_the_command_pinned_to_its_context(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", WORKING, "radar", "-o", "json")

    assert done.returncode == 2, done.stderr  # three clusters could not be read
    assert set(errors(done)) == {"prod-eu", "prod-us", "staging"}
    document = json.loads(done.stdout)
    assert document["kind"] == "RepairRadar"
    (due,) = document["nodes"]  # the repair loop's node, AcceleratedHardwareReady=False
    assert due["context"] == "sim-dcgm-repair-loop" and due["state"] == "fires"
    assert due["node"] in gpu_nodes(served, "sim-dcgm-repair-loop")
    assert due["condition"] == "AcceleratedHardwareReady=False"
    assert due["finding"] == "node-repair-loop" and due["act"] == "pause"
    assert due["command"] == (
        f"mignurse --context sim-dcgm-repair-loop run pause-node-repair --node {due['node']}"
    )
    piped = mignurse(kubeconfig, "--context", "sim-*", "radar")
    assert piped.returncode == 1, piped.stderr  # a node is due: 1, as a warning
    header, row = piped.stdout.splitlines()  # every row whole on its line, piped
    assert header.split()[:3] == ["CLUSTER", "REPAIR", "NODE"]
    assert row.split()[0] == "sim-dcgm-repair-loop" and row.endswith(due["node"])


def test_radar_with_nothing_due_says_so_and_a_bad_horizon_is_one_line(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    calm = mignurse(kubeconfig, "--context", "sim-healthy", "radar")
    assert (calm.returncode, calm.stdout) == (
        0,
        "No GPU node is due for automatic repair within 1h.\n",
    ), calm.stderr
    bad = mignurse(kubeconfig, "--context", "sim-healthy", "radar", "--horizon", "soon")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "mignurse: error: --horizon: 'soon' is not a duration like 90s, 90m, 6h or 2d"
    ]


def test_collect_unhealthy_across_clusters_writes_one_bundle_per_cluster_and_goes_on_past_failures(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    done = mignurse(kubeconfig, "--context", WORKING, "collect", "--unhealthy", "-o", str(tmp_path))

    assert done.returncode == 2, done.stderr  # three clusters could not be read
    assert set(errors(done)) == {"prod-eu", "prod-us", "staging"}
    bundles = sorted(p.name for p in tmp_path.iterdir())
    # the healthy cluster has nothing unhealthy; the repair loop's cluster one bundle
    assert [b.rsplit("-", 1)[0] for b in bundles] == ["mignurse-bundle-sim-dcgm-repair-loop"]
    assert "context sim-healthy:\nNo node matches: nothing to collect." in done.stderr
    shown = mignurse(kubeconfig, "diagnose", "--from", str(tmp_path / bundles[0]), "-o", "json")
    assert json.loads(shown.stdout)["findings"], shown.stderr  # a bundle diagnose can read


def test_collect_across_clusters_refuses_node_names_and_a_file_for_several_bundles(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    named = mignurse(kubeconfig, "--context", "sim-*", "collect", "ip-10-0-1-1")
    to_file = mignurse(
        kubeconfig, "--context", "sim-*", "collect", "--unhealthy", "-o", str(tmp_path / "b.tgz")
    )

    assert named.returncode == 2 and "a node belongs to one cluster" in named.stderr
    assert to_file.returncode == 2 and "-o names a folder" in to_file.stderr
    assert list(tmp_path.iterdir()) == []


def test_sim_serve_says_a_kubeconfig_it_cannot_write_rather_than_a_port(tmp_path: Path) -> None:
    taken = tmp_path / "fleet.yaml"
    taken.mkdir()  # a folder where the kubeconfig should go
    done = subprocess.run(
        [sys.executable, "-m", "mignurse", "sim", "serve", "--scenario", "healthy",
         "--unreachable", "prod-eu", "--kubeconfig-out", str(taken)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"mignurse: error: cannot write {taken}: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
