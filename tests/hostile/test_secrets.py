"""No secret leaves in a bundle, whatever file it is in and however that file is written;
and the look-alikes on-call engineers need (UUIDs, digests, ids, paths, the word "secret")
come out untouched. The corpus is generated: `secrets_corpus`."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import time
import zlib

import pytest

from mignurse.collect import redact
from mignurse.collect.bundle import pack_node_archive
from mignurse.collect.redact import Redactor, mask_secrets
from mignurse.collect.secretnames import is_secret_name

from .secrets_corpus import (
    HOSTILE_PATTERNS,
    RENDERINGS,
    as_json_indented,
    as_text,
    file_name,
    hostile_text,
    leaked,
    look_alikes,
    real_evidence_files,
    secrets,
)

SECRETS = secrets()
LOOK_ALIKES = look_alikes()


def test_the_corpus_is_broad_enough() -> None:
    kinds = {case.kind for case in SECRETS}
    assert len(kinds) == len(SECRETS) >= 60
    assert len({case.kind for case in LOOK_ALIKES}) == len(LOOK_ALIKES) >= 40
    assert all(case.source for case in SECRETS)


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_no_secret_survives_in_any_rendering(rendering: str) -> None:
    render = RENDERINGS[rendering]
    escaped = {}
    for case in SECRETS:
        data = render(case)
        raw = data if isinstance(data, bytes) else data.encode()
        out = Redactor().redact(file_name(rendering), raw)
        if leaked(case, out):
            escaped[case.kind] = leaked(case, out)
    assert not escaped, f"secrets left in {rendering}: {escaped}"


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_evidence_next_to_a_secret_survives(rendering: str) -> None:
    render = RENDERINGS[rendering]
    lost = {}
    for case in SECRETS:
        data = render(case)
        out = Redactor().redact(
            file_name(rendering), data if isinstance(data, bytes) else data.encode()
        )
        text = out.decode("utf-8", "replace")
        if rendering in ("json-indented", "yaml") and (case.env or case.args):
            continue  # the object holds the env entry or the args, not the line around them
        missing = [k for k in case.keep if k not in text and json.dumps(k)[1:-1] not in text]
        if missing:
            lost[case.kind] = missing
    assert not lost, f"evidence lost in {rendering}: {lost}"


@pytest.mark.parametrize("rendering", sorted(RENDERINGS))
def test_look_alikes_come_out_unchanged(rendering: str) -> None:
    render = RENDERINGS[rendering]
    changed = {}
    for case in LOOK_ALIKES:
        data = render(case)
        raw = data if isinstance(data, bytes) else data.encode()
        redactor = Redactor()
        out = redactor.redact(file_name(rendering), raw)
        if out != raw:
            changed[case.kind] = redactor.report()
    assert not changed, f"look-alikes changed in {rendering}: {changed}"


def test_the_real_evidence_corpus_comes_out_unchanged() -> None:
    """Every file of the real-evidence corpus (journal and dmesg lines, cloud-init status,
    nvidia-smi -q and mig tables, other tools' bundles, kubectl JSON of whole incidents; each
    says where its shape was seen) holds no secret: redaction leaves it byte for byte, except
    the placeholders Bottlerocket's logdog already wrote where its secrets were."""
    changed = {}
    for path in real_evidence_files():
        raw = path.read_bytes()
        redactor = Redactor()
        out = redactor.redact(path.name, raw)
        if out not in (raw, raw.replace(b'"REDACTED"', b'"***REDACTED***"')):
            changed[str(path)] = redactor.report()
    assert not changed, f"benign files changed: {changed}"


