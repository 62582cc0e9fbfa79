"""Write the Karpenter CRDs the simulator serves from a clone of aws/karpenter-provider-aws.

    .venv/bin/python scripts/sync-karpenter-crds.py --git /path/to/karpenter-provider-aws.git

reads `pkg/apis/crds/{karpenter.sh_nodepools,karpenter.sh_nodeclaims,
karpenter.k8s.aws_ec2nodeclasses}.yaml` (what the `karpenter-crd` chart installs) at every
release tag from v1.1.0 on, keeps each distinct document once, and writes
mignurse/sim/karpenter-crds.json.xz: per tag its commit and the documents' keys. `--check`
writes nothing and exits 1 when the shipped file differs. Exit 2: the clone cannot be read.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SHIPPED = Path(__file__).resolve().parent.parent / "mignurse" / "sim" / "karpenter-crds.json.xz"
REPO = "aws/karpenter-provider-aws"
CRD_DIR = "pkg/apis/crds"
FILES = {
    "nodepools": "karpenter.sh_nodepools.yaml",
    "nodeclaims": "karpenter.sh_nodeclaims.yaml",
    "ec2nodeclasses": "karpenter.k8s.aws_ec2nodeclasses.yaml",
}
TAG = re.compile(r"^v1\.(\d+)\.(\d+)$")


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def build(repo: str) -> bytes:
    tags = sorted(
        (t for t in git(repo, "tag").split() if TAG.match(t) and int(TAG.match(t)[1]) >= 1),  # type: ignore[index]
        key=lambda t: tuple(int(x) for x in t[1:].split(".")),
    )
    documents: dict[str, Any] = {}
    index: dict[str, Any] = {}
    for tag in tags:
        commit = git(repo, "rev-list", "-n", "1", tag).strip()
        keys = {}
        for plural, name in FILES.items():
            text = git(repo, "show", f"{tag}:{CRD_DIR}/{name}")
            key = hashlib.sha256(text.encode()).hexdigest()[:16]
            documents.setdefault(key, yaml.safe_load(text))
            keys[plural] = key
        index[tag] = {"commit": commit, "crds": keys}
    payload = {"repo": REPO, "path": CRD_DIR, "files": FILES, "tags": index, "documents": documents}
    data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git", required=True, help="a clone (or bare mirror) of " + REPO)
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args(argv)
    try:
        data = build(args.git)
    except (subprocess.CalledProcessError, OSError, yaml.YAMLError) as exc:
        print(f"sync-karpenter-crds: cannot read {args.git}: {exc}", file=sys.stderr)
        return 2
    if args.check:
        same = args.out.exists() and lzma.decompress(args.out.read_bytes()) == lzma.decompress(data)
        print("up to date" if same else f"{args.out} differs from {args.git}")
        return 0 if same else 1
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
