from __future__ import annotations

from pathlib import Path

from mignurse.evidence import (
    merge_smi,
    parse_mig_lci,
    parse_mig_lgi,
    parse_smi_list,
    parse_smi_xml,
)
from mignurse.model import (
    MIG_DISABLED,
    MIG_ENABLED,
    MIG_NOT_SUPPORTED,
    MIG_UNKNOWN,
    PROBE_DRIVER_NOT_LOADED,
    PROBE_ERROR,
    PROBE_LIBRARY_NOT_FOUND,
    PROBE_NO_GPUS,
    PROBE_OK,
)

from .smi_samples import (
    DRIVER,
    GI_IDS,
    L40S_LIST,
    NO_MIG_LGI,
    gpu_uuid,
    h100_lci,
    h100_lgi,
    h100_list,
    h100_xml,
    l40s_xml,
    mig_uuid,
)

# -- -q -x ------------------------------------------------------------------------------------


def test_h100_all_1g_10gb_from_xml() -> None:
    state = parse_smi_xml(h100_xml())
    assert (state.source, state.status, state.detail) == ("nvidia-smi", PROBE_OK, "")
    assert state.driver_version == DRIVER
    assert len(state.gpus) == 8
    for index, gpu in enumerate(state.gpus):
        assert gpu.index == index
        assert gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.uuid == gpu_uuid(index)
        assert (gpu.mig_current, gpu.mig_pending) == (MIG_ENABLED, MIG_ENABLED)
        assert not gpu.mode_change_pending
        assert [d.gpu_instance_id for d in gpu.devices] == list(GI_IDS)
        assert {d.compute_instance_id for d in gpu.devices} == {0}
        assert {d.memory_mib for d in gpu.devices} == {9984}
        assert [d.index for d in gpu.devices] == list(range(7))
        # -q -x has no profile names and no MIG UUIDs: merge_smi fills them.
        assert {d.profile for d in gpu.devices} == {""}
        assert gpu.profile_counts() == {"unknown": 7}
    assert state.gpus[0].pci_bus_id == "00000000:53:00.0"
    assert state.gpus[7].pci_bus_id == "00000000:CA:00.0"


def test_non_mig_l40s() -> None:
    state = parse_smi_xml(l40s_xml())
    assert state.status == PROBE_OK
    (gpu,) = state.gpus
    assert gpu.name == "NVIDIA L40S"
    assert (gpu.mig_current, gpu.mig_pending) == (MIG_NOT_SUPPORTED, MIG_NOT_SUPPORTED)
    assert gpu.devices == ()


def test_pending_mode_change_and_missing_mig_mode() -> None:
    text = h100_xml(gpus=2, devices_per_gpu=0).replace(
        "<current_mig>Enabled</current_mig>\n\t\t\t<pending_mig>Enabled</pending_mig>",
        "<current_mig>Disabled</current_mig>\n\t\t\t<pending_mig>Enabled</pending_mig>",
        1,
    )
    second = text.rfind("<mig_mode>")
    text = text[:second] + text[text.index("</mig_mode>", second) + len("</mig_mode>") :]
    first, other = parse_smi_xml(text).gpus
    assert (first.mig_current, first.mig_pending) == (MIG_DISABLED, MIG_ENABLED)
    assert first.mode_change_pending and first.devices == ()
    assert (other.mig_current, other.mig_pending) == (MIG_UNKNOWN, MIG_UNKNOWN)


def test_truncated_xml_keeps_complete_gpus() -> None:
    text = h100_xml()
    cut = text[: text.index('<gpu id="00000000:86:00.0">') + 200]
    state = parse_smi_xml(cut)
    assert state.status == PROBE_ERROR
    assert state.detail.startswith("truncated XML: ")
    assert "3 complete <gpu> read; 1 incomplete <gpu> left out" in state.detail
    assert [g.uuid for g in state.gpus] == [gpu_uuid(i) for i in range(3)]
    assert all(len(g.devices) == 7 for g in state.gpus)
    assert state.driver_version == DRIVER


def test_malformed_xml_mid_file() -> None:
    text = h100_xml(gpus=2).replace("<uuid>", "<uuid attr=>", 1)
    state = parse_smi_xml(text)
    assert state.status == PROBE_ERROR
    assert state.detail.startswith("malformed XML: ")


def test_no_gpus() -> None:
    state = parse_smi_xml(h100_xml(gpus=0))
    assert (state.status, state.driver_version) == (PROBE_NO_GPUS, DRIVER)


