"""The cluster adapters: the API client, the watches, the history store.

`SIM_EXTENSION` is the name of the extension the simulator writes on its kubeconfig's cluster
entry; the faces look for it to reach simulated nodes through their sandboxes instead of SSM
or SSH. It lives here, importing nothing, so that looking for it loads neither the simulator
nor the kubernetes client.
"""

SIM_EXTENSION = "mignurse.sim"
