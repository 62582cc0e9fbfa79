"""The node-side collector: one POSIX `sh` script that reads a node and writes a tar of `node/`.

The script only reads (sources as eks-log-collector reads them: awslabs/amazon-eks-ami v20260724
log-collector-script/linux/eks-log-collector.sh): it never restarts or reloads a unit, never touches
MIG state, never reads user data, and never enables Bottlerocket's admin container.
Every source runs under `timeout`, capped with `head -c`, and is recorded in `manifest.json`
(argv, rc, timed_out, seconds, bytes, truncated, sha256); a failed source is one line in
`errors.txt` and never stops the others. Paths are prefixed with `${MIGNURSE_ROOT:-}` so the
same script runs against a sandbox (mignurse.sim.nodes) in tests and the demo.
The tar goes out through `gzip -1` where the node has gzip (journals shrink about twenty-fold,
which matters over SSM's S3 hop and a VPN), plain otherwise; readers detect which.

Bottlerocket has no shell on the host: SSM lands in the control container, SSH in the admin
container (bottlerocket-os/bottlerocket README "Control container", "Admin container"). The
script tells where it runs and reads the host accordingly, recording it as `host_access`:
- a host container is one with `/.bottlerocket` (logdog's archive is under
  `/.bottlerocket/support` "from host containers", README "Logs"); the admin container also
  has the host's root at `/.bottlerocket/rootfs`, read with `sudo chroot /.bottlerocket/rootfs
  <command>` as bottlerocket.dev documents for the journal (bottlerocket-project-website
  content/en/faqitems/6_1-troubleshooting-bootstrap-container-logs.markdown);
- from the control container the same runs through `apiclient exec -T admin` when the admin
  container is enabled (options before the target: bottlerocket-core-kit sources/api/apiclient);
  when it is not, every host source is recorded as skipped with that reason, and the
  admin container is never enabled. `sheltie` takes no command (bottlerocket-admin-container
  sheltie: `exec nsenter -t 1 -a .../bash`), so it is not used;
- Bottlerocket has no cloud-init, nodeadm or nvidia-mig-parted: those are skipped with the
  reason; its MIG comes from `apiclient get settings.kubelet-device-plugins`
  (`bottlerocket-settings.json`) and the boot's `nvidia-migmanager` journal.
"""

from __future__ import annotations

import shlex

SOURCE_TIMEOUT = 60  # seconds per ordinary source
JOURNAL_TIMEOUT = 120  # journals can be large and slow on a busy node
FORMAT = 1  # manifest.json "format"

BOTTLEROCKET_ADMIN_DISABLED = (
    "Bottlerocket admin container disabled: enable it with "
    "apiclient set host-containers.admin.enabled=true to collect host logs"
)

