"""`mignurse userdata`: the MIME document, the EC2NodeClass, and the shell part run on a
node sandbox whose stub `nvidia-smi` and `nvidia-mig-parted` log every call."""

from __future__ import annotations

import email
import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mignurse.cli import main
from mignurse.gpu.userdata import (
    BIN_DIR,
    CONFIG_FILE,
    EXIT_APPLY_FAILED,
    EXIT_NO_DRIVER,
    EXIT_NO_MIG_PARTED,
    EXIT_NOT_VERIFIED,
    HOOKS_FILE,
    LOG_TAG,
    MigPartedSource,
    UserDataError,
    build,
    ec2nodeclass_yaml,
    resolve_layout,
    resolve_product,
)
from mignurse.sim.nodes import NodeSandbox, StubCall

from .test_clusterconfig import CUSTOM

# what NVIDIA/mig-parted@v0.15.0 deployments/systemd/nvidia-mig-parted.sh exports
SHIPPED_HOOKS = "/etc/nvidia-mig-manager/hooks.yaml"
NVIDIA_SMI_STUB = """\
n=$(cat "$D/smi-probes" 2>/dev/null || echo 0); n=$((n + 1)); echo $n >"$D/smi-probes"
if [ ! -f "$D/driver-loads-after" ] || [ "$n" -le "$(cat "$D/driver-loads-after")" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver." >&2
  exit 9
fi
case "$1 ${2-}" in
  "-L "*)
    i=0
    while [ $i -lt 8 ]; do echo "GPU $i: NVIDIA H100 NVL (UUID: GPU-0000000$i)"; i=$((i + 1)); done
    ;;
  "mig -lgi")
    if [ -s "$D/lgi" ]; then cat "$D/lgi"; else echo "No GPU instances found."; exit 6; fi ;;
  --query-gpu=*) i=0; while [ $i -lt 8 ]; do echo "$i, Disabled"; i=$((i + 1)); done ;;
  *) exit 2 ;;
esac
"""
# A mig-parted that applies: what `nvidia-smi mig -lgi` lists afterwards is `$D/lgi-after-apply`
# (absent: nothing, as a mig-parted too old for the GPU reports success and creates nothing).
MIG_PARTED_STUB = """\
case " $* " in
  *" --version "*) echo "nvidia-mig-parted version 0.14.0"; exit 0 ;;
esac
echo "MIG_PARTED_HOOKS_FILE=${MIG_PARTED_HOOKS_FILE-<unset>}" >>"$D/mig-parted-env.log"
case " $* " in
  *" assert "*)
    if [ -f "$D/applied" ]; then echo "Selected MIG configuration currently applied"; exit 0; fi
    echo 'level=fatal msg="Assertion failure: selected configuration not currently applied"' >&2
    exit 1 ;;
  *" apply "*)
    if [ -f "$D/apply-fails" ]; then
      echo 'level=fatal msg="Error applying MIG configuration: In use by another client"' >&2
      exit 1
    fi
    cp "$D/lgi-after-apply" "$D/lgi" 2>/dev/null
    touch "$D/applied"; echo "MIG configuration applied successfully"; exit 0 ;;
esac
exit 1
"""
RULE = "+" + "-" * 57 + "+"


def lgi_table(profile: str, per_gpu: int, gpus: int = 8) -> str:
    """`nvidia-smi mig -lgi` (R550+ layout) with `per_gpu` instances of `profile` per GPU."""
    rows = [
        f"|   {gpu}  MIG {profile:<17}{14:>3}{gpu * 10 + i + 3:>9}{i:>10}:1       |\n{RULE}"
        for gpu in range(gpus)
        for i in range(per_gpu)
    ]
    head = [RULE, "| GPU instances:".ljust(58) + "|", "|" + "=" * 57 + "|"]
    return "\n".join(head + rows) + "\n"


