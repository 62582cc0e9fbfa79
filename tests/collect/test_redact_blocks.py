"""A block secret (a cloud-config chpasswd list, cloud-init's "random" passwords, a private
key cut off) logged one line per record: in journalctl's JSON output, as a container's
json-file log and as a logfmt record each line is its own record, so the block's opener and
its secret lines lie in different records. Every secret line is masked, whatever the user
names are, with and without the multi-pattern engine; the records stay whole, the user names
and every other field stay."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from mignurse.collect import scanner
from mignurse.collect.redact import MARKER, mask_secrets

PASSWORDS = ("Zq8vP3xLw9Tb", "Hk4mR7nQ2sVd", "Wc5jT1yBe6Np")
KEY_LINES = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "Z3Rlc3RrZXlib2R5bGluZXR3b2Zvcm15dGVzdGNhc2VzaGVyZWFuZHRoZXJlMTIz",
)

# (lines as cloud-init or a bootstrap script prints them, the secrets, what must stay);
# cloud-config chpasswd in both forms of canonical/cloud-init@24.4
# cloudinit/config/cc_set_passwords.py, and its "Set the following 'random' passwords" output
BLOCKS: dict[str, tuple[list[str], tuple[str, ...], tuple[str, ...]]] = {
    "chpasswd-list": (
        [
            "#cloud-config",
            "chpasswd:",
            "  expire: false",
            "  list: |",
            f"    root:{PASSWORDS[0]}",
            f"    admin2:{PASSWORDS[1]}",
            f"    backup:{PASSWORDS[2]}",
            "ssh_pwauth: false",
        ],
        PASSWORDS,
        ("root:", "admin2:", "backup:", "ssh_pwauth: false"),
    ),
    "chpasswd-list-items": (
        [
            "chpasswd:",
            "  list:",
            f"    - root:{PASSWORDS[0]}",
            f"    - admin2:{PASSWORDS[1]}",
            f"    - backup:{PASSWORDS[2]}",
            "    - ops:RANDOM",
            "  expire: false",
        ],
        PASSWORDS,
        ("- root:", "- admin2:", "ops:RANDOM", "expire: false"),
    ),
    "chpasswd-random-output": (
        [
            "Set the following 'random' passwords",
            "",
            f"root:{PASSWORDS[0]}",
            f"admin2:{PASSWORDS[1]}",
            f"backup:{PASSWORDS[2]}",
            "Cloud-init v. 24.4 finished at Sat, 05 Dec 2026 03:12:50 +0000",
        ],
        PASSWORDS,
        ("root:", "admin2:", "backup:", "Cloud-init v. 24.4 finished"),
    ),
    # cloud-config users with a password hash (cc_users_groups) and a kubeconfig whose
    # token is a YAML block scalar (kubernetes.io/docs/reference/config-api/kubeconfig.v1/)
    "cloud-config-users-passwd": (
        [
            "users:",
            "  - default",
            "  - name: admin2",
            "    lock_passwd: false",
            f"    passwd: $6$rounds=4096$Hk4mR7nQ${PASSWORDS[1]}{PASSWORDS[2]}",
            "    shell: /bin/bash",
        ],
        (f"{PASSWORDS[1]}{PASSWORDS[2]}",),
        ("name: admin2", "lock_passwd: false", "shell: /bin/bash"),
    ),
    "kubeconfig-token-block": (
        [
            "users:",
            "- name: gpu-prod",
            "  user:",
            "    token: |",
            f"      k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_{PASSWORDS[0]}",
            "contexts: []",
        ],
        (f"aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_{PASSWORDS[0]}",),
        ("name: gpu-prod", "token: |", "contexts: []"),
    ),
    "pem-cut-off": (
        ["-----BEGIN RSA PRIVATE KEY-----", *KEY_LINES, "Cloud-init v. 24.4 finished"],
        KEY_LINES,
        ("-----BEGIN RSA PRIVATE KEY-----", "Cloud-init v. 24.4 finished"),
    ),
}


def journal_json(lines: list[str]) -> str:
    """`journalctl -o json`: the cursor and timestamps, then the entry's fields, MESSAGE a
    string (systemd/systemd src/shared/logs-show.c output_json); cloud-init's stdout."""
    return "".join(
        json.dumps(
            {
                "__CURSOR": f"s=3f2a9c;i={n:x};b=8d1e;m=1c9c380;t=62b1c0a6e4a00;x=9e1",
                "__REALTIME_TIMESTAMP": str(1796440364123456 + n),
                "__MONOTONIC_TIMESTAMP": str(29999999 + n),
                "_BOOT_ID": "8d1e4f5a6b7c4d8e9f0a1b2c3d4e5f60",
                "PRIORITY": "6",
                "_TRANSPORT": "stdout",
                "SYSLOG_IDENTIFIER": "cloud-init",
                "_PID": "1201",
                "_HOSTNAME": "ip-10-0-1-2",
                "MESSAGE": line,
            }
        )
        + "\n"
        for n, line in enumerate(lines)
    )


