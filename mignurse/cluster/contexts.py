"""Which kube contexts a `--context` selection names: names and fnmatch globs joined by
commas, or every context of the kubeconfig. Light to import: the kubeconfig reader loads
only where a selection must be read."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mignurse.inert import inert, inert_name

if TYPE_CHECKING:
    from mignurse.cluster.client import KubeconfigError

_GLOB = frozenset("*?[")
_SHOWN_NAMES = 20


def several(selection: str | None, all_contexts: bool) -> bool:
    """Whether a `--context` value (or `--all-contexts`) may name more than one context."""
    return all_contexts or (selection is not None and bool(set(selection) & (_GLOB | {","})))


def select_contexts(
    kubeconfig: str | None, selection: str | None, all_contexts: bool = False
) -> list[str | None]:
    """The contexts `--context` names, in kubeconfig order, each once: names and fnmatch
    globs joined by commas (`prod-*,staging`), or every context with `all_contexts`. A plain
    name (or none: the current context, `[None]`) is taken as it is, for `connect` to judge,
    as one context always was (`unknown_context` words its absence as a list's). One line
    (KubeconfigError) for a name or glob that matches none, naming the contexts there are,
    and for commas that name nothing."""
    if not several(selection, all_contexts):
        return [selection]
    from mignurse.cluster import kubeconfig as files
    from mignurse.cluster.client import KubeconfigError

    label, paths = files.config_paths(kubeconfig)
    if not any(os.path.exists(path) for path in paths):
        raise KubeconfigError(f"no kubeconfig found at {inert(label)}: check --kubeconfig")
    try:
        label, names = files.context_names(kubeconfig)
    except files.KubeconfigProblem as exc:
        raise KubeconfigError(str(exc)) from None
    if all_contexts:
        if selection is not None:
            raise KubeconfigError("give --context or --all-contexts, not both")
        if not names:
            raise KubeconfigError(f"kubeconfig {label} defines no context")
        return list(names)
    assert selection is not None
    if selection in names:  # a context whose own name holds a comma or a glob character
        return [selection]
    parts = [p.strip() for p in selection.split(",")]
    if not any(parts):  # `--context ''` alone is the current context, as kubectl's
        raise KubeconfigError(
            f"--context {inert_name(selection)} names no context: give a context name or glob, "
            "or leave --context out for the current one"
        )
    wanted: set[str] = set()
    for part in (p for p in parts if p):
        if part in names:
            wanted.add(part)
            continue
        matched = _matching(part, names) if set(part) & _GLOB else []
        if not matched:
            raise _not_found(part, label, names)
        wanted.update(matched)
    return [name for name in names if name in wanted]


def unknown_context(kubeconfig: str | None, name: str | None) -> KubeconfigError | None:
    """The line `select_contexts` gives a name that matches no context, for a plain
    `--context NAME` the kubeconfig does not define; None when it defines it, when no name
    was given (the current context), or when the kubeconfig cannot be read (the error
    connecting already says why). Asked only once connecting to `name` failed, so that a
    command that connects reads the kubeconfig once."""
    if not name:
        return None
    from mignurse.cluster import kubeconfig as files

    if not any(os.path.exists(path) for path in files.config_paths(kubeconfig)[1]):
        return None
    try:
        label, names = files.context_names(kubeconfig)
    except files.KubeconfigProblem:
        return None
    return None if name in names else _not_found(name, label, names)


def listed(names: list[str]) -> str:
    """Context names as one line shows them: the first 20, in the order given, then how
    many more; made inert (a kubeconfig someone sent may name them with escapes)."""
    if not names:
        return "none defined"
    shown = ", ".join(inert(n[:80]) for n in names[:_SHOWN_NAMES])
    more = len(names) - _SHOWN_NAMES
    return shown + (f" and {more} more" if more > 0 else "")


def _not_found(part: str, label: str, names: list[str]) -> KubeconfigError:
    """One wording for a name or glob that matches nothing, alone or in a list: the part
    that matched nothing, once, and the contexts there are, in kubeconfig order."""
    from mignurse.cluster.client import KubeconfigError

    kind = "glob" if set(part) & _GLOB else "name"
    return KubeconfigError(
        f"context {inert_name(part)} not found in {label}: the {kind} matches no context; use one "
        f"of: {listed(names)}"
    )


def _matching(pattern: str, names: list[str]) -> list[str]:
    from fnmatch import fnmatchcase  # only where a glob is given

    return [name for name in names if fnmatchcase(name, pattern)]