@dataclass
class Run:
    sandbox: NodeSandbox
    rc: int
    stdout: str

    @property
    def console(self) -> list[str]:
        path = self.sandbox.root / "console.log"
        return path.read_text().splitlines() if path.exists() else []

    @property
    def journal(self) -> list[str]:
        path = self.sandbox.root / "journal.log"
        return path.read_text().splitlines() if path.exists() else []

    def gpu_calls(self) -> list[StubCall]:
        return self.sandbox.calls()

    def hooks_env(self) -> list[str]:
        return (self.sandbox.data / "mig-parted-env.log").read_text().splitlines()


def make_sandbox(tmp_path: Path, *, driver_loads_after: int | None = 1) -> NodeSandbox:
    sandbox = NodeSandbox(tmp_path / "node", node="ip-10-0-1-1", scenario_facts={})
    sandbox.stub("nvidia-smi", NVIDIA_SMI_STUB)
    sandbox.stub("nvidia-mig-parted", MIG_PARTED_STUB)
    (sandbox.data / "lgi-after-apply").write_text(lgi_table("1g.24gb", 4))
    # The journal: the message alone, one a line (not through stub(), which logs argv).
    logger = sandbox.bin / "logger"
    logger.write_text(
        "#!/bin/sh\n"
        f'[ "$1 $2 $3" = "-t {LOG_TAG} --" ] || exit 1\n'
        f'shift 3; printf "%s\\n" "$*" >>"{sandbox.root}/journal.log"\n'
    )
    logger.chmod(0o755)
    if driver_loads_after is not None:  # probes that fail before the driver "loads"
        (sandbox.data / "driver-loads-after").write_text(f"{driver_loads_after}\n")
    return sandbox


def run_script(sandbox: NodeSandbox, script: str, *, shell: str = "sh") -> Run:
    path = sandbox.root / "userdata.sh"
    path.write_text(script)
    env = {
        "PATH": f"{sandbox.bin}:/usr/bin:/bin",
        "MIGNURSE_ROOT": str(sandbox.fs),
        "MIGNURSE_CONSOLE": str(sandbox.root / "console.log"),
        # set as a login shell on a node with the mig-parted package would have it
        "MIG_PARTED_HOOKS_FILE": SHIPPED_HOOKS,
        "TMPDIR": str(sandbox.root),
    }
    done = subprocess.run(
        [shell, str(path)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return Run(sandbox, done.returncode, done.stdout)


def quick(config: str = "all-1g.24gb", **kwargs: Any) -> str:
    return build(config, driver_wait_s=2, driver_poll_s=1, progress_every_s=1, **kwargs).script


# -- names --------------------------------------------------------------------------------


def test_a_name_with_one_layout_everywhere_needs_no_product() -> None:
    layout = resolve_layout("all-1g.24gb")
    assert layout.devices == {"1g.24gb": 4}
    assert set(layout.checked_for) == {
        "H100-NVL", "H800-NVL", "H100-96GB", "GH200-96GB", "H20", "PG506-96GB",
        "RTX-PRO-6000-Server",
    }  # fmt: skip
    assert resolve_layout("all-disabled").mig_enabled is False


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-H200", "H200-141GB"),
        ("p5.48xlarge", "H100-80GB"),
        ("A100-40GB", "A100-40GB"),
        ("A100-80GB", "A100-80GB"),
        ("h100", "H100-80GB"),
        ("g7e.4xlarge", "RTX-PRO-6000-Server"),
        ("p6e-gb200.36xlarge", "GB200"),
        ("0x234210DE", "GH200-96GB"),
        ("NVIDIA GH200 480GB", "GH200-96GB"),
        ("NVIDIA-GB200", "GB200"),
        ("rtx-pro-server-6000", "RTX-PRO-6000-Server"),
    ],
)
def test_gpu_product_picks_the_table(product: str, model: str) -> None:
    assert resolve_product(product).name == model


