"""Where a diagnosis input comes from: the live cluster, or an offline snapshot.

`load_live` reads a cluster through its client (`live.py`); `load_offline` reads a mignurse
bundle, a folder of bare kubectl dumps or another tool's node bundle, as a folder or a
`.tar.gz` (`offline.py`, through `files.py`'s bounded reader and `node_files.py` for each
node's own files). Both give a `Gathered` (`gathered.py`), which becomes a `DiagnosisInput`
once the moment to judge at is known.

Each name loads its module on first use (PEP 562 `__getattr__`), so a live diagnosis loads
none of the offline readers and an offline one none of the live reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mignurse.lazynames import name_loader

if TYPE_CHECKING:
    from mignurse.diagnose.sources.files import is_read
    from mignurse.diagnose.sources.gathered import Gathered, SourceError
    from mignurse.diagnose.sources.live import (
        DAEMONSETS,
        find_karpenter_deployment,
        karpenter_settings,
        load_live,
        read_cluster_policy,
        read_daemonsets,
        read_history,
        read_mig_configmaps,
        read_operator,
    )
    from mignurse.diagnose.sources.offline import load_offline

_HOMES = {
    "DAEMONSETS": "live",
    "Gathered": "gathered",
    "SourceError": "gathered",
    "find_karpenter_deployment": "live",
    "is_read": "files",
    "karpenter_settings": "live",
    "load_live": "live",
    "load_offline": "offline",
    "read_cluster_policy": "live",
    "read_mig_configmaps": "live",
    "read_operator": "live",
    "read_daemonsets": "live",
    "read_history": "live",
}

__all__ = [
    "DAEMONSETS",
    "Gathered",
    "SourceError",
    "find_karpenter_deployment",
    "is_read",
    "karpenter_settings",
    "load_live",
    "load_offline",
    "read_cluster_policy",
    "read_daemonsets",
    "read_history",
    "read_mig_configmaps",
    "read_operator",
]


__getattr__ = name_loader(__name__, _HOMES, globals())
