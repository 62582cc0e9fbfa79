#!/usr/bin/env bash
# READ-ONLY check of mignurse's NVML MIG probe on a machine with a real NVIDIA driver.
# It never changes MIG mode, never creates or destroys GPU/compute instances and never
# resets a GPU: it runs the probe (NVML Get calls only) and two nvidia-smi queries.
#
#   scripts/gpu-probe-check.sh            # makes a venv with nvidia-ml-py if needed
#   PYTHON=python3 PYTHONPATH=dir-with-pynvml scripts/gpu-probe-check.sh   # offline
#
# Exit code: the probe's (0 ok, 1 no GPUs / no MIG, 2 library, driver or NVML error).
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

echo "== nvidia-smi -L"
nvidia-smi -L || echo "(nvidia-smi -L failed: $?)"
echo "== nvidia-smi --query-gpu=index,name,mig.mode.current,mig.mode.pending"
smi_csv="$(nvidia-smi --query-gpu=index,name,mig.mode.current,mig.mode.pending \
  --format=csv,noheader 2>&1)" && echo "$smi_csv" || echo "(failed) $smi_csv"

echo "== mignurse probe -o table"
"$python" -m mignurse.gpu.probe_cli -o table
echo "== mignurse probe -o json"
probe_json="$("$python" -m mignurse.gpu.probe_cli -o json)"
rc=$?
echo "$probe_json"

echo "== MIG mode, probe against nvidia-smi"
SMI_CSV="$smi_csv" PROBE_JSON="$probe_json" "$python" - <<'PY'
import json, os
smi = {}
for line in os.environ["SMI_CSV"].splitlines():
    cells = [c.strip() for c in line.split(",")]
    if len(cells) == 4 and cells[0].isdigit():
        # nvidia-smi writes [N/A] where NVML answers NotSupported.
        mode = lambda v: "NotSupported" if v in ("[N/A]", "N/A") else v
        smi[int(cells[0])] = (mode(cells[2]), mode(cells[3]))
try:
    gpus = json.loads(os.environ["PROBE_JSON"])["gpus"]
except ValueError:
    gpus = []
probe = {g["index"]: (g["migMode"]["current"], g["migMode"]["pending"]) for g in gpus}
for index in sorted(set(smi) | set(probe)):
    verdict = "agree" if smi.get(index) == probe.get(index) else "DIFFER"
    print(f"GPU {index}: probe {probe.get(index)} nvidia-smi {smi.get(index)} -> {verdict}")
PY
exit "$rc"
