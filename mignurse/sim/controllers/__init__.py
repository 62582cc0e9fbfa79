"""The simulated control loops: Karpenter, kubelet, node lifecycle, NMA, managed node groups,
the GPU operator, termination and drains, one module each.

Event-driven: every future change is an action in one priority queue keyed by sim time,
so `run_until()` is deterministic for a given scenario and seed. `ControlLoops` (loops.py) holds
that queue, the clock, the transaction and the event recorder, and one instance of each
controller; a controller reaches the others through it (`self.loops.kubelet`, ...). All methods
run under the store lock; each action runs in a `Txn` so several edits to one object make
one write.
"""

from mignurse.sim.controllers.base import Machine, Txn
from mignurse.sim.controllers.loops import ControlLoops

__all__ = ["ControlLoops", "Machine", "Txn"]
