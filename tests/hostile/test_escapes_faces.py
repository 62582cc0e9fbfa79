"""Escapes planted in every field a cluster, a bundle or the audit log can set reach no
terminal raw: `nodes`, `diagnose` (live, and `--from` a bundle with its journals and a
node's timeline) and `runs`, piped and on a terminal (a pty, where rich draws its own
styles), show each planted control visibly; `-o json` keeps the exact values."""

from __future__ import annotations

import json
import os
import pty
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cliserver
import pytest

from mignurse.sim import SimCluster, load_scenario

from .escapes import HOSTILE_NODE, PAYLOAD, plant, raw_escapes, write_audit, write_bundle

# One worker builds the hostile cluster once for the whole module (make test: loadgroup).
pytestmark = pytest.mark.xdist_group("escapes-faces")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("hostile")
    sim = SimCluster(load_scenario("dcgm-repair-loop"), speed=0).start()
    try:
        plant(sim)
        paths = {
            "kubeconfig": sim.write_kubeconfig(root / "config"),
            "bundle": write_bundle(sim, root / "bundle"),
            "state": root / "state",
        }
        write_audit(paths["state"])
        yield paths
    finally:
        sim.stop()


FACES = {
    "nodes": ["nodes"],
    "nodes-wide": ["nodes", "-o", "wide"],
    "diagnose": ["diagnose"],
    "diagnose-bundle": ["diagnose", "--from", "{bundle}"],
    "diagnose-bundle-node": ["diagnose", "--from", "{bundle}", "--node", HOSTILE_NODE],
    "runs": ["runs"],
    "runs-one": ["runs", "r-hostile"],
}
STYLED = {"nodes", "nodes-wide", "diagnose", "diagnose-bundle"}  # rich draws them on a terminal


def _run(hostile: dict[str, Path], face: str, *, stdout: int | None = None) -> Any:
    args = [a.format(bundle=hostile["bundle"]) for a in FACES[face]]
    env = {
        "KUBECONFIG": str(hostile["kubeconfig"]),
        "XDG_STATE_HOME": str(hostile["state"]),
        "TERM": "xterm-256color",
        "COLUMNS": "160",
    }
    return mignurse(*args, env=env, stdout=stdout)


def mignurse(*args: str, env: dict[str, str], stdout: int | None = None) -> Any:
    """`mignurse ARGS` with only `env` of this machine's settings that matter (no colour
    setting, kubeconfig or state folder of the machine leaks in); `stdout`: a pty's fd."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AWS_", "KUBE", "MIGNURSE_", "XDG_STATE_HOME"))
        and k not in ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES")
    }
    return cliserver.run(
        list(args), env={**clean, **env}, cwd=os.getcwd(), timeout=120, stdout=stdout
    )


@pytest.mark.parametrize("face", FACES)
def test_planted_escapes_are_shown_not_obeyed_when_piped(
    hostile: dict[str, Path], face: str
) -> None:
    result = _run(hostile, face)
    assert result.returncode in (0, 1, 2), result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert raw_escapes(result.stdout) == []
    assert raw_escapes(result.stderr) == []
    # The planted text is there, visibly (a narrow table folds it: its pieces are there).
    assert "\\x1b" in result.stdout and "<U+202E>" in result.stdout


@pytest.mark.parametrize("face", FACES)
def test_planted_escapes_are_shown_not_obeyed_on_a_terminal(
    hostile: dict[str, Path], face: str
) -> None:
    primary, secondary = pty.openpty()
    try:
        result = _run(hostile, face, stdout=secondary)
        os.close(secondary)
        secondary = -1
        shown = _drain(primary)
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert result.returncode in (0, 1, 2), result.stderr[-2000:]
    if face in STYLED:
        assert "\x1b[" in shown, "rich drew no style: not a terminal?"
    assert raw_escapes(shown, terminal=True) == []
    assert raw_escapes(result.stderr) == []
    assert "\x1b]" not in shown and "\x1bP" not in shown and "\u202e" not in shown
    assert "\\x1b" in shown  # shown, as text


def _drain(fd: int) -> str:
    """What the pty received, bytes kept as they were (an 8-bit C1 byte stays visible to
    the scan as a lone surrogate)."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except OSError:  # EIO: every writer has closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


def _strings(document: Any) -> Iterator[str]:
    if isinstance(document, str):
        yield document
    elif isinstance(document, dict):
        for key, value in document.items():
            yield key
            yield from _strings(value)
    elif isinstance(document, list):
        for value in document:
            yield from _strings(value)


@pytest.mark.parametrize(
    "args",
    [
        ["nodes", "-o", "json"],
        ["diagnose", "-o", "json"],
        ["diagnose", "--from", "{bundle}", "-o", "json"],
    ],
    ids=["nodes", "diagnose", "diagnose-bundle"],
)
def test_json_output_keeps_the_exact_planted_values(
    hostile: dict[str, Path], args: list[str]
) -> None:
    env = {"KUBECONFIG": str(hostile["kubeconfig"])}
    result = mignurse(*(a.format(bundle=hostile["bundle"]) for a in args), env=env)
    assert result.returncode in (0, 1, 2), result.stderr[-2000:]
    strings = list(_strings(json.loads(result.stdout)))
    assert any(PAYLOAD in s for s in strings)
    if args[0] == "nodes":
        assert HOSTILE_NODE in strings


PACKAGE = Path(__file__).resolve().parents[2] / "mignurse"
FACE_MODULES = [
    *(PACKAGE / "cli").glob("*.py"),
    *(PACKAGE / "tui").rglob("*.py"),
    PACKAGE / "render.py",
]


def test_every_face_draws_through_the_inert_widgets_and_consoles() -> None:
    """What keeps a new screen or command from forgetting: no face builds a rich `Console`
    of its own (`render.console_for`), escapes markup with rich's `escape` alone
    (`inert_markup`), or builds on Textual's `Static`, `Label` or `DataTable` rather than
    tui/shown.py's."""
    import ast

    assert len(FACE_MODULES) > 30
    broken = []
    for path in FACE_MODULES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Console":
                broken.append(f"{path}:{node.lineno}: a rich Console of its own")
            if isinstance(node, ast.ImportFrom) and node.module == "rich.markup":
                broken.append(f"{path}:{node.lineno}: rich.markup's escape")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "textual.widgets"
                and path.name != "shown.py"
            ):
                raw = {a.name for a in node.names} & {"Static", "Label", "DataTable"}
                if raw:
                    broken.append(f"{path}:{node.lineno}: Textual's {', '.join(sorted(raw))}")
    assert broken == []
