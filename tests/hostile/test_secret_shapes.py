"""Credentials in shapes named by their form rather than by a tool or provider: an HTTP header
named for a token or key wherever a line prints it, an upper-case `*_PAT` variable, and any
client's `-u USER … -p PASSWORD`, beside look-alikes that must stay (ports, addresses, URLs)."""

from __future__ import annotations

import pytest

from mignurse.collect.redact import MARKER, mask_secrets

PREFIX = "Dec 05 03:12:44 ip-10-0-1-2 app[2211]: "


def masked(line: str) -> str:
    return mask_secrets("node/app.log", (PREFIX + line + "\n").encode())[0].decode()


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("sending header: X-Consul-Token: 3f2504e0-4f89-11d3-9a0c-0305e82c3301", "3f2504e0"),
        ("upstream request headers X-Auth-Token: Zk2mQ9vT1xLw8RcYb4NdHs", "Zk2mQ9vT1x"),
        ("purge with Fastly-Key: Hq7Vn2Lx9Tb4Wc8Ke1Rm5Pz3Ys6Ud0Ja", "Hq7Vn2Lx9T"),
        ("apim call Ocp-Apim-Subscription-Key: 9f86d081884c7d659a2feaa0c55ad015", "9f86d08188"),
        ("AZURE_DEVOPS_EXT_PAT=q3v7zl2kx9m4n8b5c1d6f0g2h7j3k9l4p8r5s1t6w0y2x7z3a9b4", "q3v7zl2kx9"),
        ("cqlsh 10.0.0.9 -u cassandra -p Wq8rT2vX9zL4 --ssl", "Wq8rT2vX9zL4"),
        ("rabbitmqadmin -u admin -p 'Pw with space1' list queues", "Pw with space1"),
        ("influx -username admin -password Gh5Tr9Lp2Wq7", "Gh5Tr9Lp2Wq7"),
    ],
)
def test_a_credential_named_by_its_form_is_masked_and_its_name_kept(line: str, secret: str) -> None:
    out = masked(line)
    assert secret not in out and MARKER in out, out
    assert out.startswith(PREFIX)


@pytest.mark.parametrize(
    "line",
    [
        "docker run -d -u 1000 -p 8080:80 nginx:1.27",
        "docker run -u root -p 127.0.0.1:8080:80/tcp nginx:1.27",
        "psql -U postgres -p 5432 -d app",
        "sudo -u postgres psql -p 5433",
        "mkdir -p /var/lib/kubelet/pki",
        "journalctl -u kubelet -p err --since -6h",
        "request X-Request-Id: 7c1e9a40-1d2f-4b6e-9c3a-5e8f7a6b4c2d served",
        "Content-Type: application/json; X-Amzn-Trace-Id: Root=1-67891233-abcdef012345678912345678",
    ],
)
def test_ports_addresses_and_ordinary_headers_stay(line: str) -> None:
    assert masked(line) == PREFIX + line + "\n"
