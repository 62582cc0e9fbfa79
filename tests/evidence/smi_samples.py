"""nvidia-smi output of a p5.48xlarge in `all-1g.10gb` (8 × H100, 7 MIG devices each), built
from templates so -q -x, -L, mig -lgi and mig -lci agree; plus a non-MIG L40S (g6e)."""

from __future__ import annotations

# p5.48xlarge GPU PCI bus ids, in nvidia-smi index order.
H100_BUS_IDS = ("53", "64", "75", "86", "97", "A8", "B9", "CA")
GI_IDS = (7, 8, 9, 10, 11, 12, 13)  # what `all-1g.10gb` creates on an H100, placements 0..6
DRIVER = "570.172.08"


def gpu_uuid(gpu: int) -> str:
    return f"GPU-5f1c2c6e-0c1d-4b1e-9f7a-1e2d3c4b5a{gpu:02d}"


def mig_uuid(gpu: int, device: int) -> str:
    return f"MIG-8a9b{gpu:02d}{device:02d}-3c4d-5e6f-8a7b-6c5d4e3f2a1b"


_MIG_DEVICE = """\
\t\t\t<mig_device>
\t\t\t\t<index>{index}</index>
\t\t\t\t<gpu_instance_id>{gi}</gpu_instance_id>
\t\t\t\t<compute_instance_id>0</compute_instance_id>
\t\t\t\t<device_attributes>
\t\t\t\t\t<shared>
\t\t\t\t\t\t<multiprocessor_count>16</multiprocessor_count>
\t\t\t\t\t\t<copy_engine_count>1</copy_engine_count>
\t\t\t\t\t\t<encoder_count>0</encoder_count>
\t\t\t\t\t\t<decoder_count>1</decoder_count>
\t\t\t\t\t\t<ofa_count>0</ofa_count>
\t\t\t\t\t\t<jpg_count>1</jpg_count>
\t\t\t\t\t</shared>
\t\t\t\t</device_attributes>
\t\t\t\t<ecc_error_count>
\t\t\t\t\t<volatile_count>
\t\t\t\t\t\t<sram_uncorrectable>0</sram_uncorrectable>
\t\t\t\t\t</volatile_count>
\t\t\t\t</ecc_error_count>
\t\t\t\t<fb_memory_usage>
\t\t\t\t\t<total>9984 MiB</total>
\t\t\t\t\t<reserved>0 MiB</reserved>
\t\t\t\t\t<used>13 MiB</used>
\t\t\t\t\t<free>9971 MiB</free>
\t\t\t\t</fb_memory_usage>
\t\t\t\t<bar1_memory_usage>
\t\t\t\t\t<total>16383 MiB</total>
\t\t\t\t\t<used>0 MiB</used>
\t\t\t\t\t<free>16383 MiB</free>
\t\t\t\t</bar1_memory_usage>
\t\t\t</mig_device>
"""

_GPU = """\
\t<gpu id="00000000:{bus}:00.0">
\t\t<product_name>{name}</product_name>
\t\t<product_brand>NVIDIA</product_brand>
\t\t<product_architecture>{arch}</product_architecture>
\t\t<display_mode>Disabled</display_mode>
\t\t<display_active>Disabled</display_active>
\t\t<persistence_mode>Enabled</persistence_mode>
\t\t<addressing_mode>None</addressing_mode>
\t\t<mig_mode>
\t\t\t<current_mig>{current}</current_mig>
\t\t\t<pending_mig>{pending}</pending_mig>
\t\t</mig_mode>
\t\t<mig_devices>{devices}</mig_devices>
\t\t<accounting_mode>Disabled</accounting_mode>
\t\t<accounting_mode_buffer_size>4000</accounting_mode_buffer_size>
\t\t<serial>1654123{gpu:06d}</serial>
\t\t<uuid>{uuid}</uuid>
\t\t<minor_number>{minor}</minor_number>
\t\t<vbios_version>96.00.99.00.01</vbios_version>
\t\t<pci>
\t\t\t<pci_bus>{bus}</pci_bus>
\t\t\t<pci_device>00</pci_device>
\t\t\t<pci_domain>0000</pci_domain>
\t\t\t<pci_device_id>233010DE</pci_device_id>
\t\t\t<pci_bus_id>00000000:{bus}:00.0</pci_bus_id>
\t\t</pci>
\t\t<fb_memory_usage>
\t\t\t<total>81559 MiB</total>
\t\t\t<reserved>0 MiB</reserved>
\t\t\t<used>1 MiB</used>
\t\t\t<free>81558 MiB</free>
\t\t</fb_memory_usage>
\t\t<processes>
\t\t\t<process_info>
\t\t\t\t<gpu_instance_id>N/A</gpu_instance_id>
\t\t\t\t<compute_instance_id>N/A</compute_instance_id>
\t\t\t\t<pid>4021</pid>
\t\t\t\t<type>C</type>
\t\t\t\t<process_name>/usr/bin/dcgm-exporter</process_name>
\t\t\t\t<used_memory>0 MiB</used_memory>
\t\t\t</process_info>
\t\t</processes>
\t</gpu>
"""

