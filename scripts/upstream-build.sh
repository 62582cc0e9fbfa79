#!/usr/bin/env bash
# Build the real control plane from its Go modules (`make upstream`): kube-apiserver,
# kube-controller-manager and kube-scheduler (k8s.io/kubernetes), etcd
# (go.etcd.io/etcd/server/v3), Karpenter with its kwok cloud provider (sigs.k8s.io/karpenter,
# its kwok/ main, and upstream/karpenter/awsrepair: that main with the AWS provider's repair
# policies) and the kwok controller (sigs.k8s.io/kwok). Each component is a small module
# under upstream/<component>/ whose go.mod and go.sum pin every version; nothing is vendored.
#
#   scripts/upstream-build.sh                   # build what is missing, print where it is
#   scripts/upstream-build.sh etcd kubernetes   # only these components
#   scripts/upstream-build.sh --print           # also print component=directory lines (stdout)
#
# The binaries go to $MIGNURSE_UPSTREAM_CACHE/<component>-<version>/bin (default
# ~/.cache/mignurse-upstream). A folder is reused when its recorded key (the component's go.mod,
# go.sum and build flags, hashed) matches: a second run builds nothing. Builds run with
# CGO_ENABLED=0 and -trimpath, at the lowest CPU and I/O priority.
# Exit code: 0 all built or found, 1 no usable Go, 2 a module could not be downloaded,
# 3 a build failed or go.sum does not match go.mod, 64 a bad argument.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
cache="${MIGNURSE_UPSTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mignurse-upstream}"
all=(kubernetes etcd karpenter kwok)

say() { echo "upstream-build: $*" >&2; }

# component -> "module version-variable binaries package:binary..."
module_of() {
  case $1 in
    kubernetes) echo k8s.io/kubernetes ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    karpenter) echo sigs.k8s.io/karpenter ;;
    kwok) echo sigs.k8s.io/kwok ;;
  esac
}
# package=binary pairs built for each component.
targets_of() {
  case $1 in
    kubernetes)
      echo k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver \
        k8s.io/kubernetes/cmd/kube-controller-manager=kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler=kube-scheduler
      ;;
    etcd) echo go.etcd.io/etcd/server/v3=etcd ;;
    # awsrepair: the kwok main with the AWS provider's repair policies (its own source says how)
    karpenter)
      echo sigs.k8s.io/karpenter/kwok=karpenter-kwok \
        mignurse/upstream/karpenter/awsrepair=karpenter-kwok-awsrepair
      ;;
    kwok) echo sigs.k8s.io/kwok/cmd/kwok=kwok ;;
  esac
}

# The version of $2 that upstream/$1/go.mod requires (a one-line or block require).
required_version() {
  awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' \
    "upstream/$1/go.mod"
}

# What the upstream release scripts stamp into the binaries, so that /version and the logs
# name the release (kubernetes hack/lib/version.sh, karpenter's Makefile -X operator.Version).
ldflags_of() {
  local flags="-s -w" p
  case $1 in
    kubernetes)
      local minor=${2#v1.}
      minor=${minor%%.*}
      for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        flags+=" -X $p.gitVersion=$2 -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        flags+=" -X $p.gitTreeState=clean"
      done
      ;;
    karpenter) flags+=" -X sigs.k8s.io/karpenter/pkg/operator.Version=$2" ;;
    kwok) flags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=$2" ;;
  esac
  echo "$flags"
}

