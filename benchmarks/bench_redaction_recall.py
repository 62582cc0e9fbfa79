"""Redaction recall and false positives: every secret kind of the generated corpus in every
rendering a bundle holds, and the benign corpus (look-alikes and the real-evidence files).

    .venv/bin/python benchmarks/bench_redaction_recall.py [--all-kinds]

Prints the leaked placements over all placements, per rendering and per kind (a placement
leaks when any of its secrets survives, in any spelling), the placements whose evidence
around the secret was lost, and the share of benign samples that come out byte for byte.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from mignurse.collect.redact import Redactor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figure

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from hostile.secrets_corpus import (
    RENDERINGS,
    Secret,
    encodings,
    file_name,
    leaked,
    look_alikes,
    read_back,
    real_evidence_files,
    secrets,
)


def _raw(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


def _evidence_lost(case: Secret, rendering: str, out: bytes) -> bool:
    if rendering in ("json-indented", "yaml") and (case.env or case.args):
        return False  # the object holds the env entry or the args, not the line around them
    if rendering in encodings.OPAQUE:
        return False  # a base64 run that holds a secret is masked whole, evidence and all
    text = out.decode("utf-8", "replace")
    return any(k not in text and json.dumps(k)[1:-1] not in text for k in case.keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-kinds", action="store_true", help="a line for every kind")
    args = parser.parse_args()

    cases = secrets()
    started = time.perf_counter()
    leaks: Counter[tuple[str, str]] = Counter()
    lost: list[tuple[str, str]] = []
    for rendering, render in RENDERINGS.items():
        for case in cases:
            # as an engineer reads it: gunzipped, partial lines joined, %XX and base64 decoded
            out = read_back(rendering, Redactor().redact(file_name(rendering), _raw(render(case))))
            if leaked(case, out):
                leaks[case.kind, rendering] += 1
            elif _evidence_lost(case, rendering, out):
                lost.append((case.kind, rendering))
    total = len(cases) * len(RENDERINGS)
    leaked_total = sum(leaks.values())
    print(
        f"recall: {total - leaked_total}/{total} placements masked, {leaked_total} leaked "
        f"({100 * leaked_total / total:.2f} %); {len(cases)} kinds x {len(RENDERINGS)} renderings"
    )
    print("per rendering (leaked/placements):")
    for rendering in RENDERINGS:
        n = sum(c for (_, r), c in leaks.items() if r == rendering)
        print(f"  {rendering:16} {n}/{len(cases)}")
    print("per kind (leaked/placements):")
    for case in cases:
        n = sum(c for (k, _), c in leaks.items() if k == case.kind)
        if n or args.all_kinds:
            where = ", ".join(r for (k, r) in leaks if k == case.kind)
            print(f"  {case.kind:40} {n}/{len(RENDERINGS)}  {where}")
    if not leaked_total and not args.all_kinds:
        print("  (every kind masked in every rendering; --all-kinds lists them)")
    print(f"evidence beside a masked secret lost: {len(lost)} placements")
    for kind, rendering in lost:
        print(f"  {kind} in {rendering}")

    benign = look_alikes()
    same = 0
    changed: list[str] = []
    for rendering, render in RENDERINGS.items():
        for alike in benign:
            raw = _raw(render(alike))
            if Redactor().redact(file_name(rendering), raw) == raw:
                same += 1
            else:
                changed.append(f"{alike.kind} in {rendering}")
    files = real_evidence_files()
    for path in files:
        raw = path.read_bytes()
        out = Redactor().redact(path.name, raw)
        # Bottlerocket's logdog wrote "REDACTED" where its secrets were: marking it is expected
        if out in (raw, raw.replace(b'"REDACTED"', b'"***REDACTED***"')):
            same += 1
        else:
            changed.append(str(path))
    samples = len(benign) * len(RENDERINGS) + len(files)
    print(
        f"benign byte-identical: {same}/{samples} ({100 * same / samples:.2f} %): "
        f"{len(benign)} look-alikes x {len(RENDERINGS)} renderings + {len(files)} "
        "real-evidence files"
    )
    for name in changed:
        print(f"  changed: {name}")
    print(f"({time.perf_counter() - started:.1f} s)")
    figure(
        f"secrets leaked, of {total} placements",
        leaked_total,
        "placements",
        target=0,
        peer="placements masked",
        peer_value=total - leaked_total,
    )
    figure(f"benign samples changed, of {samples}", len(changed), "samples", target=0)


if __name__ == "__main__":
    main()
