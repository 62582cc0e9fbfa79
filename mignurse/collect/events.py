"""What a collection tells the face that asked for it, step by step (`run_collect`'s
progress). Apart from the collector so that a face can name these without loading it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# What a collection tells its face as it goes (CollectEvent.kind)
NOTICE = "notice"  # a note on reading the cluster (`text`)
STARTED = "started"  # the nodes are chosen and about to start (`nodes`, `out`, `transport`)
NODE_STEP = "node-step"  # a node's collection started, or took a step (`text`)
NODE_DONE = "node-done"  # a node's files are in the bundle, or it failed (`ok`, `text`)


@dataclass(frozen=True)
class CollectEvent:
    """One step of a collection, for the face to show (`run_collect`'s progress).

    `text`: a notice; a node's step ("collecting over ssm", "collecting over
    nodediagnostic: NodeDiagnostic created"); a node's end, "ok" or why not; when started,
    the journal window in words. A node's end carries what it sent (`bytes`) and the files
    filed from it (`files`)."""

    kind: str
    node: str = ""
    text: str = ""
    ok: bool = False
    bytes: int = 0
    files: int = 0
    nodes: int = 0
    out: Path | None = None
    transport: str = ""


Progress = Callable[[CollectEvent], None]
