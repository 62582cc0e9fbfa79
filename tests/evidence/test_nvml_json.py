from __future__ import annotations

import json

from mignurse.evidence import parse_nvml_json
from mignurse.model import (
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    PROBE_ERROR,
    PROBE_LIBRARY_NOT_FOUND,
    GpuMigState,
    MigDevice,
    MigState,
)

STATE = MigState(
    source="nvml",
    driver_version="570.172.08",
    gpus=(
        GpuMigState(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            uuid="GPU-5f1c2c6e-0c1d-4b1e-9f7a-1e2d3c4b5a00",
            pci_bus_id="00000000:53:00.0",
            mig_current=MIG_ENABLED,
            mig_pending=MIG_ENABLED,
            devices=tuple(MigDevice(f"MIG-{i}", 7 + i, 0, "1g.10gb", 9984, i) for i in range(7)),
        ),
        GpuMigState(1, "NVIDIA L40S", "GPU-1", "", MIG_NOT_SUPPORTED, MIG_NOT_SUPPORTED),
    ),
)


def test_round_trip() -> None:
    assert parse_nvml_json(json.dumps(STATE.to_json(), indent=2)) == STATE


def test_probe_failures_round_trip() -> None:
    failed = MigState("nvml", PROBE_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1: not found")
    assert parse_nvml_json(json.dumps(failed.to_json())) == failed


def test_junk_is_an_error_state() -> None:
    for text, detail in [
        ("", "empty nvml.json"),
        ("Traceback (most recent call last):", "nvml.json is not JSON"),
        ("[]", "nvml.json is not a JSON object"),
        ('{"source": "nvml", "gpus": [', "nvml.json is not JSON"),
    ]:
        state = parse_nvml_json(text)
        assert (state.source, state.status) == ("nvml", PROBE_ERROR)
        assert state.detail.startswith(detail)


def test_malformed_fields_demote_an_ok_document() -> None:
    doc = STATE.to_json()
    doc["gpus"][0]["devices"][2]["gpuInstanceId"] = "nine"
    doc["gpus"][1]["migMode"]["current"] = "Sideways"
    doc["gpus"].append("not a gpu")
    state = parse_nvml_json(json.dumps(doc))
    assert state.status == PROBE_ERROR
    assert state.detail.startswith("malformed nvml.json: gpus[0].devices[2].gpuInstanceId")
    assert "gpus[1].migMode.current: unknown MIG mode 'Sideways'" in state.detail
    assert "gpus[2]: not an object" in state.detail
    assert "recorded status 'ok'" in state.detail
    # What did read is still there for the rules.
    assert len(state.gpus) == 2
    assert state.gpus[0].devices[2].gpu_instance_id is None
    assert state.gpus[0].devices[3].profile == "1g.10gb"
