"""Redaction of planted secrets in realistic bundle files."""

from __future__ import annotations

import gzip
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.collect import encodings
from mignurse.collect.redact import MARKER, RULES, Redactor
from mignurse.collect.secretrules import _CONTEXT_TOKENS

KEY_ID = "AKIAIOSFODNN7EXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
SESSION = "IQoJb3JpZ2luX2VjEHYaCXVzLXdlc3QtMiJHMEUCIQDexample"
JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06bm9kZSJ9.c2lnbmF0dXJlLXBhcnQ"
# base64 of "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA..." and of a CERTIFICATE header
B64_KEY = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVB"
B64_CERT = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lC"
PRIVATE_BODY = "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"
CERT_BODY = "MIIC/jCCAeagAwIBAgIBADANBgkqhkiG9w0BAQsFADAVMRMwEQYDVQQDEwprdWJl"

CLOUD_INIT_OUTPUT = f"""\
Cloud-init v. 22.2.2 running 'modules:final' at Tue, 07 May 2024 09:12:01 +0000.
+ export AWS_ACCESS_KEY_ID={KEY_ID}
+ export AWS_SECRET_ACCESS_KEY={SECRET_KEY}
+ export AWS_SESSION_TOKEN={SESSION}
+ curl -sSfL https://deploy:Sup3r-S3cret@artifacts.corp.example.com/gpu/setup.sh -o /tmp/s.sh
  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current
+ /etc/eks/bootstrap.sh gpu-prod --b64-cluster-ca xyz
Cloud-init v. 22.2.2 finished at Tue, 07 May 2024 09:12:44 +0000. Datasource DataSourceEc2.
"""

KUBECONFIG = f"""\
apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {B64_CERT}
    server: https://ABCDEF.gr7.us-west-2.eks.amazonaws.com
  name: gpu-prod
users:
- name: admin
  user:
    client-certificate-data: {B64_CERT}
    client-key-data: {B64_KEY}
    token: k8s-aws-v1.aHR0cHM6Ly9zdHMudXMtd2VzdC0yLmFtYXpvbmF3cy5jb20v
"""

JOURNAL_LINE = (
    "2024-05-07T09:13:02.123456+00:00 ip-10-0-37-142.us-west-2.compute.internal kubelet[2210]: "
    'I0507 09:13:02.123456    2210 round_trippers.go:466] "Request Headers" '
    f'Authorization="Bearer {JWT}"\n'
)

CONTAINERD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.corp.example.com".auth]
  auth = "ZGVwbG95OnMzY3JldA=="