_LOG = """\
<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<timestamp>Sun Nov 29 03:20:11 2026</timestamp>
\t<driver_version>{driver}</driver_version>
\t<cuda_version>12.8</cuda_version>
\t<attached_gpus>{count}</attached_gpus>
{gpus}</nvidia_smi_log>
"""


def h100_xml(gpus: int = 8, devices_per_gpu: int = 7) -> str:
    """`nvidia-smi -q -x` for a p5.48xlarge with every GPU in all-1g.10gb."""
    body = []
    for gpu in range(gpus):
        devices = "".join(_MIG_DEVICE.format(index=i, gi=GI_IDS[i]) for i in range(devices_per_gpu))
        body.append(
            _GPU.format(
                bus=H100_BUS_IDS[gpu],
                name="NVIDIA H100 80GB HBM3",
                arch="Hopper",
                current="Enabled",
                pending="Enabled",
                devices="\n" + devices + "\t\t" if devices else "None",
                gpu=gpu,
                uuid=gpu_uuid(gpu),
                minor=gpu,
            )
        )
    return _LOG.format(driver=DRIVER, count=gpus, gpus="".join(body))


def l40s_xml() -> str:
    """A g6e.xlarge: one L40S, which has no MIG (`N/A` modes, `None` devices)."""
    gpu = _GPU.format(
        bus="30",
        name="NVIDIA L40S",
        arch="Ada Lovelace",
        current="N/A",
        pending="N/A",
        devices="None",
        gpu=0,
        uuid="GPU-0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6",
        minor=0,
    )
    return _LOG.format(driver=DRIVER, count=1, gpus=gpu)


def h100_list(gpus: int = 8, devices_per_gpu: int = 7) -> str:
    """`nvidia-smi -L` for the same machine."""
    lines = []
    for gpu in range(gpus):
        lines.append(f"GPU {gpu}: NVIDIA H100 80GB HBM3 (UUID: {gpu_uuid(gpu)})")
        for device in range(devices_per_gpu):
            lines.append(f"  MIG 1g.10gb     Device {device:2d}: (UUID: {mig_uuid(gpu, device)})")
    return "\n".join(lines) + "\n"


_LGI_HEAD = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
"""
_LGI_ROW = "|  {gpu:2d}  MIG 1g.10gb         19       {gi:2d}          {start}:1     |\n"
_LGI_RULE = "+-------------------------------------------------------+\n"


def h100_lgi(gpus: int = 8, devices_per_gpu: int = 7) -> str:
    """`nvidia-smi mig -lgi` for the same machine (rows separated by rules, as printed)."""
    rows = [
        _LGI_ROW.format(gpu=gpu, gi=GI_IDS[i], start=i)
        for gpu in range(gpus)
        for i in range(devices_per_gpu)
    ]
    return _LGI_HEAD + _LGI_RULE.join(rows) + _LGI_RULE


_LCI_HEAD = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
"""
_LCI_ROW = "|  {gpu:2d}     {gi:2d}       MIG 1g.10gb          0         0          0:1     |\n"
_LCI_RULE = "+--------------------------------------------------------------------+\n"


def h100_lci(gpus: int = 8, devices_per_gpu: int = 7) -> str:
    """`nvidia-smi mig -lci` for the same machine."""
    rows = [
        _LCI_ROW.format(gpu=gpu, gi=GI_IDS[i])
        for gpu in range(gpus)
        for i in range(devices_per_gpu)
    ]
    return _LCI_HEAD + _LCI_RULE.join(rows) + _LCI_RULE


L40S_LIST = "GPU 0: NVIDIA L40S (UUID: GPU-0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6)\n"
NO_MIG_LGI = "No MIG-enabled devices found.\n"
