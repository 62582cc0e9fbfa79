"""`mignurse nodes` against an API server that answers badly: wall time, peak RSS, the line.

    .venv/bin/python benchmarks/bench_responses.py [CASE ...]

Each case runs the real CLI in a process of its own against the hostile server of
tests/hostile/test_responses.py; its peak memory is the kernel's high-water mark of that
process (tests/hostile/peak.py). Target: every case under 1 GiB and ended by one line.

  gzip-bomb               ~8 MB of gzip that would inflate to 8 GiB
  gzip-bomb-ratio-raised  the same, MIGNURSE_MAX_RESPONSE_RATIO=100000 (the size cap stops it)
  1e6-nodes-one-page      a server that ignores limit= and sends a million nodes at once
  1e6-empty-objects       a million `{}` in one 3 MB page (the page cap stops it)
  1e6-nodes-paged         a million nodes, 500 a page (the list cap stops it at 250,000)
  1e5-nodes-paged         100,000 nodes, 500 a page: listed in full
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from figures import figure
from hostile import test_responses as hostile
from hostile.inputs import node_object
from hostile.peak import mignurse_peak

TARGET_BYTES = 2**30


def paged(total: int) -> hostile.Answer:
    """`total` nodes shaped like a GPU node's, 500 a page."""
    base = node_object()

    def node(index: int) -> dict[str, Any]:
        obj = copy.deepcopy(base)
        obj["metadata"]["name"] = f"ip-10-{index // 65536}-{index // 256 % 256}-{index % 256}"
        obj["metadata"]["uid"] = f"uid-{index}"
        obj["spec"]["providerID"] = f"aws:///us-west-2a/i-{index:017x}"
        return obj

    def answer(handler: hostile.Handler) -> None:
        start = int(handler.query().get("continue") or 0)
        count = min(500, total - start)
        token = str(start + count) if start + count < total else ""
        items = [node(i) for i in range(start, start + count)]
        hostile.send(handler, 200, hostile.kube_list(items, token=token))

    return answer


def empty_objects(handler: hostile.Handler) -> None:
    items = b",".join([b"{}"] * 1_000_000)
    hostile.send(handler, 200, b'{"metadata":{},"items":[' + items + b"]}")


CASES: dict[str, tuple[Any, dict[str, str]]] = {
    "gzip-bomb": (lambda: hostile.gzip_bomb, {}),
    "gzip-bomb-ratio-raised": (
        lambda: hostile.gzip_bomb,
        {"MIGNURSE_MAX_RESPONSE_RATIO": "100000"},
    ),
    "1e6-nodes-one-page": (lambda: hostile.one_page_of(1_000_000), {}),
    "1e6-empty-objects": (lambda: empty_objects, {}),
    "1e6-nodes-paged": (lambda: paged(1_000_000), {}),
    "1e5-nodes-paged": (lambda: paged(100_000), {}),
}


def serve(answer: hostile.Answer, folder: Path) -> tuple[hostile.Server, Path]:
    server = hostile.Server(("127.0.0.1", 0), hostile.Handler)
    server.hostile = hostile.Hostile(nodes=answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "bench"}}],
        "contexts": [{"name": "hostile", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "hostile",
    }
    kubeconfig = folder / f"kubeconfig-{server.server_port}"
    kubeconfig.write_text(yaml.safe_dump(config))
    return server, kubeconfig


def main() -> int:
    chosen = sys.argv[1:] or list(CASES)
    failed = False
    print(f"{'case':<24} {'exit':>4} {'wall s':>7} {'peak MiB':>9}  line")
    with tempfile.TemporaryDirectory(prefix="mignurse-bench-responses-") as temp:
        folder = Path(temp)
        for name in chosen:
            make_answer, extra = CASES[name]
            server, kubeconfig = serve(make_answer(), folder)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "MIGNURSE_"))}
            env.update(extra)
            started = time.monotonic()
            result, peak = mignurse_peak(
                "--kubeconfig", str(kubeconfig), "nodes", env=env, timeout=600
            )
            wall = time.monotonic() - started
            server.shutdown()
            server.server_close()
            line = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
            ok = peak < TARGET_BYTES and result.returncode in (0, 2)
            failed = failed or not ok
            figure(f"hostile answer: {name}, peak RSS", peak / 2**20, "MiB", target=1024)
            print(
                f"{name:<24} {result.returncode:>4} {wall:>7.1f} {peak / 2**20:>9.0f}  {line[:150]}"
            )
    print("\nPASS  every case under 1 GiB, ended in one line" if not failed else "\nFAIL")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
