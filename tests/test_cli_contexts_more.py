"""Several kube contexts, run as a user runs them: what a selection of one context gives
(the single-context command, whatever the flag's shape), the launching NodeClaims of every
cluster in `nodes -o json`, the context a suggested command names, how a failed cluster and
an unknown context are said, and where several clusters' bundles go."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import cliserver
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.cluster.contexts import select_contexts, unknown_context
from mignurse.diagnose.wording import with_context
from mignurse.jsontext import dumps_indented
from mignurse.sim.fleet import SimFleet

SCENARIOS = ("healthy", "dcgm-repair-loop", "mig-hook-notready")
LAUNCHING = "gpu-inference-launch1"  # a NodeClaim of the repair loop's cluster, no Node yet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimFleet, Path]]:
    """Three simulated clusters and three failing contexts in one kubeconfig; the repair
    loop's cluster has a GPU NodeClaim that no Node has registered for yet."""
    from mignurse.sim import load_scenario
    from mignurse.sim.fleet import serve_fleet

    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    failing = [("unreachable", "prod-eu"), ("expired", "prod-us"), ("forbidden", "staging")]
    served = serve_fleet(kubeconfig, [load_scenario(s) for s in SCENARIOS], failing, speed=0)
    loop = next(s for s in served.sims if s.scenario.context_name == "sim-dcgm-repair-loop")
    loop.store.create(
        "nodeclaims",
        {
            "metadata": {
                "name": LAUNCHING,
                "creationTimestamp": "2026-11-29T03:00:00Z",
                "labels": {
                    "karpenter.sh/nodepool": "gpu-inference",
                    "node.kubernetes.io/instance-type": "g6e.12xlarge",
                },
            },
            "spec": {"resources": {"requests": {"nvidia.com/gpu": "4"}}},
            "status": {},
        },
    )
    yield served, kubeconfig
    served.stop()