def test_product_settles_a_name_that_differs_by_gpu() -> None:
    with pytest.raises(UserDataError, match="different layout on each GPU"):
        resolve_layout("all-1g.10gb")
    assert build("all-1g.10gb", gpu_product="A100-40GB").layout.devices == {"1g.10gb": 4}
    config = yaml.safe_load(build("all-balanced", gpu_product="h200").mig_parted_config)
    assert config == {
        "version": "v1",
        "mig-configs": {
            "all-balanced": [
                {
                    "devices": "all",
                    "mig-enabled": True,
                    "mig-devices": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
                }
            ]
        },
    }


def test_media_extension_names_keep_the_profile_spelling_of_mig_parted() -> None:
    layout = build("all-1g.10gb.me", gpu_product="p5.48xlarge").layout
    assert layout.devices == {"1g.10gb+me": 1}


# -- the documents ----------------------------------------------------------------------


def test_mime_parses_into_one_shell_part_that_passes_sh_n(tmp_path: Path) -> None:
    user_data = build("all-1g.24gb")
    message = email.message_from_string(user_data.mime)
    assert message.is_multipart()
    assert message.get_content_type() == "multipart/mixed"
    parts = message.get_payload()
    assert isinstance(parts, list) and len(parts) == 1
    assert parts[0].get_content_type() == "text/x-shellscript"
    script = parts[0].get_payload()
    assert script == user_data.script
    assert script.startswith("#!/bin/sh\n") and script.isascii()
    assert "systemctl" not in script and "daemon-reload" not in script
    path = tmp_path / "userdata.sh"
    path.write_text(script)
    for shell in ("sh", "bash"):
        if shutil.which(shell):
            checked = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
            assert checked.returncode == 0, f"{shell} -n: {checked.stderr}"


def test_ec2nodeclass_carries_the_same_user_data() -> None:
    user_data = build("all-balanced", gpu_product="p5.48xlarge")
    document = yaml.safe_load(ec2nodeclass_yaml(user_data, name="mig-balanced", cluster="ml_Prod"))
    assert document["apiVersion"] == "karpenter.k8s.aws/v1"
    assert document["kind"] == "EC2NodeClass"
    assert document["metadata"]["name"] == "mig-balanced"
    assert document["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert document["spec"]["role"] == "KarpenterNodeRole-ml_Prod"
    assert document["spec"]["userData"] == user_data.mime


# -- the script on a sandbox --------------------------------------------------------------


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_script_waits_for_the_driver_then_asserts_applies_asserts_with_no_hooks(
    tmp_path: Path, shell: str
) -> None:
    if not shutil.which(shell):
        pytest.skip(f"no {shell}")
    sandbox = make_sandbox(tmp_path, driver_loads_after=1)
    run = run_script(sandbox, quick(), shell=shell)
    assert run.rc == 0, run.stdout

    config, hooks = sandbox.fs / CONFIG_FILE.lstrip("/"), sandbox.fs / HOOKS_FILE.lstrip("/")
    mig = ("-f", str(config), "-c", "all-1g.24gb")
    assert run.gpu_calls() == [
        StubCall("nvidia-smi", ("-L",)),  # driver not loaded yet
        StubCall("nvidia-smi", ("-L",)),
        StubCall("nvidia-mig-parted", ("--version",)),  # the preinstalled one runs
        StubCall("nvidia-mig-parted", ("assert", *mig)),
        StubCall("nvidia-mig-parted", ("-d", "apply", *mig, "-k", str(hooks))),
        StubCall("nvidia-mig-parted", ("assert", *mig)),
        StubCall("nvidia-smi", ("-L",)),  # creates the MIG capability device nodes
        StubCall("nvidia-smi", ("mig", "-lgi")),  # the layout as the driver has it
    ]
    assert run.hooks_env() == ["MIG_PARTED_HOOKS_FILE=<unset>"] * 3
    # the hooks file holds no hook at all
    assert yaml.safe_load(hooks.read_text()) == {"version": "v1", "hooks": {}}
    assert yaml.safe_load(config.read_text())["mig-configs"]["all-1g.24gb"] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb": 4}}
    ]
    log = sandbox.calls_log.read_text()
    assert "systemctl" not in log and "restart" not in log and "daemon-reload" not in log

    # every step on the console and in the journal, in order: wait -> mig-parted -> apply ->
    # verify, all before the script ends (and kubelet starts, after cloud-final)
    console = "\n".join(run.console)
    steps = [
        "start:", "waiting up to 2s", "driver ready", "nvidia-mig-parted: preinstalled at",
        "wrote ", " apply ", "run: nvidia-smi mig -lgi",
        "verified: nvidia-smi mig -lgi lists 32 x 1g.24gb (4 per GPU on 8 GPU(s))", "done:",
    ]  # fmt: skip
    positions = [console.find(step) for step in steps]
    assert -1 not in positions and positions == sorted(positions), console
    assert all(line.startswith(f"{LOG_TAG}: ") for line in run.console)
    assert len(run.journal) == len(run.console)
    assert run.stdout.splitlines() == run.console


