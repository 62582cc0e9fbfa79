"""Which of a node's own files in a bundle (`nodes/<node>/…`, README "Bundle layout") the
diagnosis believes when several tell the same thing: cloud-init's `status --format json`
before the `status --long` text, the text before cloud-init's status.json / result.json, and
those before a text that does not read; NVML's own reading before nvidia-smi's; the first
nvidia-smi output that lists a GPU for memory-error health. The files are real outputs kept
in tests/corpus (each with its .source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mignurse.diagnose.inputs import NodeEvidence
from mignurse.diagnose.sources import load_offline

CORPUS = Path(__file__).parent.parent / "corpus"
CLOUD_INIT = CORPUS / "cloud-init"
HEALTH = CORPUS / "gpu-health" / "nvidia-smi"
GH200 = CORPUS / "gpu-identity" / "gh200-all-balanced" / "nodes" / "hybrid-gh200-0142"
NODE = "ip-10-0-41-7.us-west-2.compute.internal"
# What `nvidia-smi -q -x` prints instead of XML when the kernel module is not loaded.
SMI_FAILED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def node_files(tmp_path: Path, files: dict[str, str]) -> NodeEvidence:
    """A bundle of one Node whose folder holds `files`, read as `diagnose --from` reads it."""
    node = {"metadata": {"name": NODE, "creationTimestamp": "2026-11-29T03:00:00Z"}}
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "nodes.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [node]})
    )
    folder = tmp_path / "nodes" / NODE
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return load_offline(tmp_path).node_evidence[NODE]


def corpus(name: str) -> str:
    return (CLOUD_INIT / name).read_text()


@pytest.mark.parametrize(
    ("files", "status", "form"),
    [
        pytest.param(
            {
                "cloud-init-status.json": corpus("status-json-22.4.json"),
                "cloud-init-status.txt": corpus("status-long-22.2.2-error.txt"),
            },
            "done",
            "status-json",
            id="status-json-first",
        ),
        pytest.param(
            {
                "cloud-init-status.json": "",  # cloud-init before 22.4 prints nothing on stdout
                "cloud-init-status.txt": corpus("status-long-22.2.2-error.txt"),
            },
            "error",
            "status-text",
            id="empty-json-then-text",
        ),
        pytest.param(
            {
                "cloud-init-status.txt": corpus("status-long-22.2.2-done.txt"),
                "cloud-init-run-status.json": corpus("run-status-22.2.2-error.json"),
            },
            "done",
            "status-text",
            id="readable-text-before-files",
        ),
        pytest.param(
            {
                "cloud-init-status.txt": corpus("status-format-json-22.2.2-stderr.txt"),
                "cloud-init-run-status.json": corpus("run-status-22.2.2-error.json"),
            },
            "error",
            "status-files",
            id="unreadable-text-then-status-json",
        ),
        pytest.param(
            {"cloud-init-run-result.json": corpus("run-result-22.2.2-error.json")},
            "error",
            "status-files",
            id="result-json-alone",
        ),
    ],
)
def test_cloud_init_is_read_from_the_best_file_present(
    tmp_path: Path, files: dict[str, str], status: str, form: str
) -> None:
    cloud_init = node_files(tmp_path, files).cloud_init
    assert cloud_init is not None
    assert (cloud_init.status, cloud_init.form) == (status, form)


def test_a_failed_user_data_script_is_named_from_cloud_inits_own_status_file(
    tmp_path: Path,
) -> None:
    cloud_init = node_files(
        tmp_path, {"cloud-init-run-status.json": corpus("run-status-22.2.2-error.json")}
    ).cloud_init
    assert cloud_init is not None and cloud_init.form == "status-files"
    assert cloud_init.extended_status == "error - running"
    assert "Runparts: 1 failures (part-001)" in cloud_init.errors[0]


def test_a_status_text_that_does_not_read_is_still_kept_for_its_problem(tmp_path: Path) -> None:
    cloud_init = node_files(
        tmp_path, {"cloud-init-status.txt": corpus("status-format-json-22.2.2-stderr.txt")}
    ).cloud_init
    assert cloud_init is not None and cloud_init.form == "status-text"
    assert not cloud_init.readable
    assert "before 22.4" in cloud_init.problems[0]


def test_without_any_cloud_init_file_its_status_is_unknown(tmp_path: Path) -> None:
    assert node_files(tmp_path, {"os-release": 'ID="amzn"\n'}).cloud_init is None


def test_nvml_s_own_reading_is_believed_before_nvidia_smi(tmp_path: Path) -> None:
    mig = node_files(
        tmp_path,
        {
            "nvml.json": "Traceback (most recent call last):\n",  # the probe crashed
            "nvidia-smi.xml": (GH200 / "nvidia-smi.xml").read_text(),
        },
    ).mig
    assert mig is not None and mig.source == "nvml" and mig.status == "error"
    assert "nvml.json is not JSON" in mig.detail


def test_mig_profiles_come_from_nvidia_smi_l_next_to_the_xml(tmp_path: Path) -> None:
    mig = node_files(
        tmp_path,
        {
            "nvidia-smi.xml": (GH200 / "nvidia-smi.xml").read_text(),
            "nvidia-smi-L.txt": (GH200 / "nvidia-smi-L.txt").read_text(),
        },
    ).mig
    assert mig is not None and mig.status == "ok"
    (gpu,) = mig.gpus
    assert [d.profile for d in gpu.devices] == ["3g.48gb", "2g.24gb", "1g.12gb", "1g.12gb"]


def test_the_xml_alone_still_gives_the_mig_devices_without_profile_names(tmp_path: Path) -> None:
    mig = node_files(tmp_path, {"nvidia-smi.xml": (GH200 / "nvidia-smi.xml").read_text()}).mig
    assert mig is not None and mig.status == "ok"
    (gpu,) = mig.gpus
    assert [d.memory_mib for d in gpu.devices] == [47488, 23680, 11776, 11776]


def test_gpu_health_comes_from_the_first_output_that_lists_a_gpu(tmp_path: Path) -> None:
    health = node_files(
        tmp_path,
        {
            "nvidia-smi.xml": SMI_FAILED,
            "nvidia-smi-q.txt": (HEALTH / "q-a100-remap-failure-r535.txt").read_text(),
        },
    ).gpu_health
    assert health is not None and len(health.gpus) == 2
    assert health.problems == ()


def test_an_nvidia_smi_that_failed_is_kept_for_its_problem(tmp_path: Path) -> None:
    health = node_files(tmp_path, {"nvidia-smi.xml": SMI_FAILED}).gpu_health
    assert health is not None and health.gpus == ()
    assert "NVIDIA-SMI has failed" in health.problems[0]
