"""No secret leaves in a bundle, whatever file it is in and however that file is written;
and the look-alikes on-call engineers need (UUIDs, digests, ids, paths, the word "secret")
come out untouched. The corpus is generated: `secrets_corpus`."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
import zlib

import pytest

from mignurse.collect import redact
from mignurse.collect.bundle import pack_node_archive
from mignurse.collect.redact import MARKER, Redactor, mask_secrets
from mignurse.collect.secretnames import is_secret_name

from .secrets_corpus import (
    HOSTILE_PATTERNS,
    RENDERINGS,
    as_json_indented,
    as_text,
    encodings,
    file_name,
    hostile_text,
    leaked,
    look_alikes,
    mask_cpu_seconds,
    read_back,
    real_evidence_files,
    secrets,
)

HOSTILE_ENCODINGS, OPAQUE = encodings.HOSTILE_ENCODINGS, encodings.OPAQUE
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
        out = read_back(rendering, Redactor().redact(file_name(rendering), raw))
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
        text = read_back(rendering, out).decode("utf-8", "replace")
        if rendering in ("json-indented", "yaml") and (case.env or case.args):
            continue  # the object holds the env entry or the args, not the line around them
        if rendering in OPAQUE:
            continue  # a base64 run that holds a secret is masked whole, evidence and all
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


@pytest.mark.deep
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
    args are masked by structure, not by how the JSON is laid out; a value whose name says
    nothing (a storage connection string, a clone URL) by the value rules."""
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
    storage_key = base64.b64encode(bytes(range(64))).decode()
    connection = (
        "DefaultEndpointsProtocol=https;AccountName=models;"
        f"AccountKey={storage_key};EndpointSuffix=core.windows.net"
    )
    clone_token = "ghp_" + "R4nd0mT0k3nV4lu3" * 2 + "abcd"
    plain_env = [
        {"name": "AZURE_STORAGE_CONNECTION_STRING", "value": connection},
        {"name": "GIT_REMOTE", "value": f"https://{clone_token}@github.com/acme/models"},
        {"name": "MODEL_CACHE", "value": "/models"},
    ]
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"kind": "Pod", "spec": {"containers": [{"name": "c", "args": list(c.args or ())}]}}
            for c in arg_cases
        ]
        + [{"kind": "Pod", "spec": {"containers": [{"name": "vllm", "env": plain_env}]}}],
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
    written_pods = files["b/cluster/pods.json"].decode()
    assert "meta-llama/Llama-3.1-8B-Instruct" in written_pods
    assert storage_key not in written_pods and clone_token not in written_pods
    assert "AccountName=models" in written_pods and '"/models"' in written_pods
    assert "github.com/acme/models" in written_pods


@pytest.mark.deep
@pytest.mark.parametrize("pattern", sorted(HOSTILE_PATTERNS))
def test_redaction_time_grows_linearly_with_hostile_input(pattern: str) -> None:
    """Four times the input may cost about four times the CPU, never sixteen: each unmatched
    BEGIN line once cost a 256 KiB look-ahead (256 KiB took 48 s). The margin is wide (10×,
    plus 50 ms for timer noise on tiny inputs): it catches quadratic growth, not a slow CPU."""
    small, large = hostile_text(pattern, 48 * 1024), hostile_text(pattern, 192 * 1024)
    t_small, t_large = mask_cpu_seconds(small), mask_cpu_seconds(large)
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


def test_the_security_page_names_every_rule_and_the_corpus_size() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "security.md").read_text()
    section = page[: page.index("## What a bundle may")]
    listed = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            listed.update(part.strip(" `") for part in first_cell.split(","))
    assert listed == set(redact.RULES)
    assert f"{len(SECRETS)} secret kinds" in section
    assert f"{len(LOOK_ALIKES)} benign look-alikes" in section


# --- encodings: the same secret however the bundle holds it --------------------------------

KLOG = "I1205 03:12:44.123456    2211 server.go:123] "
JOURNAL = "Dec 05 03:12:44 ip-10-0-1-2 kubelet[2211]: "
CRI_TIME = "2026-12-05T03:12:44.123456789Z"