def test_an_applied_layout_is_left_alone(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, driver_loads_after=0)
    (sandbox.data / "applied").write_text("")
    (sandbox.data / "lgi").write_text(lgi_table("1g.24gb", 4))
    run = run_script(sandbox, quick())
    assert run.rc == 0
    mig_parted = [c.args[0] for c in run.gpu_calls() if c.command == "nvidia-mig-parted"]
    assert mig_parted == ["--version", "assert"]
    assert any("already applied" in line for line in run.console)


def test_a_success_that_made_no_instances_fails_the_verification(tmp_path: Path) -> None:
    # A mig-parted that does not know the GPU's profiles says "applied" and makes nothing.
    sandbox = make_sandbox(tmp_path, driver_loads_after=0)
    (sandbox.data / "lgi-after-apply").unlink()
    run = run_script(sandbox, quick())
    assert run.rc == EXIT_NOT_VERIFIED
    assert any(
        "FAILED: nvidia-smi mig -lgi lists 0 x 1g.24gb, want 32 (4 per GPU)" in line
        for line in run.console
    ), run.console
    assert not any(line.split(" ", 2)[-1].startswith("done:") for line in run.console)


def test_a_wrong_layout_fails_the_verification(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, driver_loads_after=0)
    (sandbox.data / "lgi-after-apply").write_text(lgi_table("2g.48gb", 2))
    run = run_script(sandbox, quick())
    assert run.rc == EXIT_NOT_VERIFIED
    failed = [line for line in run.console if "FAILED: nvidia-smi mig -lgi" in line]
    assert len(failed) == 2  # no 1g.24gb, and 16 instances where 32 are wanted
    assert "lists 16 x instances, want 32" in failed[1]


def test_a_driver_that_never_appears_ends_the_wait_at_its_bound(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, driver_loads_after=10_000)
    run = run_script(sandbox, quick())
    assert run.rc == EXIT_NO_DRIVER
    assert {c.command for c in run.gpu_calls()} == {"nvidia-smi"}
    assert 2 <= len(run.gpu_calls()) <= 4  # a probe a second for a 2 s bound
    assert any("gave up: no NVIDIA driver after" in line for line in run.console), run.console
    assert any("NOT applied" in line for line in run.journal)
    assert not (sandbox.fs / CONFIG_FILE.lstrip("/")).exists()


def test_a_failed_apply_is_reported_and_not_asserted_again(tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path, driver_loads_after=0)
    (sandbox.data / "apply-fails").write_text("")
    run = run_script(sandbox, quick())
    assert run.rc == EXIT_APPLY_FAILED
    calls = [c.args[:2] for c in run.gpu_calls() if c.command == "nvidia-mig-parted"]
    assert calls == [("--version",), ("assert", "-f"), ("-d", "apply")]
    assert any("In use by another client" in line for line in run.console)
    assert any("FAILED: nvidia-mig-parted apply" in line for line in run.console)