@pytest.mark.parametrize(
    ("line", "masked"),
    [
        # the token's public prefix says which provider to rotate it at
        (
            "remote: HTTP Basic: Access denied for glpat-AbCdEfGhIjKlMnOpQrSt",
            "remote: HTTP Basic: Access denied for glpat-***REDACTED***",
        ),
        # the settings after the key say which account and endpoint it opened
        (
            "AccountName=gpumodels;AccountKey=" + "A1b2" * 22 + ";EndpointSuffix=core.windows.net",
            "AccountName=gpumodels;AccountKey=***REDACTED***;EndpointSuffix=core.windows.net",
        ),
        (
            "Server=db;Uid=sa;Pwd=Hunter2pw!;Encrypt=yes",
            "Server=db;Uid=sa;Pwd=***REDACTED***;Encrypt=yes",
        ),
        # a cookie's attributes say where and how long it was valid
        (
            "< Set-Cookie: _oauth2_proxy=abc123def456; Path=/; HttpOnly",
            "< Set-Cookie: _oauth2_proxy=***REDACTED***; Path=/; HttpOnly",
        ),
        # masked once: the masked value is not taken for another token
        ("Authorization: Token token=abcdef123456", "Authorization: Token token=***REDACTED***"),
        # the bot id says which bot
        (
            "POST https://api.telegram.org/bot123456789:AA" + "x" * 33 + "/sendMessage",
            "POST https://api.telegram.org/bot123456789:***REDACTED***/sendMessage",
        ),
        (
            "+ mysql -h db -u root -pS3cretPw -e 'SELECT 1'",
            "+ mysql -h db -u root -p***REDACTED*** -e 'SELECT 1'",
        ),
    ],
)
def test_a_mask_keeps_what_an_engineer_reads_beside_it(line: str, masked: str) -> None:
    out = Redactor().redact("app.log", line.encode()).decode()
    assert out == masked
    assert Redactor().redact("app.log", out.encode()).decode() == masked


def test_redacting_twice_changes_nothing_more() -> None:
    for case in SECRETS + LOOK_ALIKES:  # type: ignore[operator]
        for rendering, render in RENDERINGS.items():
            data = render(case)
            raw = data if isinstance(data, bytes) else data.encode()
            once = Redactor().redact(file_name(rendering), raw)
            assert Redactor().redact(file_name(rendering), once) == once, (case.kind, rendering)


def _tar_gz(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_no_secret_survives_inside_nested_archives() -> None:
    """Bottlerocket's logdog archive and a gzip'd report inside a node's archive."""
    text = "".join(as_text(case) for case in SECRETS).encode()
    documents = [json.loads(as_json_indented(case)) for case in SECRETS]
    logdog = _tar_gz(
        {
            "bottlerocket-logs/journalctl.log": text,
            "bottlerocket-logs/kube-objects.json": json.dumps(documents, indent=2).encode(),
            "bottlerocket-logs/settings.log.gz": gzip.compress(text),
        }
    )
    node = _tar_gz(
        {
            "node/bottlerocket-logs.tar.gz": logdog,
            "node/nvidia-bug-report.log.gz": gzip.compress(b"\x00" * 4096 + text),
            "node/kubelet.log": text,
        }
    )
    packed = pack_node_archive("n1", node, "b")
    assert packed.problems == [] and packed.left_out == []
    written = _written(packed)
    inner = _members(written["b/nodes/n1/bottlerocket-logs.tar.gz"])
    inner_gz = gzip.decompress(inner["bottlerocket-logs/settings.log.gz"])
    everything = [
        written["b/nodes/n1/kubelet.log"],
        gzip.decompress(written["b/nodes/n1/nvidia-bug-report.log.gz"]),
        inner["bottlerocket-logs/journalctl.log"],
        inner["bottlerocket-logs/kube-objects.json"],
        inner_gz,
    ]
    escaped = {
        case.kind: where
        for case in SECRETS
        for where, out in enumerate(everything)
        if leaked(case, out)
    }
    assert not escaped, f"secrets left inside archives: {escaped}"
    assert json.loads(inner["bottlerocket-logs/kube-objects.json"])  # still a JSON document
    counts = {name: c for name, _, c in packed.files}
    assert sum(counts["nodes/n1/bottlerocket-logs.tar.gz"].values()) > len(SECRETS)


def _written(packed: object) -> dict[str, bytes]:
    """The tar members a packed node holds (its raw deflate segment, decompressed)."""
    segment = packed.segment  # type: ignore[attr-defined]
    raw = zlib.decompressobj(-zlib.MAX_WBITS).decompress(segment.data)
    with tarfile.open(fileobj=io.BytesIO(raw + b"\x00" * 1024), mode="r:") as tar:
        return {
            m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile()
        }


def test_each_secret_kind_says_where_its_format_comes_from() -> None:
    vague = [case.kind for case in SECRETS if not ("://" in case.source or "@" in case.source)]
    assert not vague


def test_a_secret_in_the_karpenter_deployment_and_pods_is_masked_in_the_bundle(
    tmp_path: object,
) -> None:
    """cluster/karpenter.json and cluster/pods.json are written indented: env values and
    args are masked by structure, not by how the JSON is laid out."""
    from pathlib import Path

    from mignurse.collect.bundle import BundleWriter

    env_cases = [c for c in SECRETS if c.env is not None]
    arg_cases = [c for c in SECRETS if c.args is not None]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "karpenter", "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "env": [{"name": c.env[0], "value": c.env[1]} for c in env_cases],  # type: ignore[index]
                        }
                    ]
                }
            }
        },
    }
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"kind": "Pod", "spec": {"containers": [{"name": "c", "args": list(c.args or ())}]}}
            for c in arg_cases
        ],
    }
    path = Path(str(tmp_path)) / "b.tar.gz"
    writer = BundleWriter(path, top="b", redactor=Redactor())
    writer.add_json("cluster/karpenter.json", deployment)
    writer.add_json("cluster/pods.json", pods)
    writer.close({"tool": "test"})
    files = _members(path.read_bytes())
    escaped = [
        c.kind
        for c in env_cases + arg_cases
        if leaked(c, files["b/cluster/karpenter.json"] + files["b/cluster/pods.json"])
    ]
    assert not escaped
    manifest = json.loads(files["b/manifest.json"])
    by_name = [c for c in env_cases if is_secret_name(c.env[0])]  # type: ignore[index]
    assert manifest["redaction"]["counts"]["cluster/karpenter.json"]["k8s-env"] == len(by_name)
    assert "meta-llama/Llama-3.1-8B-Instruct" in files["b/cluster/pods.json"].decode()


