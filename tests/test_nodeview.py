"""What the GPU node table says about a node: the words an on-call engineer reads."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mignurse.cluster.snapshot import Snapshot
from mignurse.model import Node, NodeClaim
from mignurse.nodeview import (
    format_age,
    node_row,
    node_rows,
    nodes_document,
    short_name,
)
from mignurse.render import plain_table, print_node_table

FIXTURES = Path(__file__).parent / "fixtures"
NOW = datetime(2026, 11, 29, 3, 0, 30, tzinfo=UTC)


def p5() -> Node:
    return Node.from_api(json.loads((FIXTURES / "node-p5-mig.json").read_text()))


def test_ages_read_like_kubectl() -> None:
    assert format_age(45) == "45s"
    assert format_age(150) == "2m"
    assert format_age(3 * 3600 + 20 * 60) == "3h20m"
    assert format_age(30 * 3600) == "30h"
    assert format_age(5 * 86400 + 4 * 3600) == "5d4h"
    assert format_age(-5) == "0s"  # a clock a little ahead of the server
    assert format_age(None) == "?"


def test_row_shows_status_duration_mig_slices_and_the_dcgm_reason() -> None:
    row = node_row(p5(), None, NOW)
    assert row.status == "Ready 1h46m"
    assert row.age == "1h47m"
    assert row.gpu == "56×1g.10gb"
    assert row.mig == "all-1g.10gb success"
    assert row.ahr == "False DCGMError"
    assert row.ahr_ok is False
    assert row.taints == "-"  # the routine nvidia.com/gpu taint is not news


def test_cordoned_and_disrupted_nodes_say_so_in_words() -> None:
    raw = json.loads((FIXTURES / "node-p5-mig.json").read_text())
    raw["spec"]["unschedulable"] = True
    raw["spec"]["taints"].append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})
    raw["metadata"]["deletionTimestamp"] = "2026-11-29T03:00:00Z"
    row = node_row(Node.from_api(raw), None, NOW)
    assert row.taints == "cordoned,disrupting,deleting"


def test_a_gpu_node_without_gpu_resources_shows_none() -> None:
    raw = json.loads((FIXTURES / "node-p5-mig.json").read_text())
    raw["status"]["allocatable"] = {"cpu": "1"}
    raw["status"]["capacity"] = {"cpu": "1"}
    assert node_row(Node.from_api(raw), None, NOW).gpu == "none"


def test_launching_nodeclaims_appear_after_their_pool_nodes() -> None:
    node = p5()
    claim = NodeClaim.from_api(
        {
            "metadata": {
                "name": "gpu-mig-zz9qk",
                "creationTimestamp": "2026-11-29T03:00:00Z",
                "labels": {
                    "karpenter.sh/nodepool": "gpu-mig",
                    "node.kubernetes.io/instance-type": "p5.48xlarge",
                },
            },
            "spec": {"resources": {"requests": {"nvidia.com/gpu": "8"}}},
            "status": {"providerID": "aws:///us-west-2b/i-0fff"},
        }
    )
    snapshot = Snapshot(nodes={node.name: node}, nodeclaims={claim.name: claim})
    rows = node_rows(snapshot, NOW)
    assert [r.status_word for r in rows] == ["Ready", "Launching"]
    assert rows[1].status == "Launching 30s"
    document = nodes_document(snapshot, NOW, context="ctx")
    assert document["launching"][0]["nodeClaim"] == "gpu-mig-zz9qk"
    assert document["nodes"][0]["mig"]["slices"] == {"1g.10gb": 56}
    assert document["nodes"][0]["acceleratedHardwareReady"]["reason"] == "DCGMError"


def test_short_names_drop_only_the_ec2_domain() -> None:
    assert short_name("ip-10-0-37-142.us-west-2.compute.internal") == "ip-10-0-37-142"
    assert short_name("ip-10-0-1-1.ec2.internal") == "ip-10-0-1-1"
    assert short_name("gpu-node-1.example.com") == "gpu-node-1.example.com"


def test_piped_output_is_plain_aligned_text_with_full_names() -> None:
    out = io.StringIO()
    print_node_table([node_row(p5(), None, NOW)], wide=False, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == [
        "NAME", "POOL", "TYPE", "STATUS", "AGE", "GPU", "MIG", "AHR", "CORDONED/TAINTS",
    ]  # fmt: skip
    assert lines[1].startswith("ip-10-0-37-142.us-west-2.compute.internal   gpu-mig")
    assert "\x1b[" not in out.getvalue()


def test_plain_table_pads_columns() -> None:
    out = io.StringIO()
    plain_table(("A", "BB"), [("xxx", "y"), ("z", "w")], out)
    assert out.getvalue() == "A     BB\nxxx   y\nz     w\n"


def test_status_duration_follows_the_clock_passed_in() -> None:
    later = NOW + timedelta(hours=2)
    assert node_row(p5(), None, later).status == "Ready 3h46m"


def test_resolve_node_name_takes_full_or_short_names_and_refuses_ambiguity() -> None:
    from mignurse.nodeview import resolve_node_name

    names = ["ip-10-0-1-2.us-west-2.compute.internal", "ip-10-0-1-3.ec2.internal"]
    assert resolve_node_name("ip-10-0-1-2", names) == names[0]
    assert resolve_node_name(names[1], names) == names[1]
    assert resolve_node_name("ip-10-0-9-9", names) is None
    assert resolve_node_name("ip-10-0-1-2", [*names, "ip-10-0-1-2.other.internal"]) is None