# The whole run is one function, read in full before it starts: a checkout that changes this
# file during a long build cannot change the run.
main() {
  print=0
  wanted=()
  for arg in "$@"; do
    case $arg in
      --print) print=1 ;;
      -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *)
        if [[ ! " ${all[*]} " == *" $arg "* ]]; then
          say "unknown component '$arg' (one of: ${all[*]}, --print)"
          exit 64
        fi
        wanted+=("$arg")
        ;;
    esac
  done
  ((${#wanted[@]})) || wanted=("${all[@]}")

  if ! command -v go > /dev/null 2>&1; then
    say "Go is not installed or not on PATH: install Go 1.25.6 or later (https://go.dev/dl/)"
    exit 1
  fi
  goversion=$(go env GOVERSION 2> /dev/null) || {
    say "'go env GOVERSION' failed: $(go env GOVERSION 2>&1 | head -n 1)"
    exit 1
  }

  export CGO_ENABLED=0
  export GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
  lowest=(nice -n 19)
  command -v ionice > /dev/null 2>&1 && lowest+=(ionice -c3)
  mkdir -p "$cache" || { say "cannot create the cache folder $cache"; exit 1; }

  # The line of a failed go command that names what failed: the module path@version that could
  # not be fetched, or the first compiler error; else the last line the go command printed.
  first_error() {
    local line
    line=$(grep -E '@v[0-9][^ :]*: |^go: |: (Get|dial|lookup) |\.go:[0-9]+:[0-9]+: ' "$1" \
      | grep -v '^go: downloading ' | head -n 1)
    [[ -n $line ]] || line=$(grep -v '^\s*$' "$1" | tail -n 1)
    echo "${line:-no output}"
  }

  build_one() {
    local comp=$1 module version key dir tmp log started flags pkg bin pairs=() pkgs=() p
    module=$(module_of "$comp")
    version=$(required_version "$comp" "$module")
    if [[ -z $version ]]; then
      say "upstream/$comp/go.mod does not require $module"
      return 3
    fi
    read -ra pairs <<< "$(targets_of "$comp")"
    flags=$(ldflags_of "$comp" "$version")
    # The component's own Go files (a main of ours, where it has one) are part of the key.
    key=$(cat "upstream/$comp/go.mod" "upstream/$comp/go.sum" <(echo "$flags $GOFLAGS ${pairs[*]}") \
      <(find "upstream/$comp" -name '*.go' | LC_ALL=C sort | xargs -r cat) \
      | sha256sum | cut -c1-16)
    dir="$cache/$comp-$version"
    local have=1
    for p in "${pairs[@]}"; do [[ -x $dir/bin/${p#*=} ]] || have=0; done
    if ((have)) && [[ $(cat "$dir/key" 2> /dev/null) == "$key" ]]; then
      say "$comp $version: found in $dir (nothing to build)"
      echo "$comp=$dir" >> "$printed"
      return 0
    fi

    tmp=$(mktemp -d "$cache/.$comp-$version.XXXXXX") || return 3
    building=$tmp
    log="$cache/$comp-$version.log"
    started=$SECONDS
    say "$comp $version: downloading modules (GOPROXY=$(go env GOPROXY))"
    for p in "${pairs[@]}"; do pkgs+=("${p%%=*}"); done
    # go list fetches exactly the modules these packages need, so a proxy failure is reported
    # here, naming the module, before any compiling starts.
    if ! (cd "upstream/$comp" && go list -deps "${pkgs[@]}" > /dev/null) > "$log" 2>&1; then
      rm -rf "$tmp"
      if grep -q 'missing go.sum entry' "$log"; then
        say "$comp $version: upstream/$comp/go.sum does not match go.mod ($(grep -m1 'missing go.sum entry' "$log" | cut -d';' -f1)): run 'go mod tidy' in upstream/$comp"
        return 3
      fi
      say "$comp $version: a module could not be downloaded: $(first_error "$log") (log: $log)"
      return 2
    fi
    say "$comp $version: building ${pairs[*]#*=} with $goversion (log: $log)"
    for p in "${pairs[@]}"; do
      pkg=${p%%=*}
      bin=${p#*=}
      if ! (cd "upstream/$comp" && "${lowest[@]}" go build -ldflags "$flags" -o "$tmp/bin/$bin" "$pkg") \
        >> "$log" 2>&1; then
        rm -rf "$tmp"
        say "$comp $version: building $bin failed: $(first_error "$log") (log: $log)"
        return 3
      fi
    done
    echo "$key" > "$tmp/key"
    rm -rf "$dir" && mv "$tmp" "$dir" || { rm -rf "$tmp"; say "cannot move the build to $dir"; return 3; }
    building=
    say "$comp $version: built in $((SECONDS - started)) s, $(du -sh "$dir" | cut -f1) in $dir"
    echo "$comp=$dir" >> "$printed"
  }

  printed=$(mktemp) || exit 1
  building=
  # An interrupted build leaves no half-filled folder behind.
  trap 'rm -f "$printed"; [[ -z $building ]] || rm -rf "$building"' EXIT
  status=0
  for comp in "${wanted[@]}"; do
    build_one "$comp" || { status=$?; break; }
  done
  ((print)) && cat "$printed"
  exit "$status"
}

main "$@"
