"""`mignurse run` starts with no step module imported: `load_actions()`
(mignurse/runner/steps/__init__.py) must import every one, subpackages' included, or a shipped
runbook naming one of their actions is refused as unknown before it can run."""

from __future__ import annotations

import json
import subprocess
import sys

from mignurse.runner.schema import load_runbooks

LOADED = """
import json
from mignurse.runner.steps import load_actions
print(json.dumps(sorted(load_actions())))
"""


def test_a_fresh_process_knows_every_action_the_shipped_runbooks_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120, check=True
    )
    known = set(json.loads(done.stdout))
    named = {step.action for book in load_runbooks().values() for step in book.steps}
    assert {"delete-nodeclaim", "apply-mig-layout", "pause-node-repair"} <= named
    assert named <= known, f"not registered: {sorted(named - known)}"