def json_file(lines: list[str]) -> str:
    """A container's log by Docker's json-file driver: each line's `log` ends with its line
    break (moby/moby v27.3.1 daemon/logger/jsonfilelog/jsonfilelog.go)."""
    return "".join(
        json.dumps({"log": line + "\n", "stream": "stdout", "time": "2026-12-05T03:12:44Z"}) + "\n"
        for line in lines
    )


def logfmt(lines: list[str]) -> str:
    """Go's log/slog text handler: `time=… level=INFO msg="…"` (go1.23 log/slog)."""
    return "".join(
        f"time=2026-12-05T03:12:44.123Z level=INFO msg={json.dumps(line)} unit=node-setup\n"
        for line in lines
    )


RECORDS: dict[str, Callable[[list[str]], str]] = {
    "journal-json": journal_json,
    "json-file": json_file,
    "logfmt": logfmt,
}


def _mask(text: str, engine: bool) -> str:
    if engine:
        out, _ = mask_secrets("journal/cloud-init.json", text.encode())
    else:
        with scanner.engine_disabled():
            out, _ = mask_secrets("journal/cloud-init.json", text.encode())
    return out.decode()


_MESSAGE = re.compile(r'msg=("(?:[^"\\]|\\.)*")')


def _messages(shape: str, text: str) -> list[str]:
    """Each record's message, as an engineer reads it back."""
    if shape == "logfmt":
        return [json.loads(m[1]) for m in map(_MESSAGE.search, text.splitlines()) if m]
    field = "MESSAGE" if shape == "journal-json" else "log"
    return [json.loads(line)[field].removesuffix("\n") for line in text.splitlines()]


@pytest.mark.parametrize("engine", [True, False], ids=["engine", "no-engine"])
@pytest.mark.parametrize("shape", sorted(RECORDS))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_block_secret_split_one_line_per_record_is_masked_in_every_record(
    block: str, shape: str, engine: bool
) -> None:
    lines, secrets, kept = BLOCKS[block]
    text = RECORDS[shape](lines)
    out = _mask(text, engine)
    assert [s for s in secrets if s in out] == []
    assert len(out.splitlines()) == len(lines)
    messages = _messages(shape, out)  # every record still parses
    assert len(messages) == len(lines)
    assert all(k in "\n".join(messages) for k in kept)
    assert sum(m.endswith(MARKER) for m in messages) == len(secrets)
    # the rest of each record as it was
    for before, after in zip(text.splitlines(), out.splitlines(), strict=True):
        if MARKER not in after:
            assert after == before


@pytest.mark.parametrize("shape", sorted(RECORDS))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_the_engine_and_plain_search_mask_a_split_block_alike(block: str, shape: str) -> None:
    lines = BLOCKS[block][0]
    # many records with a trigger word around the block, so that with the engine a line's
    # search for a block opener is skipped where its prefilter sees none
    noise = [f"Started kubelet-auth.service (attempt {n})" for n in range(300)]
    text = RECORDS[shape]([*noise, *lines, *noise])
    out = _mask(text, engine=True)
    assert out == _mask(text, engine=False)
    assert not any(s in out for s in BLOCKS[block][1])
    assert out.splitlines()[:300] == text.splitlines()[:300]
