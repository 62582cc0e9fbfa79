"""The node monitoring agent's container log, as the kubelet keeps it, read like a journal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from mignurse.evidence import parse_container_log
from mignurse.evidence.containerlog import container_of

CORPUS = Path(__file__).parents[1] / "corpus" / "journal"
DCGM_ERROR = "failed to initialize DCGM: libdcgm.so not Found"


def _read(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def test_cri_log_of_the_agent_reporting_dcgm_error() -> None:
    parsed = parse_container_log(_read("nma-cri.log"), "journal:nma")
    assert parsed.problems == ()
    assert (parsed.format, parsed.source, parsed.lines) == ("cri", "journal:nma", 6)
    assert [e.line for e in parsed.entries] == [2, 3, 4, 5]
    assert {(e.host, e.ident, e.boot) for e in parsed.entries} == {
        ("", "eks-node-monitoring-agent", 0)
    }
    error = json.loads(parsed.entries[2].message)
    assert (error["level"], error["msg"], error["error"]) == (
        "error",
        "failed to reconcile DCGM state",
        DCGM_ERROR,
    )
    assert parsed.entries[2].time == datetime(2026, 11, 29, 3, 2, 42, 402183, tzinfo=UTC)
    # containerd split the last line into a P and an F piece: one entry, whole JSON again.
    sent = json.loads(parsed.entries[3].message)
    assert sent["condition"]["Reason"] == "DCGMError"
    assert sent["conditionType"] == "AcceleratedHardwareReady"


def test_docker_json_file_log_joins_pieces_the_same_way() -> None:
    cri = parse_container_log(_read("nma-cri.log"), "j")
    docker = parse_container_log(_read("nma-docker-json.log"), "j", "eks-node-monitoring-agent")
    assert docker.problems == () and docker.format == "docker-json"
    wanted = [cri.entries[i].message for i in (0, 1, 3)]
    assert [e.message for e in docker.entries] == wanted
    assert {e.ident for e in docker.entries} == {"eks-node-monitoring-agent"}


def test_headers_name_the_container_and_odd_lines_are_problems() -> None:
    text = (
        "==> /var/log/pods/kube-system_dcgm-server-x_1/dcgm-server/2.log <==\n"
        "2026-11-29T03:02:42Z stdout F started\n"
        "garbage line\n"
        "2026-13-29T03:02:42Z stdout F impossible date\n"
        "2026-11-29T03:02:43.5+01:00 stderr P cut by the\n"
        "==> /var/log/pods/kube-system_eks-node-monitoring-agent-q_2/"
        "eks-node-monitoring-agent/0.log <==\n"
        "2026-11-29T03:02:44Z stdout F \n"
        '{"log":"no time"}\n'
    )
    parsed = parse_container_log(text, "j", "fallback")
    assert [(e.ident, e.message) for e in parsed.entries] == [
        ("dcgm-server", "started"),
        ("dcgm-server", "cut by the"),
        ("eks-node-monitoring-agent", ""),
    ]
    assert parsed.entries[1].time == datetime(2026, 11, 29, 2, 2, 43, 500000, tzinfo=UTC)
    assert parsed.problems == (
        "line 3: not a container log line: 'garbage line'",
        "line 4: bad timestamp '2026-13-29T03:02:42Z'",
        "line 5: partial line never completed",
        "line 8: bad or missing time 'None'",
    )


def test_empty_and_junk() -> None:
    assert parse_container_log("", "j").problems == ("empty container log",)
    junk = parse_container_log("nothing here\n", "j")
    assert junk.entries == ()
    assert junk.problems[-1] == "no container log lines could be read"


def test_container_of_a_kubelet_log_path() -> None:
    pod = "/var/log/pods/kube-system_eks-node-monitoring-agent-q8w2m_5e0d"
    assert container_of(f"{pod}/eks-node-monitoring-agent/0.log") == "eks-node-monitoring-agent"
    assert container_of("/root/nma.log") == ""
