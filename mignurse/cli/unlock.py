"""`mignurse unlock`: remove a runbook lock whose run is dead, after showing its holder.

Decisions: a lock whose run is dead (SIGKILL, a lost laptop) is removed after showing its
holder's liveness; a holder still running here, or renewing recently elsewhere, needs
`--force`. It asks for the node (or cluster) name typed, and is audited.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from mignurse.cli.common import connect, connection_options
from mignurse.cli.runbooks import RunCommandError, find_node

if TYPE_CHECKING:
    from mignurse.cluster.client import ClusterClient, Resource


def add_parser(sub: Any) -> None:
    unlock = sub.add_parser(
        "unlock",
        help="remove a runbook lock whose run is dead (shows who holds it first)",
        description="Exit code: 0 unlocked (or nothing to unlock), 1 declined or refused "
        "(its holder looks alive: --force), 2 usage.",
    )
    connection_options(unlock, top=False)
    unlock.add_argument("node", nargs="?", metavar="NODE", help="the locked node")
    unlock.add_argument(
        "--cluster",
        action="store_true",
        help="the cluster lock of pause/resume-node-repair (on the kube-system Namespace)",
    )
    unlock.add_argument("--yes", action="store_true", help="no confirmation prompt")
    unlock.add_argument("--force", action="store_true", help="even when its holder looks alive")


def cmd_unlock(args: argparse.Namespace) -> int:
    from mignurse.cli.runview import TerminalConfirmer
    from mignurse.runner.audit import Audit, local_holder
    from mignurse.runner.lock import holder_alive, liveness, lock_resource, read_lock
    from mignurse.runner.plan import typed_word
    from mignurse.runner.step import Harm

    if bool(args.node) == bool(args.cluster):
        raise RunCommandError("name the locked node, or pass --cluster for the cluster lock")
    if getattr(args, "read_only", False):
        raise RunCommandError("--read-only: unlock changes the cluster")
    audit = Audit()
    problem = audit.problem()
    if problem:  # an unlock that cannot be audited is not done: refuse before reading the lock
        raise RunCommandError(f"{problem}; nothing was unlocked")
    client = connect(args)
    try:
        target, name = _locked(args, client)
        resource, obj_name, what = lock_resource(target, name)
        current, version = read_lock(client, resource, obj_name)
        if current is None:
            print(f"{what} holds no mignurse lock")
            return 0
        now = client.server_now()
        shown = (
            f"{what} is locked by {current.get('holder', '?')} (run {current.get('run', '?')}, "
            f"{current.get('runbook', '?')}; {liveness(current, now)}) until "
            f"{str(current.get('expires') or '?')[11:16]}Z"
        )
        print(shown, file=sys.stderr)
        alive = holder_alive(current, now)
        if alive and not args.force:
            print(
                f"mignurse: error: its run looks alive ({liveness(current, now)}): stop it "
                "first, or pass --force if you are sure it is not",
                file=sys.stderr,
            )
            return 1
        who = {"local": local_holder(), "kube": client.info.user}
        word = typed_word(client.info.name, name, node=target == "node")
        if not args.yes:
            if not sys.stdin.isatty():
                raise RunCommandError(
                    "stdin is not a terminal, so nobody can confirm: pass --yes to unlock"
                )
            if not TerminalConfirmer().confirm(Harm.HIGH, shown, word):
                audit.write("unlock-declined", str(current.get("run") or ""), target=name, who=who)
                print(f"{what}: declined, still locked")
                return 1
        _remove_lock(client, resource, obj_name, version, what)
        audit.write(
            "unlock",
            str(current.get("run") or ""),
            target=name,
            lock=current,
            liveness=liveness(current, now),
            forced=bool(args.force and alive),
            confirmed="--yes" if args.yes else f"typed {word}",
            who=who,
        )
        print(f"{what}: unlocked (the lock of run {current.get('run', '?')} is removed)")
        return 0
    finally:
        client.close()


def _locked(args: argparse.Namespace, client: ClusterClient) -> tuple[str, str]:
    """Which lock is meant: ("node", the node's full name) or ("cluster", its name)."""
    if args.node:
        name = find_node(client)(args.node)
        if name is None:
            raise RunCommandError(f"no node {args.node!r} in context {client.info.context}")
        return "node", name
    return "cluster", client.info.cluster or client.info.context


def _remove_lock(
    client: ClusterClient, resource: Resource, obj_name: str, version: str, what: str
) -> None:
    """Drop the lock annotation, only if the object is still the version that was shown."""
    from mignurse.cluster.client import ClusterError, Conflict
    from mignurse.runner.lock import LOCK_ANNOTATION

    try:
        client.patch(
            resource,
            obj_name,
            {"metadata": {"resourceVersion": version, "annotations": {LOCK_ANNOTATION: None}}},
        )
    except Conflict:
        raise RunCommandError(
            f"{what} changed while you were deciding: run `mignurse unlock` again"
        ) from None
    except ClusterError as exc:
        raise RunCommandError(f"cannot unlock {what}: {exc}") from None
