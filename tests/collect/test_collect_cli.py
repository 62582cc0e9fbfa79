"""`mignurse collect` on the simulated incidents, then `diagnose --from` the bundle."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.sim import SimCluster, load_scenario


def collect_and_diagnose(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *selection: str
) -> tuple[dict, dict, Path]:
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        bundle = tmp_path / "bundle.tar.gz"
        code = main(["--kubeconfig", str(kubeconfig), "collect", *selection, "-o", str(bundle)])
        out = capsys.readouterr()
        assert code == 0, out.err + out.out
        assert f"bundle: {bundle}" in out.out
    with tarfile.open(bundle) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        manifest = json.load(tar.extractfile(f"{top}/manifest.json"))  # type: ignore[arg-type]
    code = main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    return manifest, document, bundle


def test_the_mig_incident_bundle_names_the_kubelet_restart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, document, _ = collect_and_diagnose(
        "mig-hook-notready", tmp_path, capsys, "--unhealthy"
    )
    (node,) = manifest["nodes"]
    assert manifest["nodes"][node]["ok"] and manifest["nodes"][node]["transport"] == "sim"
    restart = [f for f in document["findings"] if f["id"] == "mig-hook-kubelet-restart"]
    assert restart and restart[0]["nodes"] == [node]
    assert not any(f["id"] == "notready-loop" and node in f["nodes"] for f in document["findings"])


def test_the_repair_loop_bundle_names_the_loop_with_node_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, document, bundle = collect_and_diagnose(
        "dcgm-repair-loop", tmp_path, capsys, "--nodepool", "gpu-inference"
    )
    assert len(manifest["nodes"]) == 3 and all(n["ok"] for n in manifest["nodes"].values())
    assert manifest["redaction"]["enabled"] is True
    loop = next(f for f in document["findings"] if f["id"] == "node-repair-loop")
    assert loop["nodepool"] == "gpu-inference" and "pause-node-repair" in loop["runbooks"]
    node = next(iter(manifest["nodes"]))
    main(["diagnose", "--from", str(bundle), "--node", node, "-o", "json"])
    timeline = json.loads(capsys.readouterr().out)["timeline"]
    assert any(e["source"].startswith("journal:") for e in timeline)


def test_every_file_is_in_sha256sums(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, _, bundle = collect_and_diagnose("healthy", tmp_path, capsys, "--nodepool", "gpu-train")
    with tarfile.open(bundle) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
        top = names[0].split("/", 1)[0]
        sums = tar.extractfile(f"{top}/SHA256SUMS").read().decode()  # type: ignore[union-attr]
        listed = dict(reversed(line.split("  ", 1)) for line in sums.splitlines())
        for name in names:
            short = name.split("/", 1)[1]
            if short == "SHA256SUMS":
                continue
            data = tar.extractfile(name).read()  # type: ignore[union-attr]
            assert listed[short] == hashlib.sha256(data).hexdigest(), short
    assert any(n.endswith("/cluster/nodes.json") for n in names)
    assert any("/nodes/" in n and n.endswith("/kubelet.log") for n in names)


def test_what_to_collect_must_be_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimCluster(load_scenario("healthy"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        assert main(["--kubeconfig", kubeconfig, "collect"]) == 2
        assert "name the nodes to collect" in capsys.readouterr().err
        assert main(["--kubeconfig", kubeconfig, "collect", "ip-10-9-9-9"]) == 2
        assert "no node 'ip-10-9-9-9'" in capsys.readouterr().err
        assert main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "--since", "6x"]) == 2
        assert "--since '6x' is not a window" in capsys.readouterr().err
        ssm_upload = ["--unhealthy", "--ssm-upload", "output-bucket"]
        assert main(["--kubeconfig", kubeconfig, "collect", *ssm_upload]) == 2
        assert "--ssm-upload output-bucket needs --bucket" in capsys.readouterr().err


@pytest.mark.parametrize("upload", ["presigned", "output-bucket"])
def test_collect_over_ssm_through_the_stand_ins(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    bucket: str,
    upload: str,
) -> None:
    """Real boto3: our SSM endpoint runs the collector in the node's sandbox, the node
    uploads its archive to moto's S3 through a presigned URL (or the stand-in's "agent"
    uploads the encoded stdout to the command's output bucket, on AWS_ENDPOINT_URL_S3),
    mignurse downloads it."""
    from ssmstandin import InstanceSpec, SsmStandIn

    from mignurse.sim.nodes import NodeSandbox, story_for

    with SimCluster(load_scenario("mig-hook-notready"), speed=0) as sim:
        broken = next(n for n in sim.objects("nodes") if story_for(n) == "mig-hook")
        sandbox = NodeSandbox.for_node(tmp_path / "node", broken, story="mig-hook")
        instance_id = broken["spec"]["providerID"].rsplit("/", 1)[1]
        spec = InstanceSpec(env=sandbox.env, path_prefix=sandbox.path_prefix)
        with SsmStandIn({instance_id: spec}) as ssm:
            monkeypatch.setenv("AWS_ENDPOINT_URL_SSM", ssm.endpoint_url)
            kubeconfig = sim.write_kubeconfig(tmp_path / "config")
            bundle = tmp_path / "ssm.tar.gz"
            args = ["--kubeconfig", str(kubeconfig), "collect", "--unhealthy"]
            args += ["--transport", "ssm", "--bucket", bucket, "-o", str(bundle)]
            code = main([*args, "--ssm-upload", upload])
            out = capsys.readouterr()
            assert code == 0, out.err + out.out
            (send,) = [p for op, p in ssm.requests if op == "SendCommand"]
            assert send.get("OutputS3BucketName") == (bucket if upload == "output-bucket" else None)
    main(["diagnose", "--from", str(bundle), "-o", "json"])
    document = json.loads(capsys.readouterr().out)
    assert any(f["id"] == "mig-hook-kubelet-restart" for f in document["findings"])


def test_collect_local_bundles_this_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Break-glass on a node: no cluster, the node's own files, the same bundle layout."""
    import socket

    bundle = tmp_path / "local.tar.gz"
    code = main(["collect", "--local", "--since", "10m", "-o", str(bundle), "--timeout", "120"])
    assert code in (0, 1), capsys.readouterr().err  # 1: some sources missing on this machine
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
    host = socket.gethostname()
    assert any(n.endswith(f"/nodes/{host}/manifest.json") for n in names)
    assert any(n.endswith("/SHA256SUMS") for n in names)
    assert not any("/cluster/" in n for n in names)


def test_where_the_bundle_goes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SimCluster(load_scenario("mig-hook-notready"), speed=0) as sim:
        kubeconfig = str(sim.write_kubeconfig(tmp_path / "config"))
        folder = tmp_path / "bundles"
        folder.mkdir()
        assert main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", str(folder)]) == 0
        [bundle] = folder.glob("mignurse-bundle-*.tar.gz")
        assert f"bundle: {bundle}" in capsys.readouterr().out

        a_file = tmp_path / "a-file"
        a_file.write_text("")
        below_a_file = str(a_file / "b.tar.gz")
        assert main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", below_a_file]) == 2
        assert f"folder {a_file} does not exist" in capsys.readouterr().err

        # `-o out/` names a folder: missing, it is said, not taken for the bundle's name
        missing = str(tmp_path / "not-made-yet") + "/"
        assert main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", missing]) == 2
        assert "no such folder: create it first" in capsys.readouterr().err
        assert not (tmp_path / "not-made-yet").exists()

        # a path nobody can create a file at, root included
        code = main(["--kubeconfig", kubeconfig, "collect", "--unhealthy", "-o", "/proc/b.tar.gz"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].startswith("mignurse: error: cannot write /proc/b.tar.gz")
