"""A cluster, a bundle and an audit log whose every free-text field carries terminal escapes,
and the scan that tells whether any of them reached a terminal raw.

The payload holds each kind a terminal obeys (xterm's control sequences,
https://invisible-island.net/xterm/ctlseqs/ctlseqs.html; Unicode's bidi controls,
https://www.unicode.org/reports/tr9/): OSC 52 (sets the clipboard), OSC 0 (the window
title), OSC 8 (a hyperlink), CSI (clears the screen), their C1 forms, DCS and APC strings,
BEL, backspace and carriage return (overwrite what was written), bidi overrides and isolates,
zero-width and invisible characters, a line separator, and rich markup."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from mignurse.sim import SimCluster

PAYLOAD = (
    "\x1b]52;c;aG9zdGlsZQ==\x07"  # OSC 52: the clipboard
    "\x1b]0;owned\x1b\\"  # OSC 0: the window title, ST-terminated
    "\x1b[2J\x1b[H"  # CSI: clear the screen, cursor home
    "\x1b]8;;https://evil.example/\x1b\\here\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
    "\x9b31m\x9d0;c1\x9c"  # C1 CSI, OSC and ST
    "\x1bP+q544e\x1b\\\x1b_apc\x1b\\"  # DCS and APC strings
    "\u202eevil\u202c\u2066iso\u2069\u200e\u061c"  # bidi override, isolate, marks
    "\u200b\u200d\ufeff\u2060\u00ad\U000e0041"  # zero-width, BOM, soft hyphen, a tag
    "\u2028\x07\x08\r\x7f\x00\t"  # line separator, BEL, BS, CR, DEL, NUL, tab
    "[link=https://evil.example/]m[/link][/][bold]"  # rich markup
)
# A node's name with the payload in it (the simulator lists it; a real API server would
# refuse it, a bundle someone sends does not), less what a file name cannot hold: a bundle
# keeps the node's files in a folder of its name.
NAME_PAYLOAD = PAYLOAD.replace("\x00", "").replace("/", "")
HOSTILE_NODE = "ip-10-0-99-9" + NAME_PAYLOAD + ".us-west-2.compute.internal"

_FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
    "|[" + "".join(chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf")
    .replace("\\", "\\\\").replace("]", "\\]").replace("-", "\\-") + "]"
)  # fmt: skip
# What rich and Textual write themselves on a terminal: SGR (styles), cursor moves and
# visibility, erase-in-line.
_OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;?]*[mHlhK]")


def raw_escapes(output: str, *, terminal: bool = False) -> list[str]:
    """Every control, escape or invisible character in `output` that the code did not write
    itself, with what surrounds it; on a `terminal`, rich's and Textual's own sequences (and
    the carriage return a pty adds before each line feed) are not counted."""
    if terminal:
        output = _OWN_SEQUENCES.sub("", output.replace("\r\n", "\n"))
    return [
        repr(output[max(m.start() - 30, 0) : m.end() + 30]) for m in _FORBIDDEN.finditer(output)
    ][:10]


# -- a hostile cluster ----------------------------------------------------------------------


def _hostile_node(template: dict[str, Any]) -> dict[str, Any]:
    node = json.loads(json.dumps(template))
    meta = node["metadata"]
    meta["name"] = HOSTILE_NODE
    meta["uid"] = "00000000-0000-4000-8000-00000000e5c0"
    meta["labels"] = {
        **meta.get("labels", {}),
        "kubernetes.io/hostname": HOSTILE_NODE,
        "karpenter.sh/nodepool": "pool" + PAYLOAD,
    }
    meta.pop("resourceVersion", None)
    node["spec"]["providerID"] = "aws:///us-west-2a/i-0hostile" + PAYLOAD
    return node


def _plant_in_node(node: dict[str, Any]) -> None:
    meta = node["metadata"]
    meta.setdefault("labels", {})["example.com/note" + PAYLOAD] = "v" + PAYLOAD
    meta.setdefault("annotations", {})["example.com/why"] = PAYLOAD
    node["spec"].setdefault("taints", []).append(
        {"key": "example.com/taint" + PAYLOAD, "value": PAYLOAD, "effect": "NoSchedule"}
    )
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        condition["message"] = condition.get("message", "") + PAYLOAD
    stamp = conditions[0].get("lastTransitionTime") if conditions else None
    conditions.append(
        {
            "type": "GpuHealth" + PAYLOAD,
            "status": "True",
            "reason": "Reason" + PAYLOAD,
            "message": PAYLOAD,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }
    )


def plant(sim: SimCluster) -> str:
    """Escapes in every free-text field the faces show: node names, pool, labels,
    annotations, taints, condition types, reasons and messages, events' reasons and
    messages, pods' names, NodeClaims' condition messages. Returns the GPU node that
    runs the hostile pod."""
    store = sim.store
    with store.lock:
        nodes = store.all("nodes")
        gpu = next(n for n in nodes if "nvidia.com/gpu" in n.get("status", {}).get("capacity", {}))
        for node in nodes:
            _plant_in_node(node)
            store.put("nodes", node)
        store.create("nodes", _hostile_node(gpu))
        for event in store.all("events"):
            event["message"] = event.get("message", "") + PAYLOAD
            store.put("events", event)
        for node in [*nodes, {"metadata": {"name": HOSTILE_NODE}}]:
            name = node["metadata"]["name"]
            store.create("events", _event(name, sim.now().strftime("%Y-%m-%dT%H:%M:%SZ")))
        for claim in store.all("nodeclaims"):
            for condition in claim.get("status", {}).get("conditions", []):
                condition["message"] = condition.get("message", "") + PAYLOAD
            store.put("nodeclaims", claim)
        # A NodeClaim still launching (a row of its own) and a NodePool, named with it.
        launching = json.loads(json.dumps(claim))
        launching["metadata"].update(name="claim" + NAME_PAYLOAD, uid=_UID + "e5c2")
        launching["metadata"].pop("resourceVersion", None)
        launching["status"] = {"conditions": [_launched(sim)]}
        store.create("nodeclaims", launching)
        pool = json.loads(json.dumps(store.all("nodepools")[0]))
        pool["metadata"].update(name="nodepool" + NAME_PAYLOAD, uid=_UID + "e5c3")
        pool["metadata"].pop("resourceVersion", None)
        store.create("nodepools", pool)
        pod = next(p for p in store.all("pods") if p.get("spec", {}).get("nodeName"))
        hostile_pod = json.loads(json.dumps(pod))
        hostile_pod["metadata"]["name"] = "pod" + PAYLOAD
        hostile_pod["metadata"]["uid"] = "00000000-0000-4000-8000-00000000e5c1"
        hostile_pod["metadata"].pop("resourceVersion", None)
        hostile_pod["spec"]["nodeName"] = gpu["metadata"]["name"]
        store.create("pods", hostile_pod)
    return str(gpu["metadata"]["name"])


_UID = "00000000-0000-4000-8000-0000000"


def _launched(sim: SimCluster) -> dict[str, Any]:
    stamp = sim.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "type": "Launched",
        "status": "Unknown",
        "reason": "Launching" + PAYLOAD,
        "message": PAYLOAD,
        "lastTransitionTime": stamp,
    }


def _event(node: str, stamp: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"hostile.{abs(hash(node)):x}",
            "namespace": "default",
            "uid": f"00000000-0000-4000-8000-{abs(hash(node)) % 10**12:012d}",
        },
        "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
        "reason": "NodeNotReady" + PAYLOAD,
        "message": "Node is not ready" + PAYLOAD,
        "source": {"component": "node-controller" + PAYLOAD},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 3,
        "type": "Warning",
    }


# -- a hostile bundle -----------------------------------------------------------------------

JOURNAL_LINES = (
    "Nov 29 03:01:00 ip-10-0-99-9 kubelet[2101]: E1129 03:01:00.000000 2101 kubelet.go:2855] "
    '"Container runtime network not ready" err="' + PAYLOAD + '"\n'
    "Nov 29 03:01:02 ip-10-0-99-9 kubelet[2101]: " + PAYLOAD + "\n"
    "Nov 29 03:01:03 ip-10-0-99-9 kernel: NVRM: Xid (PCI:0000:53:00): 79, " + PAYLOAD + "\n"
)


def write_bundle(sim: SimCluster, root: Path) -> Path:
    """The planted cluster as a bundle folder, with the hostile node's journals."""
    cluster = root / "cluster"
    cluster.mkdir(parents=True)
    for kind in ("nodes", "events", "pods", "nodeclaims", "nodepools"):
        (cluster / f"{kind}.json").write_text(sim.dump(kind))
    collected = sim.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    manifest = {"collected_at": collected, "context": "ctx" + PAYLOAD, "cluster": PAYLOAD}
    (root / "manifest.json").write_text(json.dumps(manifest))
    files = root / "nodes" / HOSTILE_NODE
    files.mkdir(parents=True)
    for name in ("kubelet.log", "kernel.log"):
        (files / name).write_text(JOURNAL_LINES)
    (files / "errors.txt").write_text(PAYLOAD + "\n")
    return root


# -- a hostile audit log --------------------------------------------------------------------


def write_audit(state_home: Path) -> Path:
    """Run records whose every field carries the payload, as another tool (or a hand) could
    leave them in the audit log."""
    folder = state_home / "mignurse"
    folder.mkdir(parents=True, mode=0o700)
    records = [
        {
            "ts": "2026-11-29T03:00:00.000000Z",
            "event": "started",
            "run": "run" + PAYLOAD,
            "runbook": "book" + PAYLOAD,
            "target": HOSTILE_NODE,
            "context": "ctx" + PAYLOAD,
            "who": {"local": "who" + PAYLOAD},
        },
        {
            "ts": "2026-11-29T03:00:05.000000Z",
            "event": "finished",
            "run": "run" + PAYLOAD,
            "outcome": "failed" + PAYLOAD,
        },
        # A run named plainly (to be asked for by name) whose records hold anything.
        {"ts": None, "event": "started" + PAYLOAD, "run": "r-hostile", "step": PAYLOAD},
        {"ts": 5, "event": "finished", "run": "r-hostile", "outcome": PAYLOAD},
    ]
    path = folder / "audit.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    path.chmod(0o600)
    return path