def _no_mig_parted(tmp_path: Path) -> NodeSandbox:
    if shutil.which("nvidia-mig-parted", path="/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin"):
        pytest.skip("a real nvidia-mig-parted is installed here")
    sandbox = make_sandbox(tmp_path, driver_loads_after=0)
    (sandbox.bin / "nvidia-mig-parted").unlink()
    return sandbox


def test_no_mig_parted_and_no_source_is_one_console_line(tmp_path: Path) -> None:
    sandbox = _no_mig_parted(tmp_path)
    run = run_script(sandbox, quick())
    assert run.rc == EXIT_NO_MIG_PARTED
    gave_up = [line for line in run.console if "gave up" in line]
    assert len(gave_up) == 1
    assert "no usable nvidia-mig-parted (none on PATH)" in gave_up[0]
    assert "pass --mig-parted-package or --mig-parted-url to mignurse userdata" in gave_up[0]
    assert not (sandbox.fs / CONFIG_FILE.lstrip("/")).exists()


# An rpm that installs the package's nvidia-mig-parted (the stub above) and logs its argv.
def _rpm_stub(sandbox: NodeSandbox, *, works: bool) -> None:
    if works:
        body = f"cp {sandbox.root}/mig-parted-stub {sandbox.bin}/nvidia-mig-parted\n"
    else:
        body = 'echo "curl: (6) Could not resolve host: example.invalid" >&2; exit 1\n'
    sandbox.stub("rpm", body)


def _curl_stub(sandbox: NodeSandbox, *, works: bool) -> None:
    if works:  # write the binary to the -o file
        body = (
            'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
            f'cp {sandbox.root}/mig-parted-stub "$out"\n'
        )
    else:
        body = 'echo "curl: (22) The requested URL returned error: 404" >&2; exit 22\n'
    sandbox.stub("curl", body)


def _keep_stub(sandbox: NodeSandbox) -> Path:
    kept = sandbox.root / "mig-parted-stub"
    path = sandbox.stub("nvidia-mig-parted", MIG_PARTED_STUB)
    kept.write_bytes(path.read_bytes())
    kept.chmod(0o755)
    path.unlink()
    return kept


PACKAGE = "https://example.invalid/nvidia-mig-manager-0.14.0-1.x86_64.rpm"
BINARY = "https://example.invalid/nvidia-mig-parted"


def test_the_package_is_installed_without_its_scriptlets(tmp_path: Path) -> None:
    sandbox = _no_mig_parted(tmp_path)
    _keep_stub(sandbox)
    _rpm_stub(sandbox, works=True)
    run = run_script(sandbox, quick(source=MigPartedSource(package=PACKAGE)))
    assert run.rc == 0, run.stdout
    rpm = [c for c in run.gpu_calls() if c.command == "rpm"]
    assert rpm == [StubCall("rpm", ("-i", "--noscripts", "--nodeps", "--replacepkgs", PACKAGE))]
    assert any(f"installed from the package {PACKAGE} at" in line for line in run.console)
    assert any(line.endswith("done: MIG config all-1g.24gb applied and verified; kubelet "
                             "starts after cloud-final") for line in run.console)  # fmt: skip


def test_the_url_is_fetched_checked_and_used_by_its_path(tmp_path: Path) -> None:
    sandbox = _no_mig_parted(tmp_path)
    kept = _keep_stub(sandbox)
    _rpm_stub(sandbox, works=False)
    _curl_stub(sandbox, works=True)
    digest = hashlib.sha256(kept.read_bytes()).hexdigest()
    source = MigPartedSource(package=PACKAGE, url=BINARY, sha256=digest)
    run = run_script(sandbox, quick(source=source))
    assert run.rc == 0, run.stdout
    binary = sandbox.fs / BIN_DIR.lstrip("/") / "nvidia-mig-parted"
    assert binary.exists()
    assert any(f"downloaded from {BINARY} to {binary} (sha256 {digest};" in line
               for line in run.console)  # fmt: skip
    assert [c.command for c in run.gpu_calls()].count("nvidia-mig-parted") == 4