def _cpu_seconds(data: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        mask_secrets("kubelet.log", data)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("pattern", sorted(HOSTILE_PATTERNS))
def test_redaction_time_grows_linearly_with_hostile_input(pattern: str) -> None:
    """Four times the input may cost about four times the CPU, never sixteen: each unmatched
    BEGIN line once cost a 256 KiB look-ahead (256 KiB took 48 s). The margin is wide (10×,
    plus 50 ms for timer noise on tiny inputs): it catches quadratic growth, not a slow CPU."""
    small, large = hostile_text(pattern, 48 * 1024), hostile_text(pattern, 192 * 1024)
    t_small, t_large = _cpu_seconds(small), _cpu_seconds(large)
    assert t_large <= 10 * t_small + 0.05, (pattern, t_small, t_large)


def test_a_file_that_takes_too_long_to_mask_is_left_out_and_said_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redact, "MASK_SECONDS_PER_FILE", -1.0)
    node = _tar_gz({"node/kubelet.log": b"password=hunter2\n", "node/os-release": b"ID=amzn\n"})
    packed = pack_node_archive("n1", node, "b")
    assert [name for name, _, _ in packed.files] == []
    assert packed.left_out == [
        ("nodes/n1/kubelet.log", "masking took over -1 s: left out rather than shipped unmasked"),
        ("nodes/n1/os-release", "masking took over -1 s: left out rather than shipped unmasked"),
    ]
    assert b"hunter2" not in zlib.decompressobj(-zlib.MAX_WBITS).decompress(packed.segment.data)


def test_readme_names_every_rule_and_the_corpus_size() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme[readme.index("## Security") : readme.index("### What a bundle may")]
    listed = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            listed.update(part.strip(" `") for part in first_cell.split(","))
    assert listed == set(redact.RULES)
    assert f"{len(SECRETS)} secret kinds" in section
    assert f"{len(LOOK_ALIKES)} benign look-alikes" in section