def test_text_instead_of_xml_maps_to_probe_states() -> None:
    cases = {
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.\n": PROBE_DRIVER_NOT_LOADED,
        "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system.\n": (
            PROBE_LIBRARY_NOT_FOUND
        ),
        "sh: nvidia-smi: command not found\n": PROBE_LIBRARY_NOT_FOUND,
        "No devices were found\n": PROBE_NO_GPUS,
        "Failed to initialize NVML: Driver/library version mismatch\n": PROBE_DRIVER_NOT_LOADED,
        "Segmentation fault\n": PROBE_ERROR,
        "": PROBE_ERROR,
    }
    for text, status in cases.items():
        state = parse_smi_xml(text)
        assert (state.source, state.status) == ("nvidia-smi", status), text
        assert state.gpus == ()
        assert state.detail


def test_entities_and_internal_dtds_are_refused() -> None:
    laughs = (
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY lol "lol">\n'
        '<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n]>\n'
        "<nvidia_smi_log><driver_version>&lol2;</driver_version></nvidia_smi_log>\n"
    )
    external = (
        '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        "\n<nvidia_smi_log><driver_version>&x;</driver_version></nvidia_smi_log>\n"
    )
    for text in (laughs, external):
        state = parse_smi_xml(text)
        assert state.status == PROBE_ERROR
        assert state.detail == "refused: the XML declares a DTD subset or entities"
        assert state.driver_version == ""
    # An undeclared entity reference is just malformed XML, never resolved.
    state = parse_smi_xml("<nvidia_smi_log><driver_version>&x;</driver_version></nvidia_smi_log>")
    assert state.status == PROBE_ERROR and state.detail.startswith("malformed XML")


# -- -L ---------------------------------------------------------------------------------------


def test_smi_list_h100() -> None:
    listed = parse_smi_list(h100_list())
    assert listed.problems == ()
    assert len(listed.gpus) == 8
    gpu = listed.gpus[3]
    assert (gpu.index, gpu.name, gpu.uuid) == (3, "NVIDIA H100 80GB HBM3", gpu_uuid(3))
    assert [(d.index, d.profile, d.uuid) for d in gpu.mig_devices] == [
        (i, "1g.10gb", mig_uuid(3, i)) for i in range(7)
    ]
    assert gpu.mig_devices[0].gpu_instance_id is None


def test_smi_list_old_driver_form_carries_gi_and_ci() -> None:
    text = (
        "GPU 0: A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
        "  MIG 3g.20gb Device 0: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/1/0)\n"
        "  MIG 1c.3g.20gb Device 1: (UUID: MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/2/1)\n"
    )
    (gpu,) = parse_smi_list(text).gpus
    assert [(d.profile, d.gpu_instance_id, d.compute_instance_id) for d in gpu.mig_devices] == [
        ("3g.20gb", 1, 0),
        ("1c.3g.20gb", 2, 1),
    ]


def test_smi_list_odd_lines() -> None:
    listed = parse_smi_list("  MIG 1g.10gb Device 0: (UUID: MIG-x)\nNo devices were found\n")
    assert listed.gpus == ()
    assert listed.problems == (
        "line 1: MIG device listed before any GPU",
        "line 2: unrecognised: 'No devices were found'",
        "no GPUs listed",
    )
    assert parse_smi_list("").problems == ("empty nvidia-smi -L output",)
    l40s = parse_smi_list(L40S_LIST)
    assert l40s.problems == () and l40s.gpus[0].mig_devices == ()


# -- mig -lgi / -lci --------------------------------------------------------------------------


def test_lgi_rows() -> None:
    table = parse_mig_lgi(h100_lgi())
    assert table.problems == () and table.none_found == ""
    assert len(table.rows) == 56
    row = table.rows[9]
    assert (row.gpu, row.profile, row.profile_id, row.instance_id) == (1, "1g.10gb", 19, 9)
    assert (row.placement_start, row.placement_size) == (2, 1)


def test_lci_rows() -> None:
    table = parse_mig_lci(h100_lci())
    assert table.problems == ()
    assert len(table.rows) == 56
    row = table.rows[-1]
    assert (row.gpu, row.gpu_instance_id, row.profile, row.profile_id, row.instance_id) == (
        7,
        13,
        "1g.10gb",
        0,
        0,
    )


def test_no_mig_forms() -> None:
    for text in (NO_MIG_LGI, "No GPU instances found\n", "No MIG devices found\n"):
        table = parse_mig_lgi(text)
        assert (table.rows, table.problems, table.none_found) == ((), (), text.strip())
    assert parse_mig_lci("No compute instances found.\n").none_found


def test_lgi_errors_and_junk() -> None:
    table = parse_mig_lgi(
        "Failed to display GPU instances: Insufficient Permissions\n"
        "|   0  MIG 1g.10gb   nineteen    7    0:1 |\n"
    )
    assert table.rows == ()
    assert table.problems == (
        "line 1: nvidia-smi refused: 'Failed to display GPU instances: Insufficient Permissions'",
        "line 2: unrecognised table row: '| 0 MIG 1g.10gb nineteen 7 0:1 |'",
        "no GPU instance table found",
    )
    assert table.error == "Failed to display GPU instances: Insufficient Permissions"
    assert parse_mig_lci("").problems == ("empty nvidia-smi mig -lci output",)


