"""HTTPS front of the simulator: kube-apiserver paths, verbs, Status errors, lists and watches.

What mignurse and kubectl use is served with the real server's shapes and rules (k8s.io/apiserver
v0.32 and kube-apiserver v1.32): discovery in both forms, server-side Tables, OpenAPI v3, list
items without kind/apiVersion and watch objects with them, `Status` errors, PUT with
resourceVersion preconditions, server-side apply with field managers, custom resources pruned,
defaulted and validated by their CRD schema, the watch cache's window and bookmarks, and
resourceVersion semantics of lists (exact, not-older-than, continue snapshots).

`server` holds the listening server and the route, `reads` gets, lists and watches, `writes`
patches, updates, deletes and evictions, `documents` version, discovery and OpenAPI,
`errors` the `Status` errors, `base` what every handler shares.
"""

from mignurse.sim.apiserver.server import SimServer

__all__ = ["SimServer"]