_PRELUDE = r"""
# mignurse node collector: read-only; the tar of node/ is the only thing on stdout.
umask 077
exec 3>&1 1>&2
R="${MIGNURSE_ROOT:-}"
T=$(mktemp -d "${TMPDIR:-/tmp}/mignurse.XXXXXX") || { echo "mignurse: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT
trap 'exit 143' INT TERM HUP
D="$T/node"
mkdir "$D" || exit 1
: >"$D/errors.txt"
: >"$T/sources"
TO=
if command -v timeout >/dev/null 2>&1; then TO=timeout; fi
HAVE_SHA=
if command -v sha256sum >/dev/null 2>&1; then HAVE_SHA=1; fi

# JSON string body: control characters dropped, backslash and quote escaped. Plain text (the
# usual case: paths, flags, words) is printed as it is, without forking tr and sed.
jstr() {
  case $1 in
    *[!A-Za-z0-9\ ./:_=,%+@-]*) printf '%s' "$1" | tr -d '\000-\037' | sed 's/[\\"]/\\&/g' ;;
    *) printf '%s' "$1" ;;
  esac
}

jargv() {
  _a=
  for _x in "$@"; do
    _a="$_a${_a:+, }\"$(jstr "$_x")\""
  done
  printf '[%s]' "$_a"
}

now_ms() {
  _n=$(date +%s%N 2>/dev/null)
  case $_n in
    ''|*[!0-9]*) echo $(( $(date +%s) * 1000 )) ;;
    *) echo $(( _n / 1000000 )) ;;
  esac
}

err() {
  printf '%s\n' "$*" | tr -d '\000-\011\013-\037' >>"$D/errors.txt"
}

skip() {  # skip <file> <why> <argv...>
  _f=$1; _why=$2; shift 2
  printf '{"file": "%s", "argv": %s, "skipped": "%s"}\n' \
    "$(jstr "$_f")" "$(jargv "$@")" "$(jstr "$_why")" >>"$T/sources"
}

# run <file> <timeout-seconds> <ok exit codes> <argv...>: one capped, timed source.
run() {
  _f=$1; _t=$2; _ok=$3; shift 3
  _start=$(now_ms)
  if ! command -v "$1" >/dev/null 2>&1; then
    _rc=127
    printf '%s: not found\n' "$1" >"$T/stderr"
    : >"$D/$_f"
  else
    {
      if [ -n "$TO" ]; then
        timeout -k 5 "$_t" "$@" </dev/null 2>"$T/stderr"
      else
        "$@" </dev/null 2>"$T/stderr"
      fi
      echo $? >"$T/rc"
    } | head -c "$((MAX + 1))" >"$D/$_f.part"
    _rc=$(cat "$T/rc" 2>/dev/null)
    [ -n "$_rc" ] || _rc=255
    _size=$(wc -c <"$D/$_f.part" | tr -d ' ')
    if [ "$_size" -gt "$MAX" ]; then
      head -c "$MAX" "$D/$_f.part" >"$D/$_f"
      rm -f "$D/$_f.part"
    else
      mv "$D/$_f.part" "$D/$_f"
    fi
  fi
  _end=$(now_ms)
  _ms=$((_end - _start))
  _bytes=$(wc -c <"$D/$_f" | tr -d ' ')
  _trunc=false
  [ "${_size:-0}" -gt "$MAX" ] && _trunc=true
  _size=0
  _tout=false
  case $_rc in 124|137) [ -n "$TO" ] && _tout=true ;; esac
  _good=false
  for _c in $_ok; do [ "$_rc" = "$_c" ] && _good=true; done
  # head closing the pipe early kills the source with SIGPIPE: that is the cap, not a failure.
  [ "$_trunc" = true ] && [ "$_rc" = 141 ] && _good=true
  if [ "$_good" = false ]; then
    _why=$(head -c 300 "$T/stderr" 2>/dev/null | tr '\n' ' ')
    if [ "$_tout" = true ]; then
      err "$_f: $1 timed out after ${_t}s${_why:+: $_why}"
    else
      err "$_f: $1 exited $_rc${_why:+: $_why}"
    fi
    [ "$_bytes" -eq 0 ] && rm -f "$D/$_f"
  fi
  _sha=null
  if [ -f "$D/$_f" ] && [ -n "$HAVE_SHA" ]; then
    _sha="\"$(sha256sum "$D/$_f" | cut -d ' ' -f 1)\""
  fi
  printf '{"file": "%s", "argv": %s, "rc": %s, "timed_out": %s, ' \
    "$(jstr "$_f")" "$(jargv "$@")" "$_rc" "$_tout" >>"$T/sources"
  printf '"seconds": %d.%03d, "bytes": %s, "truncated": %s, "sha256": %s}\n' \
    $((_ms / 1000)) $((_ms % 1000)) \
    "$_bytes" "$_trunc" "$_sha" >>"$T/sources"
}

# hrun <file> <timeout> <ok codes> <argv...>: a source read on the host: directly, or on
# Bottlerocket through the admin container; skipped with the reason when it cannot be reached.
hrun() {
  _hf=$1; _ht=$2; _hok=$3; shift 3
  if [ -n "$HOST_SKIP" ]; then
    skip "$_hf" "$HOST_SKIP" "$@"
    return 0
  fi
  case $BR in
    admin) run "$_hf" "$_ht" "$_hok" $SUDO chroot "$R/.bottlerocket/rootfs" "$@" ;;
    control)
      run "$_hf" "$_ht" "$_hok" apiclient exec -T admin sudo -n chroot /.bottlerocket/rootfs "$@"
      ;;
    *) run "$_hf" "$_ht" "$_hok" "$@" ;;
  esac
}

# A copied file is a source too (`cat` of the path), so it gets the same record and cap.
copy() {  # copy <file> <path>
  if [ -e "$2" ]; then
    run "$1" "$SRC_TO" 0 cat "$2"
  else
    err "$1: $2 not present"
    skip "$1" "not present" cat "$2"
  fi
}

finish() {
  _finished=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  {
    printf '{"format": %s, "collector": "mignurse", "started": "%s", "finished": "%s",\n' \
      "$FORMAT" "$STARTED" "$_finished"
    printf ' "root": "%s", "since": "%s", "until": %s, "max_bytes_per_source": %s,\n' \
      "$(jstr "$R")" "$(jstr "$SINCE")" "$UNTIL_JSON" "$MAX"
    printf ' "os_id": "%s", "host_access": "%s", "refused": %s,\n "sources": [\n' \
      "$(jstr "$OS_ID")" "$(jstr "$ACCESS")" "$REFUSED"
    sed '$!s/$/,/' "$T/sources"
    printf ' ]}\n'
  } >"$D/manifest.json"
  if command -v gzip >/dev/null 2>&1; then
    # level 1: journals shrink ~20x at little CPU on a node that may already be struggling
    { tar -C "$T" -cf - node; echo $? >"$T/tar.rc"; } | gzip -1 >&3
    _trc=$(cat "$T/tar.rc" 2>/dev/null || echo 1)
  else
    tar -C "$T" -cf - node >&3
    _trc=$?
  fi
  exit "${1:-$_trc}"
}
"""