def _masked(name: str, text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return Redactor().redact(name, raw).decode("utf-8", "surrogateescape")


def test_there_are_at_least_eleven_renderings_and_each_reads_back() -> None:
    assert len(RENDERINGS) >= 11
    for rendering, render in RENDERINGS.items():
        data = render(SECRETS[0])
        raw = data if isinstance(data, bytes) else data.encode()
        assert leaked(SECRETS[0], read_back(rendering, raw)), rendering  # unmasked: it shows


def test_a_token_split_over_cri_partial_lines_is_masked_in_both_halves() -> None:
    """The runtime splits a long line into P lines; no piece of the token survives in either
    line, and the file keeps its lines (kubelet reads it back)."""
    token = "glpat-" + "Ab3dEf6hIj9kLm2nOp5q"
    message = f"{KLOG}git clone failed: password: {token} rejected"
    cut = message.index(token) + 9
    text = (
        f"{CRI_TIME} stdout P {message[:cut]}\n"
        f"{CRI_TIME} stdout F {message[cut:]}\n"
        f"{CRI_TIME} stdout F {KLOG}node ip-10-0-1-2 Ready\n"
    )
    out = _masked("containers/app.log", text)
    assert out.count("\n") == 3 and out.count(" stdout P ") == 1
    first, second, third = out.splitlines()
    assert token[:9] not in first and token[9:] not in second
    assert MARKER in first and MARKER in second
    assert "rejected" in second and third.endswith("node ip-10-0-1-2 Ready")


def test_credential_documents_logged_as_json_are_masked_at_any_depth() -> None:
    """AWS credential_process output, a GCP authorized_user file, Secrets Manager's
    get-secret-value and a docker config, each a JSON message of a klog line."""
    key, token, refresh = "k" * 30 + "SeCrEt0123", "FwoGZXIvYXdzE" + "x9" * 40, "1//0g" + "Zq7" * 20
    stored, binary = "hunter2-db-Pa55", "c2VjcmV0LWJpbmFyeS1wYXlsb2Fk"
    documents = [
        {"Version": 1, "AccessKeyId": "ASIA" + "Q" * 16, "SecretAccessKey": key,
         "SessionToken": token, "Expiration": "2026-12-05T09:00:00Z"},
        {"type": "authorized_user", "client_id": "123.apps.googleusercontent.com",
         "client_secret": "GOCSPX-" + "a1" * 14, "refresh_token": refresh},
        {"ARN": "arn:aws:secretsmanager:us-west-2:123456789012:secret:prod/db",
         "Name": "prod/db", "SecretString": json.dumps({"username": "app", "password": stored}),
         "SecretBinary": binary},
        {"level": "info", "config": {"docker": {"auths": {"nvcr.io": {"auth": binary}}}}},
    ]  # fmt: skip
    text = "".join(f"{KLOG}{json.dumps(d)}\n" for d in documents)
    out = _masked("journal/kubelet.log", text)
    for value in (key, token, refresh, stored, binary, "a1" * 14):
        assert value not in out
    assert "arn:aws:secretsmanager:us-west-2:123456789012:secret:prod/db" in out
    assert "2026-12-05T09:00:00Z" in out and "nvcr.io" in out
    for line in out.splitlines():
        json.loads(line[len(KLOG) :])  # still JSON


def test_a_json_record_escaped_inside_a_json_log_is_masked_and_stays_json() -> None:
    inner = json.dumps({"msg": "login", "request": {"password": "Tr0ub4dor&3x", "user": "app"}})
    line = json.dumps({"log": inner + "\n", "stream": "stdout", "time": CRI_TIME}) + "\n"
    out = _masked("containers/app.log", line)
    assert "Tr0ub4dor" not in out
    assert json.loads(json.loads(out)["log"])["request"]["user"] == "app"


def test_key_value_after_journal_cri_and_klog_prefixes_is_masked() -> None:
    text = (
        f"{JOURNAL}{KLOG}password: Zx9-secret-Pw\n"
        f"{CRI_TIME} stderr F {KLOG}client_secret\tQ8~abcdefghijklmnopqrstuvwxyz\n"
        f"2026-12-05T03:12:44+0000 ip-10-0-1-2 setup[42]: api_key: 5f2b1e0c9d8a7b6c\n"
        f'MESSAGE=DB_PASSWORD: "p@ss w0rd"\n'
        "2026-12-05T03:12:44Z ip-10-0-1-2 password: no-ident-Pw\n"
        f"{JOURNAL}{KLOG}reason: NodeNotReady, message: kubelet stopped posting status\n"
    )
    out = _masked("journal/all.log", text)
    for value in ("Zx9-secret-Pw", "Q8~abcdef", "5f2b1e0c9d8a7b6c", "p@ss w0rd", "no-ident-Pw"):
        assert value not in out
    assert out.count(JOURNAL) == 2 and out.count(KLOG) == 3
    assert "reason: NodeNotReady, message: kubelet stopped posting status" in out


def test_yaml_block_scalars_and_lists_under_secret_keys_are_masked() -> None:
    text = (
        "app:\n"
        "  auth:\n"
        "    password: |\n"
        "      line-one-Secret\n"
        "      line-two-Secret\n"
        "    token: >-\n"
        "      folded-Secret-value\n"
        "    apiKeys:\n"
        "    - first-Secret-key\n"
        "    - second-Secret-key\n"
        "    passwords: [flow-Secret-a, 'flow-Secret-b']\n"
        "  notes: |\n"
        "    the node went NotReady at 03:12\n"
        "  imagePullSecrets:\n"
        "  - name: ngc-secret\n"
    )
    out = _masked("values.yaml", text)
    values = ("line-one", "line-two", "folded", "first-Secret", "second-Secret", "flow-Secret")
    assert not [value for value in values if value in out]
    assert "the node went NotReady at 03:12" in out and "- name: ngc-secret" in out
    assert out.count("\n") == text.count("\n")


def test_percent_encoded_values_and_json_are_masked() -> None:
    from urllib.parse import quote

    body = "grant_type=password&username=ops&password=p%40ss%21word%23&next=%2Fhome"
    query = "GET /cb?state=" + quote(json.dumps({"client_secret": "Xy9-very-secret"}), safe="")
    conn = "AccountKey%3D" + quote("abc+def/ghi==", safe="") + "%3BEndpointSuffix%3Dcore"
    out = _masked("access.log", f"{KLOG}POST /token {body}\n{KLOG}{query} 200\n{KLOG}{conn}\n")
    assert "p%40ss" not in out and "very-secret" not in out and "abc%2Bdef" not in out
    assert "username=ops" in out and "next=%2Fhome" in out and "EndpointSuffix%3Dcore" in out


def test_base64_files_in_binary_data_and_log_lines_are_decoded_and_masked() -> None:
    credentials = "[default]\naws_secret_access_key = " + "A1b2" * 10 + "\n"
    encoded = base64.b64encode(credentials.encode()).decode()
    harmless = base64.b64encode(b"#!/bin/sh\necho node ready\n").decode()
    text = (
        f"apiVersion: v1\nkind: ConfigMap\nbinaryData:\n  creds: {encoded}\n"
        f"  boot.sh: {harmless}\n"
        f"{KLOG}restored /root/.aws/credentials from {encoded}\n"
    )
    out = _masked("configmaps.yaml", text)
    assert encoded not in out and out.count(MARKER) == 2
    assert f"boot.sh: {harmless}" in out and "restored /root/.aws/credentials from" in out


def test_a_gzip_log_is_masked_and_recompressed_and_a_clean_one_is_untouched() -> None:
    text = f"{JOURNAL}password: Zx9-secret-Pw\n{JOURNAL}node Ready\n".encode()
    redactor = Redactor()
    out = redactor.redact("journal/kubelet.log.1.gz", gzip.compress(text))
    assert gzip.decompress(out) == text.replace(b"Zx9-secret-Pw", MARKER.encode())
    clean = gzip.compress(f"{JOURNAL}node Ready\n".encode(), mtime=7)
    assert Redactor().redact("journal/kubelet.log.2.gz", clean) == clean
    masked, counts = mask_secrets("journal/kubelet.log.1.gz", gzip.compress(text))
    assert b"Zx9-secret-Pw" not in gzip.decompress(masked) and counts == {"secret-env": 1}


def test_nul_bytes_and_invalid_utf8_around_secrets() -> None:
    data = b"\x00\xc3password: Zx9-secret-Pw\x00\x80\xff\x00\xc3HOME=/root\x00token\tghx-9\x00"
    out = Redactor().redact("proc/environ", data)
    assert b"Zx9-secret-Pw" not in out and b"ghx-9" not in out
    assert out.count(b"\x00") == data.count(b"\x00") and b"HOME=/root" in out
    assert b"\xc3password: " + MARKER.encode() in out


def test_benign_text_in_the_new_encodings_comes_out_byte_identical() -> None:
    node = {
        "kind": "Node",
        "metadata": {"name": "ip-10-0-1-2", "annotations": {"karpenter.sh/nodepool-hash": "6821"}},
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady",
                            "message": "container runtime network not ready: cni plugin"}],
            "nodeInfo": {"kubeletVersion": "v1.31.2-eks-7f9249a", "bootID": "9f1c"},
        },
    }  # fmt: skip
    message = f"{KLOG}Successfully probed plugin, token_ttl: 600s, authMode: Webhook, reason: ok"
    texts = [
        f"{CRI_TIME} stdout P {message[:30]}\n{CRI_TIME} stdout F {message[30:]}\n",
        f"{JOURNAL}{KLOG}reason: NodeNotReady, type: Ready, secretName: ngc-secret\n",
        json.dumps({"items": [{"node": node}]}, indent=2) + "\n",
        f"{KLOG}{json.dumps(node)}\n",
        "volumes:\n- name: creds\n  secret:\n    secretName: db-creds\n    items:\n"
        "    - key: password\n      path: pw\n",
        f"{KLOG}GET /api/v1/nodes?labelSelector=karpenter.sh%2Fnodepool%3Dgpu&limit=500 200\n",
    ]  # fmt: skip
    for text in texts:
        assert _masked("benign.log", text) == text
    redacted = Redactor().redact("kubelet.log.gz", gzip.compress(texts[0].encode()))
    assert gzip.decompress(redacted) == texts[0].encode()


@pytest.mark.deep
@pytest.mark.parametrize("pattern", sorted(HOSTILE_ENCODINGS))
def test_decoding_hostile_encodings_stays_linear(pattern: str) -> None:
    """The decoded views grow with the text, never with its square (same margin as above)."""
    unit = HOSTILE_ENCODINGS[pattern].encode()
    small, large = unit * (16 * 1024 // len(unit)), unit * (64 * 1024 // len(unit))
    t_small, t_large = mask_cpu_seconds(small), mask_cpu_seconds(large)
    assert t_large <= 10 * t_small + 0.05, (pattern, t_small, t_large)