def test_a_binary_with_the_wrong_sha256_is_not_run(tmp_path: Path) -> None:
    sandbox = _no_mig_parted(tmp_path)
    _keep_stub(sandbox)
    _curl_stub(sandbox, works=True)
    run = run_script(sandbox, quick(source=MigPartedSource(url=BINARY, sha256="0" * 64)))
    assert run.rc == EXIT_NO_MIG_PARTED
    assert not [c for c in run.gpu_calls() if c.command == "nvidia-mig-parted"]
    gave_up = [line for line in run.console if "gave up" in line]
    assert len(gave_up) == 1 and f"URL {BINARY}: sha256 " in gave_up[0]


def test_nothing_reachable_says_what_was_tried_in_one_line(tmp_path: Path) -> None:
    sandbox = _no_mig_parted(tmp_path)
    _keep_stub(sandbox)
    _rpm_stub(sandbox, works=False)
    _curl_stub(sandbox, works=False)
    run = run_script(sandbox, quick(source=MigPartedSource(package=PACKAGE, url=BINARY)))
    assert run.rc == EXIT_NO_MIG_PARTED
    gave_up = [line for line in run.console if "gave up" in line]
    assert len(gave_up) == 1
    assert (
        f"(none on PATH; package {PACKAGE}: curl: (6) Could not resolve host: example.invalid; "
        f"URL {BINARY}: curl: (22) The requested URL returned error: 404)"
    ) in gave_up[0]
    assert any("NOT applied" in line for line in run.journal)


# -- the command ----------------------------------------------------------------------------


def test_cli_prints_the_mime_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["userdata", "--config", "all-1g.24gb"]) == 0
    out = capsys.readouterr().out
    assert out == build("all-1g.24gb").mime