_BODY = r"""
STARTED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
OS_ID=
if [ -r "$R/etc/os-release" ]; then
  OS_ID=$(sed -n 's/^ID=//p' "$R/etc/os-release" | tr -d '"' | head -n 1)
fi
REFUSED=null
UNTIL_JSON=null
[ -n "$UNTIL" ] && UNTIL_JSON="\"$(jstr "$UNTIL")\""

# Where the host is: BR = host | admin | control on Bottlerocket ("" elsewhere); HR = the host's
# root as seen from here ("" when its files are out of sight); HOST_SKIP = why host sources
# cannot be read at all.
BR= HR="$R" HOST_SKIP= ACCESS=
SUDO=
[ "$(id -u 2>/dev/null)" = 0 ] || SUDO="sudo -n"
if [ -d "$R/.bottlerocket/rootfs" ]; then
  BR=admin OS_ID=bottlerocket HR="$R/.bottlerocket/rootfs"
  ACCESS="Bottlerocket admin container: sudo chroot /.bottlerocket/rootfs"
elif [ -d "$R/.bottlerocket" ]; then
  BR=control OS_ID=bottlerocket HR=
  _admin=
  if command -v apiclient >/dev/null 2>&1; then
    _admin=$(apiclient get host-containers.admin.enabled </dev/null 2>/dev/null | tr -d ' \n')
  fi
  case $_admin in
    *'"enabled":true'*)
      ACCESS="Bottlerocket control container: apiclient exec admin, then as in the admin one" ;;
    *)
      HOST_SKIP="admin container disabled"
      ACCESS="Bottlerocket control container; admin container disabled"
      err "$BR_ADMIN_MSG" ;;
  esac
elif [ "$OS_ID" = bottlerocket ]; then
  BR=host ACCESS="Bottlerocket host (root shell)"
fi

# Free space first: a full disk on a sick node must not get fuller because of us.
_avail=$(df -Pk "$T" 2>/dev/null | awk 'NR == 2 { print $4 }')
case $_avail in
  ''|*[!0-9]*) err "free space: cannot read df -Pk $T" ;;
  *)
    if [ $((_avail / 1024)) -lt "$MIN_FREE_MB" ]; then
      _msg="refused: only $((_avail / 1024)) MB free under $T, need $MIN_FREE_MB MB"
      err "$_msg"
      REFUSED="\"$(jstr "$_msg")\""
      finish 3
    fi
    ;;
esac

set -- --since "$SINCE"
[ -n "$UNTIL" ] && set -- "$@" --until "$UNTIL"
J="journalctl --no-pager -o short-iso-precise --utc"
# $J is split on purpose (fixed words); the window stays quoted in "$@".
hrun kubelet.log "$JOURNAL_TO" 0 $J -u kubelet "$@"
hrun containerd.log "$JOURNAL_TO" 0 $J -u containerd "$@"
if [ -n "$BR" ]; then
  skip nodeadm.log "Bottlerocket has no nodeadm" $J -u nodeadm-config -u nodeadm-run "$@"
else
  run nodeadm.log "$JOURNAL_TO" 0 $J -u nodeadm-config -u nodeadm-run -u nodeadm-boot-hook "$@"
fi
hrun kernel.log "$JOURNAL_TO" 0 $J -k -b 0 "$@"
hrun kernel-previous-boot.log "$JOURNAL_TO" 0 $J -k -b -1 "$@"
set --

if [ -n "$BR" ]; then
  # Bottlerocket has no cloud-init (early-boot-config reads its user data).
  _why="Bottlerocket has no cloud-init"
  skip cloud-init.log "$_why" cat /var/log/cloud-init.log
  skip cloud-init-output.log "$_why" cat /var/log/cloud-init-output.log
  skip cloud-init-status.json "$_why" cloud-init status --long --format json
else
  copy cloud-init.log "$R/var/log/cloud-init.log"
  copy cloud-init-output.log "$R/var/log/cloud-init-output.log"
  if command -v cloud-init >/dev/null 2>&1; then
    # cloud-init status: 2 = done with recoverable errors (23.4+), still a readable answer.
    run cloud-init-status.json "$SRC_TO" "0 1 2" cloud-init status --long --format json
    # Before 22.4 (AL2023 ships 22.2.2) --format is unknown: usage on stderr, exit 2, no
    # stdout. Keep the text form and cloud-init's own status files instead.
    if ! grep -q '^[[:space:]]*{' "$D/cloud-init-status.json" 2>/dev/null; then
      [ -s "$D/cloud-init-status.json" ] || rm -f "$D/cloud-init-status.json"
      run cloud-init-status.txt "$SRC_TO" "0 1 2" cloud-init status --long
      for _ci in status result; do
        if [ -e "$R/run/cloud-init/$_ci.json" ]; then
          copy "cloud-init-run-$_ci.json" "$R/run/cloud-init/$_ci.json"
        else
          copy "cloud-init-run-$_ci.json" "$R/var/lib/cloud/data/$_ci.json"
        fi
      done
    fi
  else
    skip cloud-init-status.json "cloud-init not on this node" cloud-init status --long --format json
  fi
fi
if [ -n "$HR" ]; then
  copy os-release "$HR/etc/os-release"
else
  hrun os-release "$SRC_TO" 0 cat /etc/os-release
fi
run cgroup-fs.txt "$SRC_TO" 0 stat -fc %T "$R/sys/fs/cgroup/"

hrun nvidia-smi.xml "$SRC_TO" 0 nvidia-smi -q -x
hrun nvidia-smi-L.txt "$SRC_TO" 0 nvidia-smi -L
# mig -lgi/-lci exit non-zero with "No MIG devices found" on some drivers: keep the text.
hrun mig-lgi.txt "$SRC_TO" "0 6" nvidia-smi mig -lgi
hrun mig-lci.txt "$SRC_TO" "0 6" nvidia-smi mig -lci
if [ -n "$BR" ]; then
  # Bottlerocket makes MIG from its settings with its own nvidia-migmanager, at boot.
  skip mig-parted-export.yaml "Bottlerocket has no nvidia-mig-parted" nvidia-mig-parted export
  run bottlerocket-settings.json "$SRC_TO" 0 apiclient get settings.kubelet-device-plugins
  hrun nvidia-migmanager.log "$JOURNAL_TO" 0 $J -u nvidia-migmanager -b 0
else
  run mig-parted-export.yaml "$SRC_TO" 0 nvidia-mig-parted export
fi
if [ "$HR" = "$R" ]; then
  run devices.txt "$SRC_TO" 0 ls -l "$R"/dev/nvidia* "$R/dev/nvidia-caps"
else
  hrun devices.txt "$SRC_TO" 0 ls -l /dev/nvidiactl /dev/nvidia-caps
fi
# NVML's own reading (stable across driver versions, unlike nvidia-smi's text) where
# mignurse is installed on the node; exit 1 = no GPUs or no MIG, still an answer.
if [ -z "$BR" ] && command -v mignurse >/dev/null 2>&1; then
  run nvml.json "$SRC_TO" "0 1" mignurse probe -o json
else
  skip nvml.json "mignurse not installed on the node" mignurse probe -o json
fi

if [ -z "$BR" ] && command -v crictl >/dev/null 2>&1; then
  run crictl-ps.txt "$SRC_TO" 0 crictl ps -a
else
  skip crictl-ps.txt "crictl not on PATH" crictl ps -a
fi
hrun systemctl-failed.txt "$SRC_TO" 0 systemctl --failed --no-pager

# The node monitoring agent's container log: the newest file of each of its containers, the
# last bytes of each within the cap (its latest lines matter most), each after `==> path <==`.
_nma= _nma_n=0
if [ -n "$HR" ]; then
  for _dir in "$HR"/var/log/pods/kube-system_eks-node-monitoring-agent-*/*/; do
    [ -d "$_dir" ] || continue
    _newest=$(ls -t "$_dir" 2>/dev/null | grep '\.log$' | head -n 1)
    [ -n "$_newest" ] || continue
    _nma="$_nma $_dir$_newest"
    _nma_n=$((_nma_n + 1))
  done
fi
if [ "$_nma_n" -gt 0 ]; then
  _each=$((MAX / _nma_n - 512))
  [ "$_each" -gt 0 ] || _each=1
  # A file longer than its share loses its first, cut line too; $_nma splits into one word
  # per file (pod log paths hold no blanks).
  _tail='n=$1; shift; for f; do echo "==> $f <=="; if [ "$(wc -c <"$f")" -gt "$n" ]; '
  _tail="$_tail"'then tail -c "$n" "$f" | sed 1d; else cat "$f"; fi; done'
  run nma.log "$SRC_TO" 0 sh -c "$_tail" nma-log "$_each" $_nma
elif [ -z "$HR" ]; then
  skip nma.log "pod logs are not visible from the Bottlerocket control container" \
    ls "/var/log/pods/kube-system_eks-node-monitoring-agent-*/"
else
  skip nma.log "no eks-node-monitoring-agent pod log" \
    ls "$HR/var/log/pods/kube-system_eks-node-monitoring-agent-*/"
fi

# Bottlerocket's own bundle: logdog writes /var/log/support/bottlerocket-logs.tar.gz, which
# host containers see under /.bottlerocket/support (bottlerocket README "Logs").
if [ -n "$BR" ]; then
  hrun logdog.txt "$JOURNAL_TO" 0 logdog
  if [ -n "$HOST_SKIP" ]; then
    skip bottlerocket-logs.tar.gz "$HOST_SKIP" logdog
  elif [ "$BR" = host ]; then
    copy bottlerocket-logs.tar.gz "$R/var/log/support/bottlerocket-logs.tar.gz"
  else
    copy bottlerocket-logs.tar.gz "$R/.bottlerocket/support/bottlerocket-logs.tar.gz"
  fi
fi

finish
"""