def mignurse(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # two worker processes: each cluster's part of a `nodes` answer is pickled to this one
    env = {
        **os.environ,
        "MIGNURSE_COMMAND_TIMEOUT": "6",
        "COLUMNS": "200",
        "MIGNURSE_FLEET_PROCESSES": "2",
    }
    argv = ["--kubeconfig", str(kubeconfig), *args]
    return cliserver.run(argv, env=env, cwd=os.getcwd(), timeout=120)


def errors(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """Each failing context's one stderr line, by context."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("mignurse: error:")]
    by_context = {line.split("'")[1]: line for line in lines}
    assert len(by_context) == len(lines), done.stderr
    return by_context


def same_moment(printed: str) -> str:
    """Output as if read at one moment: runs a second apart differ only in the clock."""
    printed = re.sub(r'"now": "[^"]*"', '"now": "T"', printed)
    return re.sub(r'"ageSeconds": \d+', '"ageSeconds": 0', printed)


# -- nodes -o json: the launching NodeClaims of every cluster ---------------------------------


def test_nodes_json_across_clusters_lists_each_cluster_s_launching_nodeclaims(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    alone = mignurse(kubeconfig, "--context", "sim-dcgm-repair-loop", "nodes", "-o", "json")
    done = mignurse(kubeconfig, "--context", "sim-*,prod-us", "nodes", "-o", "json")

    assert alone.returncode == 0, alone.stderr
    assert done.returncode == 2, done.stderr  # prod-us's login expired
    single = json.loads(alone.stdout)["launching"]
    assert [claim["nodeClaim"] for claim in single] == [LAUNCHING]
    document = json.loads(done.stdout)
    assert list(document)[-2:] == ["nodes", "launching"]
    cluster = {r["context"]: r["cluster"] for r in document["clusters"]}["sim-dcgm-repair-loop"]
    assert document["launching"] == [
        {"context": "sim-dcgm-repair-loop", "cluster": cluster, **claim} for claim in single
    ]
    # the text joined from each cluster's part is the text of the whole document
    assert done.stdout == json.dumps(document, indent=2) + "\n"
    pooled = mignurse(
        kubeconfig, "--context", "sim-*", "nodes", "-o", "json", "--nodepool", "gpu-mig"
    )
    assert pooled.returncode == 0, pooled.stderr
    assert json.loads(pooled.stdout)["launching"] == []  # the claim's pool is another


_items = st.lists(st.dictionaries(st.text(), st.integers() | st.text(), max_size=3), max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(), st.integers() | st.text() | st.none(), max_size=4),
    st.lists(st.tuples(_items, _items), max_size=4),
)
def test_an_answer_joined_with_launching_parts_is_the_whole_one_s_text(
    head: dict[str, object], parts: list[tuple[list[object], list[object]]]
) -> None:
    from mignurse.cli.nodes import _items_text, _json_answer

    whole = {
        **{k: v for k, v in head.items() if k not in ("nodes", "launching")},
        "nodes": [item for nodes, _ in parts for item in nodes],
        "launching": [item for _, launching in parts for item in launching],
    }
    joined = _json_answer(
        head,
        [_items_text(nodes) for nodes, _ in parts],
        [_items_text(launching) for _, launching in parts],
    )
    assert joined == dumps_indented(whole)


# -- a selection of one context is the single-context command ---------------------------------


def test_diagnose_with_a_glob_that_selects_one_context_is_that_context_s_diagnosis(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for output in ("json", "table"):
        one = mignurse(kubeconfig, "--context", "sim-healthy", "diagnose", "-o", output)
        for selection in ("sim-heal*", "sim-healthy,"):
            globbed = mignurse(kubeconfig, "--context", selection, "diagnose", "-o", output)
            assert (globbed.returncode, globbed.stderr) == (one.returncode, one.stderr)
            assert same_moment(globbed.stdout) == same_moment(one.stdout) and one.stdout
            if output == "json":
                document = json.loads(globbed.stdout)
                assert document["context"] == "sim-healthy" and "contexts" not in document
            else:
                assert not globbed.stdout.startswith("sim-healthy")  # no cluster column


def test_run_unlock_and_diagnose_node_take_a_selection_of_one_context(
    fleet: tuple[SimFleet, Path],
) -> None:
    served, kubeconfig = fleet
    loop = next(s for s in served.sims if s.scenario.context_name == "sim-dcgm-repair-loop")
    node = loop.objects("nodes")[0]["metadata"]["name"]
    for selection in ("sim-d*", "sim-dcgm-repair-loop,"):
        planned = mignurse(
            kubeconfig, "--context", selection, "run", "cordon", "--node", node, "--dry-run"
        )
        assert planned.returncode == 0, planned.stderr
        assert "(context sim-dcgm-repair-loop)" in planned.stderr  # the plan, as it runs
        unlocked = mignurse(kubeconfig, "--context", selection, "unlock", node)
        assert unlocked.returncode == 0, unlocked.stderr
        assert unlocked.stdout.endswith("holds no mignurse lock\n")
        diagnosed = mignurse(kubeconfig, "--context", selection, "diagnose", "--node", node)
        assert diagnosed.returncode in (0, 1, 2) and f"Timeline of {node}" in diagnosed.stdout
        assert not diagnosed.stdout.startswith("sim-dcgm-repair-loop")  # no cluster prefix


def test_a_command_of_one_context_refused_for_several_names_what_was_selected(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for command in (
        ["run", "cordon", "--node", "n1"],
        ["unlock", "n1"],
        ["diagnose", "--node", "n1"],
    ):
        refused = mignurse(kubeconfig, "--context", "sim-h*,sim-d*", *command)
        assert refused.returncode == 2, command
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert "works on one context at a time: give one --context NAME" in refused.stderr
        assert "selects 2: sim-healthy, sim-dcgm-repair-loop" in refused.stderr


def test_collect_with_a_glob_that_selects_one_context_writes_where_one_context_does(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    bundle = tmp_path / "incident.tar.gz"
    done = mignurse(
        kubeconfig, "--context", "sim-dcgm*", "collect", "--unhealthy", "-o", str(bundle)
    )
    assert done.returncode == 0, done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["incident.tar.gz"]
    assert "context sim-dcgm-repair-loop:" not in done.stderr  # no per-cluster heading


# -- what a finding suggests names its cluster ------------------------------------------------


def test_commands_suggested_across_clusters_name_their_cluster_s_context(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    alone = mignurse(kubeconfig, "--context", "sim-mig-hook-notready", "diagnose", "-o", "json")
    both = mignurse(kubeconfig, "--context", "sim-healthy,sim-mig*", "diagnose", "-o", "json")
    table = mignurse(kubeconfig, "--context", "sim-healthy,sim-mig*", "diagnose")

    unpinned = [f["summary"] for f in json.loads(alone.stdout)["findings"]]
    assert any("`mignurse collect ip-" in s for s in unpinned)  # one context: as it was
    summaries = [f["summary"] for f in json.loads(both.stdout)["findings"]]
    suggested = re.findall(r"`(mignurse [^`]*)`", "\n".join(summaries))
    cluster_commands = [c for c in suggested if c.split()[1] != "userdata"]
    assert cluster_commands
    for command in cluster_commands:
        assert command.startswith("mignurse --context sim-mig-hook-notready "), command
    assert "run `mignurse --context sim-mig-hook-notready collect ip-" in table.stdout


def test_a_suggested_command_names_its_context_quoted_for_a_shell() -> None:
    said = "run `mignurse collect n1` for its journals; `mignurse userdata`; `mignurse runs 1a`"
    assert with_context(said, "prod eu's") == (
        "run `mignurse --context 'prod eu'\"'\"'s' collect n1` for its journals; "
        "`mignurse userdata`; `mignurse runs 1a`"
    )
    assert with_context("mignurse run cordon --node n1", "prod") == (
        "mignurse --context prod run cordon --node n1"
    )


# -- failed clusters and unknown contexts, said alike -----------------------------------------


def test_collect_across_clusters_says_a_failed_cluster_as_nodes_does(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    selection = "prod-eu,prod-us,staging"
    collected = mignurse(
        kubeconfig, "--context", selection, "collect", "--unhealthy", "-o", str(tmp_path)
    )
    listed = mignurse(kubeconfig, "--context", selection, "nodes")

    assert collected.returncode == listed.returncode == 2
    said, expected = errors(collected), errors(listed)
    assert set(said) == {"prod-eu", "prod-us", "staging"}
    assert said == expected
    assert "credentials expired: run `aws sso login --profile prod-us`" in said["prod-us"]
    assert said["prod-us"].count("context 'prod-us'") == 1


def test_several_bundles_into_a_missing_folder_say_to_create_it(
    fleet: tuple[SimFleet, Path], tmp_path: Path
) -> None:
    _served, kubeconfig = fleet
    missing = tmp_path / "nodir"
    done = mignurse(
        kubeconfig, "--context", "sim-*", "collect", "--nodepool", "gpu-mig", "-o", f"{missing}/"
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "no such folder: create it first (mkdir -p" in done.stderr
    assert not missing.exists()


def test_an_unknown_context_is_said_alike_alone_or_in_a_list(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    lines = {
        mignurse(kubeconfig, "--context", selection, *command).stderr
        for selection in ("nosuch", "nosuch,sim-healthy", "sim-*,nosuch")
        for command in (["nodes"], ["diagnose"], ["run", "cordon", "--node", "n1"])
    }
    assert lines == {
        f"mignurse: error: context 'nosuch' not found in {kubeconfig}: the name matches no "
        "context; use one of: sim-healthy, sim-dcgm-repair-loop, sim-mig-hook-notready, "
        "prod-eu, prod-us, staging\n"
    }


def test_commas_alone_are_one_line_and_an_empty_context_is_the_current_one(
    fleet: tuple[SimFleet, Path],
) -> None:
    _served, kubeconfig = fleet
    for selection in (",", " , ,"):
        refused = mignurse(kubeconfig, "--context", selection, "nodes")
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr == (
            f"mignurse: error: --context {selection!r} names no context: give a context name or "
            "glob, or leave --context out for the current one\n"
        )
    current = mignurse(kubeconfig, "nodes", "-o", "json")
    empty = mignurse(kubeconfig, "--context", "", "nodes", "-o", "json")
    assert empty.returncode == current.returncode == 0, empty.stderr
    assert same_moment(empty.stdout) == same_moment(current.stdout)


def test_a_known_context_that_fails_keeps_its_own_line(tmp_path: Path) -> None:
    """The unknown-context line is given only for a name the kubeconfig does not define."""
    config = tmp_path / "config"
    config.write_text(
        "contexts:\n- name: prod\n  context: {cluster: c, user: u}\n"
        "clusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: t}\n"
    )
    assert unknown_context(str(config), "prod") is None
    assert unknown_context(str(config), None) is None
    assert unknown_context(str(tmp_path / "none"), "prod") is None  # nothing to judge by
    said = str(unknown_context(str(config), "prdo"))
    assert (
        said
        == f"context 'prdo' not found in {config}: the name matches no context; use one of: prod"
    )
    with pytest.raises(Exception) as listed:
        select_contexts(str(config), "prdo,prod")
    assert str(listed.value) == said
    with pytest.raises(Exception, match=r"^context 'px\*' not found in .*: the glob matches no"):
        select_contexts(str(config), "px*")
