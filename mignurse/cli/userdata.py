"""`mignurse userdata`: user data that applies a MIG layout before kubelet starts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mignurse.cli.common import EXIT_OK, UserError


def add_parser(sub: Any) -> None:
    userdata = sub.add_parser(
        "userdata",
        help="user data that applies a MIG layout before kubelet starts (AL2023, Bottlerocket)",
        description="AL2023 (the default): prints MIME multi-part user data (for a Karpenter "
        "EC2NodeClass or a launch template) that waits for the NVIDIA driver, finds "
        "nvidia-mig-parted (on PATH, else --mig-parted-package, else --mig-parted-url), writes "
        "its config and an empty hooks file, applies and asserts the layout with "
        "MIG_PARTED_HOOKS_FILE unset, verifies it with `nvidia-smi mig -lgi`, and logs each "
        "step to the console. --os bottlerocket: prints the Bottlerocket settings TOML that "
        "makes the layout with Bottlerocket's own MIG manager. Exit code: 0 printed, 2 an "
        "unknown or ambiguous config name (the valid ones on stderr).",
    )
    userdata.add_argument(
        "--os",
        choices=("al2023", "bottlerocket"),
        default="al2023",
        help="the node OS: al2023 (a shell script run by cloud-init) or bottlerocket (settings)",
    )
    userdata.add_argument(
        "--config", required=True, metavar="NAME", help="MIG config name, e.g. all-1g.10gb"
    )
    userdata.add_argument(
        "--mig-parted-file",
        metavar="FILE",
        help="AL2023: the mig-parted file NAME is defined in (your GPU operator's, or the "
        "ConfigMap holding it: kubectl get configmap NAME -n gpu-operator -o yaml); default: "
        "NVIDIA's default file",
    )
    userdata.add_argument(
        "--gpu-product",
        metavar="P",
        help="the GPU whose layout NAME means, named whole: a product name "
        "(NVIDIA-H100-80GB-HBM3), a Karpenter GPU name (h200), a PCI device id (0x233010DE), "
        "a model name (A100-40GB) or an instance type (g7e.4xlarge)",
    )
    userdata.add_argument(
        "--driver-wait",
        type=int,
        metavar="SECONDS",
        help="how long the node waits for the NVIDIA driver before giving up (default 300)",
    )
    userdata.add_argument(
        "--mig-parted-package",
        metavar="RPM",
        help="AL2023: the nvidia-mig-manager RPM (absolute path on the node or http(s) URL) to "
        "install, without its scriptlets, when nvidia-mig-parted is not on the node",
    )
    userdata.add_argument(
        "--mig-parted-url",
        metavar="URL",
        help="AL2023: an http(s) URL of the nvidia-mig-parted binary, fetched when neither the "
        "node nor the package has one",
    )
    userdata.add_argument(
        "--mig-parted-sha256",
        metavar="HEX",
        help="with --mig-parted-url: the binary's sha256, checked before it is used",
    )
    userdata.add_argument(
        "--ec2nodeclass",
        action="store_true",
        help="print it inside a Karpenter EC2NodeClass (karpenter.k8s.aws/v1) instead",
    )
    userdata.add_argument(
        "--name", help="with --ec2nodeclass: its metadata.name (default: mig-NAME)"
    )
    userdata.add_argument(
        "--cluster", help="with --ec2nodeclass: the cluster name for its role and discovery tags"
    )


def cmd_userdata(args: argparse.Namespace) -> int:
    from mignurse.gpu.userdata import (
        DEFAULT_DRIVER_WAIT_S,
        MigPartedSource,
        UserDataError,
        bottlerocket_ec2nodeclass_yaml,
        build,
        build_bottlerocket,
        default_nodeclass_name,
        ec2nodeclass_yaml,
    )

    if (args.name is not None or args.cluster is not None) and not args.ec2nodeclass:
        raise UserError("--name and --cluster go with --ec2nodeclass")
    source = MigPartedSource(
        args.mig_parted_package or "", args.mig_parted_url or "", args.mig_parted_sha256 or ""
    )
    name = args.name or default_nodeclass_name(args.config)
    try:
        if args.os == "bottlerocket":
            al2023_only = [
                flag
                for flag, given in (
                    ("--mig-parted-package", source.package),
                    ("--mig-parted-url", source.url),
                    ("--mig-parted-sha256", source.sha256),
                    ("--driver-wait", args.driver_wait is not None),
                    ("--mig-parted-file", args.mig_parted_file is not None),
                )
                if given
            ]
            if al2023_only:
                raise UserError(
                    f"{', '.join(al2023_only)}: AL2023 only; Bottlerocket makes MIG from its "
                    "settings, with no script and no nvidia-mig-parted"
                )
            settings = build_bottlerocket(args.config, gpu_product=args.gpu_product)
            if args.ec2nodeclass:
                sys.stdout.write(
                    bottlerocket_ec2nodeclass_yaml(
                        settings.mig, settings.toml, name=name, cluster=args.cluster
                    )
                )
            else:
                sys.stdout.write(settings.toml)
            return EXIT_OK
        user_data = build(
            args.config,
            gpu_product=args.gpu_product,
            source=source,
            driver_wait_s=DEFAULT_DRIVER_WAIT_S if args.driver_wait is None else args.driver_wait,
            configs=_file_configs(args.mig_parted_file),
        )
        if args.ec2nodeclass:
            sys.stdout.write(ec2nodeclass_yaml(user_data, name=name, cluster=args.cluster))
        else:
            sys.stdout.write(user_data.mime)
    except UserDataError as exc:
        raise UserError(str(exc)) from None
    return EXIT_OK


def _file_configs(path: str | None) -> Any:
    """The configs of --mig-parted-file; None without it (NVIDIA's default file)."""
    if path is None:
        return None
    from pathlib import Path

    from mignurse.gpu.clusterconfig import ConfigUnreadable, from_file

    try:
        return from_file(Path(path).expanduser())
    except ConfigUnreadable as exc:
        raise UserError(f"--mig-parted-file {exc}") from None
