"""`mignurse run` starts with no step module imported: `load_actions()`
(mignurse/runner/steps/__init__.py) must import every one, subpackages' included, or a shipped
runbook naming one of their actions is refused as unknown before it can run."""

from __future__ import annotations

import json
import subprocess
import sys

from mignurse.runner.schema import load_runbooks
from mignurse.runner.steps import MODULES

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


REGISTERED = """
import json
from mignurse.runner.steps import load_actions
print(json.dumps({name: cls.__module__ for name, cls in load_actions().items()}))
"""


def test_the_runner_s_table_names_the_module_that_registers_each_action() -> None:
    # A step imports only the module MODULES names for its action: a new @action missing
    # from the table, or one moved to another module, would be refused or fail to register.
    done = subprocess.run(
        [sys.executable, "-c", REGISTERED], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == MODULES


def test_a_runbook_step_imports_only_its_own_action_s_module() -> None:
    code = (
        "import json, sys\n"
        "from mignurse.runner.schema import load_runbooks\n"
        "book = load_runbooks()['cordon']\n"
        "assert [s.make().name for s in book.steps]\n"
        "steps = [m for m in sys.modules if m.startswith('mignurse.runner.steps.')]\n"
        "print(json.dumps(steps))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(done.stdout))
    wanted = {MODULES[step.action] for step in load_runbooks()["cordon"].steps}
    assert loaded == wanted


def test_the_pause_record_the_runbook_writes_is_the_one_the_diagnosis_reads() -> None:
    from mignurse.diagnose.inputs import REPAIR_PAUSED_ANNOTATION
    from mignurse.runner.steps.repair.deployment import ANNOTATION_PAUSED

    assert ANNOTATION_PAUSED == REPAIR_PAUSED_ANNOTATION


EFFECTS_OF_THE_CLASSES = """
import json
from mignurse.runner.steps import load_actions
print(json.dumps({n: [int(c.harm), c.mutates] for n, c in load_actions().items()}))
"""


def test_the_runner_s_table_of_harms_is_what_each_action_s_class_declares() -> None:
    # The runbook list and a runbook's confirmation level read the table, not the classes: an
    # action whose harm is raised, or a new one missing from the table, must show here.
    from mignurse.runner.steps import EFFECTS

    done = subprocess.run(
        [sys.executable, "-c", EFFECTS_OF_THE_CLASSES],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    declared = json.loads(done.stdout)
    assert {n: [int(e.harm), e.mutates] for n, e in EFFECTS.items()} == declared
    assert set(EFFECTS) == set(MODULES)


def test_a_runbook_s_harm_read_from_the_table_is_the_one_its_steps_declare() -> None:
    from mignurse.runner.step import Harm

    for book in load_runbooks().values():
        actions = [step.make() for step in book.steps]
        declared = max((a.harm for a in actions if a.mutates), default=Harm.NONE)
        assert (book.harm, book.mutates) == (declared, any(a.mutates for a in actions)), book.name
