"""Which kube contexts a `--context` selection names: names and fnmatch globs joined by
commas, or every context of the kubeconfig. Light to import: the kubeconfig reader loads
only where a selection must be read."""

from __future__ import annotations

import os

from mignurse.inert import inert

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
    as one context always was. KubeconfigError, one line naming the contexts there are, for
    a name or glob that matches none."""
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
    wanted: set[str] = set()
    for part in (p.strip() for p in selection.split(",")):
        if not part:
            continue
        if part in names:
            wanted.add(part)
            continue
        matched = _matching(part, names) if set(part) & _GLOB else []
        if not matched:
            kind = "glob" if set(part) & _GLOB else "context"
            raise KubeconfigError(
                f"--context {kind} {_shown(part)} matches no context in {label}: use one of: "
                f"{_some(names)}"
            )
        wanted.update(matched)
    if not wanted:
        raise KubeconfigError(f"--context {_shown(selection)} names no context")
    return [name for name in names if name in wanted]


def _matching(pattern: str, names: list[str]) -> list[str]:
    from fnmatch import fnmatchcase  # only where a glob is given

    return [name for name in names if fnmatchcase(name, pattern)]


def _shown(text: str) -> str:
    return repr(inert(text if len(text) <= 120 else text[:119] + "…"))


def _some(names: list[str]) -> str:
    if not names:
        return "none defined"
    shown = ", ".join(inert(n[:80]) for n in names[:_SHOWN_NAMES])
    more = len(names) - _SHOWN_NAMES
    return shown + (f" and {more} more" if more > 0 else "")