def _safe(value: str, what: str) -> str:
    """A shell-quoted value; control characters would break the manifest's JSON lines."""
    if any(ord(c) < 32 for c in value):
        raise ValueError(f"{what} must not contain control characters: {value!r}")
    return shlex.quote(value)


def collector_script(
    *,
    since: str = "6 hours ago",
    until: str | None = None,
    max_bytes_per_source: int = 50 * 2**20,
    min_free_mb: int = 500,
    source_timeout: int = SOURCE_TIMEOUT,
    journal_timeout: int = JOURNAL_TIMEOUT,
) -> str:
    """The collector as one POSIX sh script (runs under dash); its stdout is a tar of node/
    (gzip-compressed when the node has gzip)."""
    if max_bytes_per_source < 1:
        raise ValueError("max_bytes_per_source must be at least 1")
    if min_free_mb < 0 or source_timeout < 1 or journal_timeout < 1:
        raise ValueError("min_free_mb must be >= 0 and timeouts >= 1 second")
    settings = "\n".join(
        [
            "#!/bin/sh",
            f"SINCE={_safe(since, 'since')}",
            f"UNTIL={_safe(until or '', 'until')}",
            f"MAX={int(max_bytes_per_source)}",
            f"MIN_FREE_MB={int(min_free_mb)}",
            f"SRC_TO={int(source_timeout)}",
            f"JOURNAL_TO={int(journal_timeout)}",
            f"FORMAT={FORMAT}",
            f"BR_ADMIN_MSG={shlex.quote(BOTTLEROCKET_ADMIN_DISABLED)}",
        ]
    )
    return settings + _PRELUDE + _BODY
