"""GPU facts: MIG profiles and layouts (and, later, the NVML probe and mig-parted files)."""
