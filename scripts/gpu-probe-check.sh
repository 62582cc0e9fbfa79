#!/usr/bin/env bash
# READ-ONLY check of mignurse's NVML MIG probe on a machine with a real NVIDIA driver.
# It never changes MIG mode, never creates or destroys GPU/compute instances and never
# resets a GPU: it runs the probe (NVML Get calls only) and four nvidia-smi queries
# (-L, -q -x, mig -lgi, mig -lci), then compares the probe's JSON with nvidia-smi's view
# (python -m mignurse.gpu.check: GPU count, names, MIG modes, MIG devices, memory).
#
#   scripts/gpu-probe-check.sh            # makes a venv with nvidia-ml-py if needed
#   PYTHON=python3 PYTHONPATH=dir-with-pynvml scripts/gpu-probe-check.sh   # offline
#
# Exit code: the probe's when it is not 0 (1 no GPUs / no MIG, 2 library, driver or NVML
# error), else the comparison's (0 all agree, 3 some differ, 2 an output could not be read).
set -uo pipefail
cd "$(dirname "$0")/.."
# Always the installed driver's library: the tests' fake-library override does not apply here.
unset MIGNURSE_NVML_LIBRARY

venv="${GPU_PROBE_VENV:-${TMPDIR:-/tmp}/mignurse-gpu-probe-venv}"
python="${PYTHON:-}"
if [[ -z "$python" ]]; then
  if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv" || exit 2
    # Only the NVML bindings: the probe imports nothing else outside the standard library.
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'nvidia-ml-py>=13.615,<14' \
      || { echo "pip install nvidia-ml-py failed (offline? set PYTHON and PYTHONPATH)" >&2; exit 2; }
  fi
  python="$venv/bin/python"
fi
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
"$python" -c 'import pynvml' || { echo "$python cannot import pynvml" >&2; exit 2; }

out="$(mktemp -d "${TMPDIR:-/tmp}/gpu-probe-check.XXXXXX")" || exit 2
trap 'rm -rf "$out"' EXIT

# One read-only query: its output (stderr too, so a failure is what the parser sees) to a
# file, echoed under a header. mig -lgi / -lci fail when MIG is off: noted, and on we go.
# The XML runs to thousands of lines on an 8-GPU node: only its size, unless
# GPU_PROBE_VERBOSE=1, so the comparison at the end stays on screen.
query() {
  local file="$1"
  shift
  echo "== $*"
  "$@" >"$out/$file" 2>&1
  local rc=$?
  if [[ "$file" == *.xml && "${GPU_PROBE_VERBOSE:-0}" != 1 ]]; then
    echo "($(wc -l <"$out/$file") lines; GPU_PROBE_VERBOSE=1 prints them)"
  else
    cat "$out/$file"
  fi
  ((rc == 0)) || echo "($* exited $rc)"
}
query smi-L.txt nvidia-smi -L
query smi-q.xml nvidia-smi -q -x
query smi-lgi.txt nvidia-smi mig -lgi
query smi-lci.txt nvidia-smi mig -lci

echo "== mignurse probe -o table"
"$python" -m mignurse.gpu.probe_cli -o table
echo "== mignurse probe -o json"
"$python" -m mignurse.gpu.probe_cli -o json >"$out/probe.json"
probe_rc=$?
cat "$out/probe.json"

echo "== probe against nvidia-smi"
"$python" -m mignurse.gpu.check --probe-json "$out/probe.json" --smi-xml "$out/smi-q.xml" \
  --smi-list "$out/smi-L.txt" --smi-lgi "$out/smi-lgi.txt" --smi-lci "$out/smi-lci.txt"
check_rc=$?
if ((probe_rc != 0)); then
  exit "$probe_rc"
fi
exit "$check_rc"
