"""The steps of `reapply-mig-no-hooks`: re-partition a node's GPUs with nothing but
`nvidia-mig-parted`, never through a hook, and never restarting kubelet or containerd
(docs/mig.md, "Reapplying a layout without hooks").

The sequence, step by step: `mig-preflight` (config name valid for the node's GPU, no
DynamicMIG from the NVIDIA DRA driver there, host `nvidia-mig-manager.service` not active),
`mig-manager-off` (the operator's mig-manager leaves the node:
`nvidia.com/gpu.deploy.mig-manager=false`), `pause-gpu-operands` (deploy labels
`paused-for-mig-change`, state `pending`, wait for those pods to go), `confirm-no-gpu-processes`,
`apply-mig-layout` (assert → apply --mode-only → assert --mode-only → apply → assert, then
`nvidia-smi -L`, and with CDI on the management CDI spec made again), `verify-mig-layout`
(per-GPU profile counts from the node's NVML probe, else nvidia-smi), `resume-gpu-operands`
(labels back, state `success`, wait for allocatable).

Where each piece lives: `target.py` what the run is about (the node, its config and layout);
`nodecmd.py` running commands on the node; `preflight.py` `mig-preflight` and
`confirm-no-gpu-processes`; `cdi.py` the management CDI spec; `labels.py` the label steps
`mig-manager-off` and `pause-gpu-operands`; `layout.py` `apply-mig-layout`,
`verify-mig-layout` and reading the GPUs' MIG state; `resume.py` `resume-gpu-operands` and
its wait for the new layout to serve.

Decisions:
- mignurse writes its own mig-parted config holding only the chosen layout, built from the profile
  tables in `gpu/profiles.py`, to /var/lib/mignurse/mig/config.yaml, and an empty hooks file beside
  it. Every mig-parted call runs as `env -u MIG_PARTED_HOOKS_FILE` (the packages' profile.d exports
  it: docs/mig.md "The profile.d trap"); `apply` also gets `-k` to the empty hooks file (`assert`
  has no such flag). Either alone means no hooks; both guard against a wrapper that sets one of
  them.
- The host `nvidia-mig-manager.service` is only asked about (`systemctl is-active`,
  `is-enabled`): active refuses the run with the command to disable it, since it re-applies its
  own selection; mignurse never starts, stops, enables or disables a unit, never runs
  `daemon-reload`, and never restarts kubelet or containerd.
- The operator's mig-manager stays off after a successful run (mignurse stays the only writer;
  turning it back on makes it reconcile the node again, possibly stopping kubelet: docs/mig.md).
  Undo turns it back on as it was.
- Pausing mirrors mig-manager (its reconfigure step 4, docs/mig.md): only operand labels that are
  `true` become `paused-for-mig-change`; `false` stays `false`. Third-party GPU clients' label
  `nvidia.com/gpu.deploy.client` is one of them where the node carries it, and the DaemonSet
  pods that select on it are waited for (mig-parted v0.15.0). Resuming puts back what pause found,
  except that a label already `paused-for-mig-change` before the run (a stuck mig-manager left it,
  NVIDIA/gpu-operator#2833) becomes `true`, as mig-manager itself does on success (step 8); undo
  puts back exactly what each step found.
- An Ampere GPU whose mode change stays pending after `apply --mode-only` (the reset refused,
  as in a VM) stops the run with that reason: a reboot applies it (Ampere keeps the mode across
  reboots: docs/mig.md "Persistence across reboots"), then the runbook is run again.
- GPU processes are waited for (pods just evicted take a moment to exit) until the step's
  timeout; then the step fails naming them. It is a failing step, not a precondition: before
  the drain there are GPU processes by design.
- Node paths are prefixed with `${MIGNURSE_ROOT:-}` in the scripts (as the collector's are), so
  the simulator's node sandboxes hold the files; plans show the real paths.
- Every label write records the labels' prior values before it is sent (`ctx.intend`), once:
  a retry after a 503, or a resume, finds them paused already and must not take `paused` for
  the prior value. Undo puts back exactly those values and reads them back.
- Before its first mig-parted write, apply-mig-layout records each GPU's MIG mode and profile
  counts. Undo compares the GPUs with that record: if they changed (a mode set, instances
  destroyed), the steps before it are not undone. The node stays cordoned, its operands
  paused and mig.config.state pending, rather than marked `success` and uncordoned over GPUs
  that match no layout; `--resume` finishes the layout.
- The allocatable wait trusts only what a device plugin started after the labels were restored
  reported, held with the node Ready for the runbook's settle window of the API server's clock
  (runner/steps/settle.py; kubelet's node status update period is 10 s): the Node keeps
  the old layout until kubelet's next status update, and a stopped plugin's resources then go to
  0 allocatable until the new one registers (kubernetes/kubernetes
  pkg/kubelet/cm/devicemanager: GetCapacity, endpointStopGracePeriod).
- Each node command's exit status and output tail go to the audit log.
- A Bottlerocket node (its osImage, else the update operator's label) is refused before anything
  runs on it: Bottlerocket makes its MIG layout itself at boot, from its own settings, with its
  own nvidia-migmanager (no mig-parted, no host shell); the refusal names those settings and the
  `apiclient set` that writes them (`mignurse.gpu.bottlerocket`).
"""