# -- merge ------------------------------------------------------------------------------------


def test_merge_fills_profiles_and_uuids() -> None:
    merged = merge_smi(
        parse_smi_xml(h100_xml()), parse_smi_list(h100_list()), parse_mig_lgi(h100_lgi())
    )
    assert merged.status == PROBE_OK
    for gpu in merged.gpus:
        assert gpu.profile_counts() == {"1g.10gb": 7}
        assert [d.uuid for d in gpu.devices] == [mig_uuid(gpu.index, i) for i in range(7)]
    # The whole node: 56 slices of 1g.10gb, as `nvidia.com/mig-1g.10gb: 56` should advertise.
    assert sum(g.profile_counts().get("1g.10gb", 0) for g in merged.gpus) == 56


def test_merge_from_lgi_alone_and_from_list_alone() -> None:
    xml = parse_smi_xml(h100_xml(gpus=1))
    by_gi = merge_smi(xml, None, parse_mig_lgi(h100_lgi(gpus=1)).rows)
    assert by_gi.gpus[0].profile_counts() == {"1g.10gb": 7}
    assert {d.uuid for d in by_gi.gpus[0].devices} == {""}
    by_index = merge_smi(xml, parse_smi_list(h100_list(gpus=1)))
    assert by_index.gpus[0].profile_counts() == {"1g.10gb": 7}


def test_merge_prefers_the_listed_profile_by_uuid_over_the_gi_profile() -> None:
    xml = parse_smi_xml(
        h100_xml(gpus=1, devices_per_gpu=1).replace(
            "<index>0</index>", f"<index>0</index><uuid>{mig_uuid(0, 0)}</uuid>"
        )
    )
    listed = parse_smi_list(
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu_uuid(0)})\n"
        f"  MIG 1c.3g.40gb Device  0: (UUID: {mig_uuid(0, 0)})\n"
    )
    lgi = parse_mig_lgi(h100_lgi(gpus=1, devices_per_gpu=1).replace("1g.10gb", "3g.40gb"))
    (device,) = merge_smi(xml, listed, lgi).gpus[0].devices
    assert device.profile == "1c.3g.40gb"


def test_merge_matches_gpus_by_uuid_not_position() -> None:
    xml = parse_smi_xml(h100_xml(gpus=2))
    listing = h100_list(gpus=2).splitlines()
    swapped = "\n".join(listing[8:] + listing[:8])  # GPU 1 listed first
    merged = merge_smi(xml, parse_smi_list(swapped))
    assert merged.gpus[0].devices[0].uuid == mig_uuid(0, 0)
    assert merged.gpus[1].devices[0].uuid == mig_uuid(1, 0)


def test_merge_falls_back_to_the_list_when_xml_is_unusable() -> None:
    merged = merge_smi(
        parse_smi_xml(""), parse_smi_list(h100_list(gpus=2) + L40S_LIST.replace("GPU 0", "GPU 2"))
    )
    assert merged.status == PROBE_ERROR
    assert merged.detail.endswith("GPUs read from nvidia-smi -L (no usable -q -x)")
    assert [g.mig_current for g in merged.gpus] == [MIG_ENABLED, MIG_ENABLED, MIG_UNKNOWN]
    assert merged.gpus[0].profile_counts() == {"1g.10gb": 7}
    assert merge_smi(parse_smi_xml("")) == parse_smi_xml("")


def test_stray_text_around_intact_xml_is_noted() -> None:
    text = (
        "Unable to determine the device handle for GPU0000:53:00.0: Unknown Error\n"
        + h100_xml(gpus=1)
        + "---Output truncated---\n"
    )
    state = parse_smi_xml(text)
    assert state.status == PROBE_OK
    assert len(state.gpus) == 1
    assert state.detail == (
        "text outside the XML: 'Unable to determine the device handle for GPU0000:53:00.0: "
        "Unknown Error … ---Output truncated---'"
    )


def test_a_gpu_missing_from_the_xml_is_an_error_when_all_were_asked_for() -> None:
    # Without -i, a GPU nvidia-smi cannot read (Xid 79) is left out of the listing; the XML
    # alone cannot tell that from a -i query, so the GPUs listed are kept and the gap noted.
    text = h100_xml(gpus=7).replace(
        "<attached_gpus>7</attached_gpus>", "<attached_gpus>8</attached_gpus>"
    )
    state = parse_smi_xml(text)
    assert state.status == PROBE_ERROR
    assert state.detail == (
        "attached_gpus is 8 but 7 <gpu> listed: 1 not queried (nvidia-smi -i) or not readable"
    )
    assert len(state.gpus) == 7