def test_cli_prints_an_ec2nodeclass(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["userdata", "--config", "all-balanced", "--gpu-product", "NVIDIA-H100-80GB-HBM3"]
    assert main([*argv, "--ec2nodeclass", "--name", "gpu-mig", "--driver-wait", "120"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["metadata"]["name"] == "gpu-mig"
    user_data = document["spec"]["userData"]
    assert "DRIVER_WAIT=120\n" in user_data and "3g.40gb: 1" in user_data


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--config", "all-bogus"], "unknown MIG config 'all-bogus': valid names are "),
        (["--config", "all-balanced"], "pass --gpu-product, one of A100-40GB"),
        (["--config", "all-1g.24gb", "--gpu-product", "h200"], "H200-141GB has no 1g.24gb"),
        (["--config", "all-bogus", "--gpu-product", "h200"], "for H200-141GB: valid names"),
        (["--config", "all-disabled", "--gpu-product", "t4"], "is T4, which has no MIG"),
        (["--config", "all-disabled", "--gpu-product", "a100"], "a100 is two GPUs"),
        (["--config", "all-balanced", "--gpu-product", "GH200"], "names no GPU mignurse knows"),
        (["--config", "all-disabled", "--name", "x"], "go with --ec2nodeclass"),
        (["--config", "all-disabled", "--ec2nodeclass", "--name", "Bad_Name"], "Kubernetes name"),
        (["--config", "all-disabled", "--driver-wait", "0"], "out of range"),
        (["--config", "all-disabled", "--ec2nodeclass", "--cluster", "a b"], "EKS cluster name"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["userdata", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and says in lines[0], captured.err


def test_rtx_pro_media_engine_config_resolves_by_gpu_name() -> None:
    name = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    user_data = build("all-1g.24gb.me.all", gpu_product=name)
    assert user_data.layout.devices == {"1g.24gb+me.all": 1}
    assert "CONFIG_NAME=all-1g.24gb.me.all\n" in user_data.script
    with pytest.raises(UserDataError, match="names no GPU"):
        build("all-1g.24gb.me.all", gpu_product="NVIDIA RTX PRO 6000 Blackwell")  # a prefix


@pytest.mark.parametrize(
    ("config", "product", "devices"),
    [
        ("all-1g.24gb", "g7e.4xlarge", {"1g.24gb": 4}),
        ("all-balanced", "g7e.48xlarge", {"1g.24gb": 2, "2g.48gb": 1}),
        ("all-1g.24gb-me", "g7e.2xlarge", {"1g.24gb-me": 4}),
        ("all-balanced", "0x234210DE", {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1}),
        ("all-balanced", "NVIDIA-GH200-144G-HBM3e", {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}),
        ("all-balanced", "p6e-gb200.36xlarge", {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        ("all-balanced", "p6-b300.48xlarge", {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),
        ("all-1g.35gb", "GB300", {"1g.35gb": 7}),
        ("all-1g.35gb", "p5e.48xlarge", {"1g.35gb": 4}),
        ("all-1g.6gb.me", "A30", {"1g.6gb+me": 1}),
        ("all-7g.180gb", "p6-b200.48xlarge", {"7g.180gb": 1}),
    ],
)
def test_every_catalogue_config_builds_for_the_gpu_it_is_for(
    config: str, product: str, devices: dict[str, int]
) -> None:
    assert build(config, gpu_product=product).layout.devices == devices


def test_a_device_filtered_config_that_skips_the_gpu_is_refused() -> None:
    # all-1g.35gb names the H200 SXM and GB300 only: on an H200 NVL mig-parted does nothing.
    with pytest.raises(UserDataError, match="no entry for H200-NVL"):
        build("all-1g.35gb", gpu_product="NVIDIA H200 NVL")


def test_on_a_simulated_g7e_the_layout_is_applied_and_verified(tmp_path: Path) -> None:
    """The script against the simulator's stateful nvidia-smi and nvidia-mig-parted: one RTX
    PRO 6000 with MIG off, as a g7e.4xlarge boots."""
    facts = {"story": "healthy", "gpus": 1, "mig_mode": "Disabled",
             "gpu_name": "NVIDIA RTX PRO 6000 Blackwell Server Edition"}  # fmt: skip
    sandbox = NodeSandbox(tmp_path / "node", node="ip-10-0-1-1", scenario_facts=facts)
    run = run_script(sandbox, quick("all-1g.24gb", gpu_product="g7e.4xlarge"))
    assert run.rc == 0, run.stdout
    assert any(
        "verified: nvidia-smi mig -lgi lists 4 x 1g.24gb (4 per GPU on 1 GPU(s))" in line
        for line in run.console
    ), run.console
    (mig_parted_run,) = [r for r in sandbox.mig_parted_runs() if "apply" in r["argv"]]
    assert mig_parted_run["hooksRun"] == []


# -- a config of the cluster's own mig-parted file ----------------------------------------------

# the cluster's own file: inference-mixed is in no NVIDIA file, split-by-index sets GPUs by index
CUSTOM_FILE = CUSTOM


def custom_configs(tmp_path: Path, text: str = CUSTOM_FILE) -> Any:
    from mignurse.gpu.clusterconfig import from_file

    path = tmp_path / "custom.yaml"
    path.write_text(text)
    return from_file(path)


def test_a_config_of_the_cluster_s_own_file_is_applied_and_verified(tmp_path: Path) -> None:
    """inference-mixed is in no NVIDIA file: from the cluster's file, the script writes that
    layout and the simulator's nvidia-smi lists it on every GPU."""
    configs = custom_configs(tmp_path)
    with pytest.raises(UserDataError, match="give it with --mig-parted-file"):
        build("inference-mixed", gpu_product="p5.48xlarge")
    user_data = build("inference-mixed", gpu_product="p5.48xlarge", configs=configs)
    assert user_data.layout.devices == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}
    assert yaml.safe_load(user_data.mig_parted_config)["mig-configs"] == {
        "inference-mixed": [
            {"devices": "all", "mig-enabled": True,
             "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}}
        ]
    }  # fmt: skip
    facts = {"story": "healthy", "gpus": 2, "mig_mode": "Disabled"}
    sandbox = NodeSandbox(tmp_path / "node", node="ip-10-0-1-2", scenario_facts=facts)
    script = quick("inference-mixed", gpu_product="p5.48xlarge", configs=configs)
    run = run_script(sandbox, script)
    assert run.rc == 0, run.stdout
    assert any("verified: nvidia-smi mig -lgi lists" in line for line in run.console), run.console
    counts = [sorted(i["profile"] for i in g["instances"]) for g in sandbox.mig_state()["gpus"]]
    assert counts == [["1g.10gb", "2g.20gb", "3g.40gb"]] * 2


def test_the_file_may_be_the_configmap_that_holds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As `kubectl get configmap custom-mig-config -n gpu-operator -o yaml` prints it."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "custom-mig-config", "namespace": "gpu-operator"},
        "data": {"config.yaml": CUSTOM_FILE},
    }
    path = tmp_path / "cm.yaml"
    path.write_text(yaml.safe_dump(configmap))
    argv = ["userdata", "--config", "inference-mixed", "--gpu-product", "h100"]
    assert main([*argv, "--mig-parted-file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "apply MIG config inference-mixed (1x3g.40gb + 1x2g.20gb + 1x1g.10gb per GPU)" in out


@pytest.mark.parametrize(
    ("file", "argv", "says"),
    [
        ("", ["--config", "x"], "No such file or directory"),
        ("folder", ["--config", "x"], "is a folder"),
        ("big", ["--config", "x"], "(MIGNURSE_MAX_MIG_PARTED_FILE_BYTES"),
        ("version: v1\nmig-configs: [\n", ["--config", "x"], "not YAML at line 3"),
        ("version: v2\nmig-configs: {}\n", ["--config", "x"], "unknown version 'v2'"),
        (b"\xff\xfe", ["--config", "x"], "not UTF-8 text"),
        ("kind: ConfigMap\nmetadata: {name: c}\ndata: {}\n", ["--config", "x"],
         "ConfigMap 'c' (in "),
        (CUSTOM_FILE, ["--config", "split-by-index", "--gpu-product", "h100"],
         "split-by-index sets GPUs"),
        (CUSTOM_FILE, ["--config", "all-1g.10gb", "--gpu-product", "h100"],
         "valid names are all-balanced, all-disabled, inference-mixed"),
        (CUSTOM_FILE, ["--config", "x\ny"], "cannot be a nvidia.com/mig.config label value"),
        (CUSTOM_FILE, ["--os", "bottlerocket", "--config", "inference-mixed",
                       "--gpu-product", "h100"], "--mig-parted-file: AL2023 only"),
        ("a: &a [*a, *a]\n", ["--config", "x"], "an alias refers to the node that holds it"),
        ("b: " + "[" * 200 + "]" * 200 + "\n", ["--config", "x"], "nested deeper than"),
    ],
)  # fmt: skip
def test_a_bad_mig_parted_file_is_one_line_and_exit_2(
    file: str | bytes,
    argv: list[str],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "given.yaml"
    if file == "folder":
        path.mkdir()
    elif file == "big":
        path.write_text("#" * (2**20 + 1))
    elif isinstance(file, bytes):
        path.write_bytes(file)
    elif file:
        path.write_text(file)
    assert main(["userdata", *argv, "--mig-parted-file", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and says in lines[0], captured.err
