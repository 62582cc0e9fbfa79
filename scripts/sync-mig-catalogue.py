"""Write mignurse's MIG catalogue from NVIDIA's published mig-parted default config.

    .venv/bin/python scripts/sync-mig-catalogue.py --from config-default.yaml \\
        --tag v0.15.0 --commit e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941

reads the upstream `deployments/systemd/config-default.yaml` of NVIDIA/mig-parted (a copy
saved from the tag, or `git show TAG:deployments/systemd/config-default.yaml` of a clone),
checks it as mig-parted would, and writes mignurse/gpu/mig-catalogue.json with the repo,
path, tag, commit and the file's git blob sha. `--check` writes nothing and exits 1 when the
shipped file differs. Exit 2: the input cannot be read or is not a mig-parted v1 config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mignurse.gpu.catalogue import CatalogueError, build_document, render

SHIPPED = Path(__file__).resolve().parent.parent / "mignurse" / "gpu" / "mig-catalogue.json"
UPSTREAM_REPO = "NVIDIA/mig-parted"
UPSTREAM_PATH = "deployments/systemd/config-default.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", required=True, help="the upstream YAML file")
    parser.add_argument("--tag", required=True, help="the upstream tag it was read at")
    parser.add_argument("--commit", required=True, help="the commit that tag names (40 hex)")
    parser.add_argument("--repo", default=UPSTREAM_REPO)
    parser.add_argument("--path", default=UPSTREAM_PATH, help="the file's path in the repo")
    parser.add_argument("--out", type=Path, default=SHIPPED, help="where to write the JSON")
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args(argv)
    commit = args.commit.lower()
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        print(f"sync-mig-catalogue: --commit {args.commit!r} is not a 40-hex commit id",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        data = Path(args.source).read_bytes()
        document = build_document(data, repo=args.repo, path=args.path, tag=args.tag, commit=commit)
    except (OSError, CatalogueError) as exc:
        print(f"sync-mig-catalogue: {args.source}: {exc}", file=sys.stderr)
        return 2
    text = render(document)
    if args.check:
        current = args.out.read_text("utf-8") if args.out.exists() else ""
        if current != text:
            print(f"sync-mig-catalogue: {args.out} differs from {args.source}", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, "utf-8")
    blob = document["source"]["blob"]
    print(f"wrote {args.out}: {len(document['configs'])} configs from {args.repo}@{args.tag} "
          f"{args.path} (blob {blob})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