"""
DOCKER_CONFIG = '{"auths": {"registry.corp.example.com": {"auth": "ZGVwbG95OnMzY3JldA=="}}}\n'

ENV_DUMP = "HOME=/root\nDB_PASSWORD=p4ss-w0rd!\nAPI_KEY=abc123def456\nPATH=/usr/bin\n"

PEM_FILE = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    f"{PRIVATE_BODY}\n{PRIVATE_BODY[:20]}==\n"
    "-----END RSA PRIVATE KEY-----\n"
    "-----BEGIN CERTIFICATE-----\n"
    f"{CERT_BODY}\n"
    "-----END CERTIFICATE-----\n"
)

KUBEADM = "kubeadm join 10.0.0.10:6443 --token abcdef.0123456789abcdef --discovery-token-unsafe\n"


def _run(name: str, text: str, **kw: bool) -> tuple[str, dict[str, int]]:
    redactor = Redactor(**kw)
    out = redactor.redact(name, text.encode()).decode()
    return out, redactor.report().get(name, {})


def test_cloud_init_output_masks_aws_pair_and_url_password() -> None:
    out, counts = _run("node/cloud-init-output.log", CLOUD_INIT_OUTPUT)
    assert SECRET_KEY not in out and SESSION not in out and KEY_ID not in out
    assert "Sup3r-S3cret" not in out
    assert f"AWS_ACCESS_KEY_ID=AKIA{MARKER}" in out
    assert f"AWS_SECRET_ACCESS_KEY={MARKER}" in out
    assert f"https://deploy:{MARKER}@artifacts.corp.example.com/gpu/setup.sh" in out
    assert "Cloud-init v. 22.2.2 finished" in out and "% Total" in out
    assert counts == {
        "aws-access-key-id": 1,
        "aws-secret-access-key": 1,
        "aws-session-token": 1,
        "url-credentials": 1,
    }


def test_kubeconfig_masks_client_key_and_token_keeps_certificates() -> None:
    out, counts = _run("node/kubeconfig", KUBECONFIG)
    assert B64_KEY not in out
    assert f"client-key-data: {MARKER}" in out
    assert out.count(B64_CERT) == 2
    assert f"    token: k8s-aws-v1.{MARKER}\n" in out  # the EKS token's public prefix stays
    assert "server: https://ABCDEF.gr7.us-west-2.eks.amazonaws.com" in out
    assert counts == {"pem-base64": 1, "provider-token": 1}


def test_journal_bearer_token() -> None:
    out, counts = _run("node/journal/kubelet.log", JOURNAL_LINE)
    assert JWT not in out
    assert f'Authorization="Bearer {MARKER}"' in out
    assert out.startswith("2024-05-07T09:13:02.123456+00:00 ip-10-0-37-142.us-west-2")
    assert counts == {"bearer-token": 1}


def test_registry_auth_in_containerd_and_docker_config() -> None:
    out, counts = _run("node/etc/containerd/config.toml", CONTAINERD)
    assert f'auth = "{MARKER}"' in out and "ZGVwbG95" not in out
    assert '.configs."registry.corp.example.com".auth]' in out
    assert counts == {"docker-auth": 1}
    out, counts = _run("node/config.json", DOCKER_CONFIG)
    assert out == f'{{"auths": {{"registry.corp.example.com": {{"auth": "{MARKER}"}}}}}}\n'
    assert counts == {"secret-field": 1}  # a JSON document: masked by its structure


def test_env_dump_keeps_names_masks_values() -> None:
    out, counts = _run("node/env", ENV_DUMP)
    assert out == f"HOME=/root\nDB_PASSWORD={MARKER}\nAPI_KEY={MARKER}\nPATH=/usr/bin\n"
    assert counts == {"secret-env": 2}


def test_kubernetes_pod_json_env_and_harmless_fields() -> None:
    pod = (
        '{"env": [{"name": "DB_PASSWORD", "value": "hunter2"}, {"name": "MODE", "value": "x"}],'
        ' "volumes": [{"secret": {"secretName": "db-creds"}}],'
        ' "automountServiceAccountToken": false, "password": "pw"}'
    )
    out, counts = _run("k8s/pods.json", pod)
    assert "hunter2" not in out and '"password": "***REDACTED***"' in out
    assert '"secretName": "db-creds"' in out and '"automountServiceAccountToken": false' in out
    assert '{"name": "MODE", "value": "x"}' in out
    assert counts == {"k8s-env": 1, "secret-field": 1}


def test_pem_private_key_masked_certificate_kept() -> None:
    out, counts = _run("node/pki.pem", PEM_FILE)
    assert PRIVATE_BODY not in out
    assert out.startswith(
        f"-----BEGIN RSA PRIVATE KEY-----\n{MARKER}\n-----END RSA PRIVATE KEY-----\n"
    )
    assert f"-----BEGIN CERTIFICATE-----\n{CERT_BODY}\n-----END CERTIFICATE-----\n" in out
    assert counts == {"pem-block": 1}


def test_truncated_private_key_and_json_escaped_pem() -> None:
    truncated = f"log: -----BEGIN EC PRIVATE KEY-----\n{PRIVATE_BODY}\n{PRIVATE_BODY}\n[end]"
    out, _ = _run("a.log", truncated)
    assert PRIVATE_BODY not in out and out.endswith("[end]")
    escaped = (
        '{"key": "-----BEGIN PRIVATE KEY-----\\n' + PRIVATE_BODY + '\\n-----END PRIVATE KEY-----"}'
    )
    out, counts = _run("cm.json", escaped)
    assert out == (
        '{"key": "-----BEGIN PRIVATE KEY-----\\n' + MARKER + '\\n-----END PRIVATE KEY-----"}'
    )
    assert counts == {"pem-block": 1}


def test_bootstrap_token_keeps_id() -> None:
    out, counts = _run("node/kubeadm.log", KUBEADM)
    assert out == KUBEADM.replace("0123456789abcdef", MARKER)
    assert counts == {"bootstrap-token": 1}


def test_prose_is_left_alone() -> None:
    text = (
        "Failed to get token: connection refused\n"
        "docker run -u 1000:1000 image\n"
        "bypass the password check when true\n"
        "https://example.com:8443/path@v2 and user@example.com\n"
    )
    out, counts = _run("x.log", text)
    assert out == text and counts == {}


def test_report_accumulates_per_file_and_rules_are_stable() -> None:
    redactor = Redactor()
    redactor.redact("a", ENV_DUMP.encode())
    redactor.redact("b", JOURNAL_LINE.encode())
    redactor.redact("c", b"nothing here\n")
    assert redactor.report() == {"a": {"secret-env": 2}, "b": {"bearer-token": 1}}
    assert Redactor.RULES == RULES
    assert RULES[0] == "pem-block" and "secret-env" in RULES and len(set(RULES)) == len(RULES)


def test_disabled_changes_nothing() -> None:
    redactor = Redactor(enabled=False, obfuscate_network=True)
    for name, text in [("a", CLOUD_INIT_OUTPUT), ("b", KUBECONFIG), ("c", PEM_FILE)]:
        assert redactor.redact(name, text.encode()) == text.encode()
    assert redactor.report() == {} and redactor.mapping() == {}


def test_nul_bytes_do_not_hide_secrets_and_archives_are_opened() -> None:
    redactor = Redactor()
    after_crash = b"\x00" * 9000 + ENV_DUMP.encode()
    out = redactor.redact("kubelet.log", after_crash)
    masked = f"HOME=/root\nDB_PASSWORD={MARKER}\nAPI_KEY={MARKER}\nPATH=/usr/bin\n"
    assert out == b"\x00" * 9000 + masked.encode()
    masked = redactor.mask("nvidia-bug-report.log.gz", gzip.compress(ENV_DUMP.encode()))
    assert masked.data is not None and b"p4ss-w0rd" not in gzip.decompress(masked.data)
    assert redactor.report() == {
        "kubelet.log": {"secret-env": 2},
        "nvidia-bug-report.log.gz": {"secret-env": 2},
    }


def test_invalid_utf8_round_trips() -> None:
    data = b"caf\xe9 \xff\xfe DB_PASSWORD=x\xe9y\n"
    out = Redactor().redact("x", data)
    assert out == b"caf\xe9 \xff\xfe DB_PASSWORD=" + MARKER.encode() + b"\n"


def test_network_obfuscation_is_consistent_across_files() -> None:
    redactor = Redactor(obfuscate_network=True)
    one = (
        "ip-10-0-37-142.us-west-2.compute.internal kubelet: node ip-10-0-37-142 ready, "
        "InternalIP 10.0.37.142 dns 127.0.0.1 bind 0.0.0.0 mac 0a:1b:2c:3d:4e:5f "
        "v6 2600:1f14:abc:1::42 driver 535.104.05 image v1.2.3.4\n"
    )
    two = '{"address": "10.0.37.142", "hostname": "ip-10-0-37-142.ec2.internal", "ip": "10.0.9.9"}'
    out1 = redactor.redact("journal", one.encode()).decode()
    out2 = redactor.redact("nodes.json", two.encode()).decode()
    mapping = redactor.mapping()
    ip = mapping["10.0.37.142"]
    assert ip.startswith("10.255.") and ip in out1 and ip in out2
    assert "10.0.37.142" not in out1 + out2 and "ip-10-0-37-142" not in out1 + out2
    assert "host-0001.example.internal kubelet: node host-0001 ready" in out1
    assert '"hostname": "host-0001.example.internal"' in out2
    assert mapping["10.0.9.9"] != ip
    assert "127.0.0.1" in out1 and "0.0.0.0" in out1
    assert "535.104.05" in out1 and "v1.2.3.4" in out1
    assert "0a:1b:2c:3d:4e:5f" not in out1 and "2600:1f14" not in out1
    assert redactor.report()["journal"]["net-hostname"] == 2
    assert redactor.redact("again", out1.encode()).decode() == out1  # stand-ins stay put


_FRAGMENTS = st.sampled_from(
    [
        "password",
        "token",
        "=",
        ": ",
        '"',
        "'",
        "\\n",
        "\n",
        " ",
        ",",
        "--",
        "://",
        "@",
        "u:p",
        "Bearer ",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "LS0tLS1CRUdJTi",
        KEY_ID,
        SECRET_KEY,
        "aws_secret_access_key=",
        "abcdef.0123456789abcdef",
        '"auth": "',
        "name: X_PASSWORD\n  value: ",
        MARKER,
        "10.0.0.1",
    ]
)
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_random_text_never_raises_and_is_idempotent(text: str) -> None:
    once = Redactor().redact("f", text.encode("utf-8", "surrogatepass"))
    assert Redactor().redact("f", once) == once


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(data: bytes) -> None:
    out = Redactor(obfuscate_network=True).redact("f", data)
    assert isinstance(out, bytes)


def _journal(size: int) -> tuple[bytes, int]:
    lines = [
        "2024-05-07T09:13:02.123456+00:00 ip-10-0-37-142.us-west-2.compute.internal kubelet[2210]:"
        ' I0507 09:13:02.123456 2210 kubelet.go:2453] "SyncLoop (PLEG): event for pod"'
        ' pod="kube-system/nvidia-device-plugin-daemonset-x7k2p"'
        ' event={"ID":"3f1c","Type":"ContainerStarted","Data":"9b1e"}\n',
        "2024-05-07T09:13:02.223456+00:00 ip-10-0-37-142.us-west-2.compute.internal kernel:"
        " NVRM: Xid (PCI:0000:17:00): 79, pid=2210, GPU has fallen off the bus.\n",
        "2024-05-07T09:13:02.323456+00:00 ip-10-0-37-142.us-west-2.compute.internal"
        ' containerd[998]: time="2024-05-07T09:13:02Z" level=info msg="PullImage'
        ' \\"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5\\" returns image"\n',
        JOURNAL_LINE,
    ]
    block = "".join(lines)
    repeats = size // len(block) + 1
    return (block * repeats).encode(), repeats


@pytest.mark.deep
def test_twenty_megabyte_journal() -> None:
    data, repeats = _journal(20 * 1024 * 1024)
    redactor = Redactor()
    out = redactor.redact("journal/all.log", data)
    assert JWT.encode() not in out
    assert out.count(b"GPU has fallen off the bus.") == repeats
    assert redactor.report() == {"journal/all.log": {"bearer-token": repeats}}


def test_token_counts_are_not_secrets_but_quoted_digits_are() -> None:
    text = (
        'INFO request done prompt_tokens=512 max_tokens: 4096 "completion_tokens": 77\n'
        '{"password": "123456", "bearer-token": 2}\n'
        "DB_PASSWORD=hunter2\n"
    )
    out = Redactor().redact("vllm.log", text.encode()).decode()
    assert "prompt_tokens=512" in out and "max_tokens: 4096" in out
    assert '"completion_tokens": 77' in out and '"bearer-token": 2' in out
    assert '"password": "***REDACTED***"' in out
    assert "DB_PASSWORD=***REDACTED***" in out


def test_a_key_spelled_with_escapes_in_a_failed_probes_output_is_masked() -> None:
    # kubelet logs a readiness probe's output as a Go-quoted string (kubernetes/kubernetes
    # @v1.32.0 pkg/kubelet/prober/prober.go); the URL in it is what has the line decoded
    line = (
        'I1129 03:12:09.000001    2391 prober.go:107] "Probe failed" probeType="Readiness" '
        'output="Get \\"http://10.0.1.2:8000/health\\": \\u0041KIAIOSFODNN7EXAMPLE"\n'
    )
    out = Redactor().redact("journal/kubelet.log", line.encode()).decode()
    assert "IOSFODNN7EXAMPLE" not in out
    assert "http://10.0.1.2:8000/health" in out


# The context-token regex as first written, each branch's look-behind before its first
# character: the rewrite that starts every branch with that character (so that `re` skips to
# them) must find the same matches, with the same group.
_CONTEXT_TOKENS_AS_WRITTEN = re.compile(
    r"(?<![\w.-])s\.(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}\d)(?P<vault>[A-Za-z0-9]{24})"
    r"(?![\w.-])"
    r"|(?<![\w.-])b\.(?P<vault2>AAAAAQ[\w-]{20,512})"
    r"|(?<![\w-])(?=[\w-]{0,41}[A-Z])(?P<okta>00[A-Za-z0-9_-]{40})(?![\w-])"
    r"|(?<![\w-])(?:SK|AC)(?P<twilio>[0-9a-fA-F]{32})(?![\w-])"
    r"|(?<![\w-])key-(?P<mailgun>[0-9a-f]{32})(?![\w-])"
    r"|(?<=\d):(?P<telegram>AA[A-Za-z0-9_-]{31,34})(?![\w-])"
)
_TOKEN_PIECES = st.sampled_from(
    [
        "s.",
        "b.",
        "00",
        "SK",
        "AC",
        "key-",
        "7:AA",
        "AAAAAQ",
        "hvsKp2Xc9Lm4Qr8Tz1Wv",
        "0123456789abcdef",
        "ABCDEF0123456789",
        "qR7_-zZ",
        "-",
        ".",
        "_",
        " ",
        "é",
        "\n",
    ]
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_TOKEN_PIECES, max_size=16), st.integers(0, 40))
def test_context_tokens_are_found_as_by_the_regex_with_its_look_behinds_first(
    pieces: list[str], start: int
) -> None:
    text = "".join(pieces)

    def found(regex: re.Pattern[str]) -> list[tuple[tuple[int, int], str, tuple[int, int]]]:
        out = []
        for m in regex.finditer(text, min(start, len(text))):
            group = next(g for g, value in m.groupdict().items() if value is not None)
            named = group.rstrip("2") if group == "twilio2" else group
            out.append((m.span(), named, m.span(group)))
        return out

    assert found(_CONTEXT_TOKENS) == found(_CONTEXT_TOKENS_AS_WRITTEN), text


def test_each_kind_of_context_token_is_found_by_its_group() -> None:
    tokens = {
        "vault": "s." + "Ab1" * 8,
        "vault2": "b.AAAAAQ" + "x" * 20,
        "okta": "00" + "Ab1_" * 10,
        "twilio": "SK" + "0a" * 16,
        "twilio2": "AC" + "0a" * 16,
        "mailgun": "key-" + "0a" * 16,
        "telegram": "12:AA" + "x" * 31,
    }
    edges = [("okta", "00" + "a1" * 19 + "bZ")]  # its one capital last: the reach's end
    for group, token in [*tokens.items(), *edges]:
        m = _CONTEXT_TOKENS.search(f"x {token} y")
        written = _CONTEXT_TOKENS_AS_WRITTEN.search(f"x {token} y")
        assert m is not None and written is not None, group
        assert m.span(group) == written.span(group.rstrip("2") if group == "twilio2" else group)


_ESCAPED = st.sampled_from(
    ["\\u0041", "\\u00e9", "\\u12", "\\uZZ00", '\\"', "\\\\", "\\n", "\\/", "\\x", "a", ":", " "]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_ESCAPED, max_size=12), st.booleans())
def test_a_string_is_unescaped_as_its_json_escapes_read(pieces: list[str], record: bool) -> None:
    # every escape `_ESCAPE` reads (\uXXXX, or a backslash and the character after it) is one
    # character of the view that stands for the escape; what lies between is copied
    body = ":xyzzy" + "".join(pieces)  # (long enough, and a `:`: a string worth a look)
    line = ('app[1]: msg="' if record else 'app[1]: x "') + body + '" y'
    start = line.index('"') + 1
    end = start + len(body)
    if record:
        end = encodings._without_line_break(line, start, end)
    text, pieces_expected, at = "", [], start
    for esc in encodings._ESCAPE.finditer(line, start, end):
        if esc.start() > at:
            pieces_expected.append((len(text), len(text) + esc.start() - at, at, esc.start()))
            text += line[at : esc.start()]
        code = esc[0][1:]
        value = (
            chr(int(code[1:], 16)) if len(code) == 5 else encodings._SIMPLE_ESCAPES.get(code, code)
        )
        pieces_expected.append((len(text), len(text) + 1, esc.start(), esc.end()))
        text += value
        at = esc.end()
    if end > at:
        pieces_expected.append((len(text), len(text) + end - at, at, end))
        text += line[at:end]
    view = encodings._json_strings(line, [(0, len(line))], None)
    assert view is not None
    assert (view.text, view.pieces) == (text + "\n", pieces_expected)


def test_a_json_list_of_objects_after_a_journal_pid_is_walked() -> None:
    # `[12]` is a document too, one with no mapping in it, so nothing to mask: the next one
    # on the line is still parsed and walked
    line = 'Nov 29 03:00:00 host app[12]: [{"password": "hunter2-Secret9"}, [1, "x"]]'
    edits = list(encodings.json_document_edits(line, [(0, len(line))], lambda: None))
    assert [line[start:end] for start, end, _ in edits] == ["hunter2-Secret9"]
