"""Where a diagnosis input comes from: the live cluster, or an offline snapshot.

`load_live` reads a cluster through its client (`live.py`); `load_offline` reads a mignurse
bundle, a folder of bare kubectl dumps or another tool's node bundle, as a folder or a
`.tar.gz` (`offline.py`, through `files.py`'s bounded reader and `node_files.py` for each
node's own files). Both give a `Gathered` (`gathered.py`), which becomes a `DiagnosisInput`
once the moment to judge at is known.
"""

from mignurse.diagnose.sources.files import is_read
from mignurse.diagnose.sources.gathered import Gathered, SourceError
from mignurse.diagnose.sources.live import (
    DAEMONSETS,
    find_karpenter_deployment,
    karpenter_settings,
    load_live,
    read_daemonsets,
    read_history,
)
from mignurse.diagnose.sources.offline import load_offline

__all__ = [
    "DAEMONSETS",
    "Gathered",
    "SourceError",
    "find_karpenter_deployment",
    "is_read",
    "karpenter_settings",
    "load_live",
    "load_offline",
    "read_daemonsets",
    "read_history",
]