# -- older drivers, -i queries and restricted containers (tests/corpus/nvidia-smi) ----------

CORPUS = Path(__file__).parents[1] / "corpus" / "nvidia-smi"


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def test_lci_without_placement_column_of_r450_drivers() -> None:
    table = parse_mig_lci(_corpus("mig-lci-r450-no-placement.txt"))
    assert table.problems == () and table.none_found == "" and table.error == ""
    assert [
        (r.gpu, r.gpu_instance_id, r.profile, r.profile_id, r.instance_id) for r in table.rows
    ] == [
        (0, 1, "1c.3g.20gb", 0, 0),
        (0, 1, "1c.3g.20gb", 0, 1),
        (0, 1, "1c.3g.20gb", 0, 2),
        (0, 2, "2g.10gb", 1, 0),
    ]
    assert {(r.placement_start, r.placement_size) for r in table.rows} == {(None, None)}


def test_lci_with_placement_and_lgi_without_row_rules() -> None:
    lci = parse_mig_lci(_corpus("mig-lci-r570-h200-balanced.txt"))
    assert lci.problems == () and len(lci.rows) == 8
    assert (lci.rows[0].profile, lci.rows[0].placement_start, lci.rows[0].placement_size) == (
        "3g.71gb",
        0,
        3,
    )
    lgi = parse_mig_lgi(_corpus("mig-lgi-r470-a100-no-row-rules.txt"))
    assert lgi.problems == ()
    assert [(r.profile, r.profile_id, r.instance_id, r.placement_start) for r in lgi.rows] == [
        ("3g.20gb", 9, 1, 4),
        ("2g.10gb", 14, 5, 0),
        ("1g.5gb", 19, 13, 2),
        ("1g.5gb", 19, 14, 3),
    ]


def test_refusals_and_mig_off() -> None:
    refused = parse_mig_lci(_corpus("mig-lci-insufficient-permissions.txt"))
    assert refused.rows == ()
    assert refused.error == "Failed to display compute instances: Insufficient Permissions"
    off = parse_mig_lgi(_corpus("mig-lgi-mig-disabled.txt"))
    assert (off.rows, off.problems, off.none_found) == ((), (), "No MIG-enabled devices found.")


def test_a_single_gpu_query_keeps_its_gpu_and_index() -> None:
    text = _corpus("q-x-i3-h100-v12.xml")
    asked = parse_smi_xml(text, queried="3")
    assert asked.status == PROBE_OK
    assert asked.detail == "nvidia-smi -i 3: 1 of 8 attached GPUs queried, 7 not asked for"
    (gpu,) = asked.gpus
    assert (gpu.index, gpu.pci_bus_id, gpu.mig_current) == (3, "00000000:86:00.0", MIG_ENABLED)
    assert [(d.gpu_instance_id, d.memory_mib) for d in gpu.devices] == [(2, 40192)]
    # Read without knowing it was -i 3: the GPU is kept at its index (minor number), the rest
    # is not called missing.
    unknown = parse_smi_xml(text)
    assert unknown.status == PROBE_ERROR
    assert unknown.detail == (
        "attached_gpus is 8 but 1 <gpu> listed: 7 not queried (nvidia-smi -i) or not readable"
    )
    assert [g.index for g in unknown.gpus] == [3]
    by_uuid = parse_smi_xml(text, queried="GPU-3e7c0b1a-9d24-4f6e-8a15-c2d0e9f7b643")
    assert by_uuid.status == PROBE_OK and by_uuid.gpus[0].index == 3


def test_v11_xml_in_a_restricted_container() -> None:
    state = parse_smi_xml(_corpus("q-x-a100-v11-r470-container.xml"))
    assert (state.status, state.detail, state.driver_version) == (PROBE_OK, "", "470.256.02")
    (gpu,) = state.gpus
    assert (gpu.index, gpu.mig_current, gpu.mig_pending) == (0, MIG_ENABLED, MIG_ENABLED)
    # No <reserved> in v11; N/A memory reads as unknown, not as zero.
    assert [(d.gpu_instance_id, d.memory_mib) for d in gpu.devices] == [(1, 20096), (5, None)]


def test_bracketed_and_permission_mode_values() -> None:
    base = h100_xml(gpus=1, devices_per_gpu=0)
    for value, mode in (
        ("[N/A]", MIG_NOT_SUPPORTED),
        ("[Not Supported]", MIG_NOT_SUPPORTED),
        ("Insufficient Permissions", MIG_UNKNOWN),
    ):
        text = base.replace(
            "<current_mig>Enabled</current_mig>", f"<current_mig>{value}</current_mig>"
        )
        assert parse_smi_xml(text).gpus[0].mig_current == mode, value
