"""The encodings a bundle holds a secret in beyond plain text, JSON and YAML: log prefixes
before `key: value` (journal, CRI, klog; journalctl's JSON output), CRI partial lines that
split a token, JSON in a log line and JSON escaped in a JSON string, JSON nested deep, YAML
block and folded scalars, percent-encoding, base64 (a ConfigMap's binaryData, a file held
whole in a log line), gzip, and NUL bytes with invalid UTF-8 around secrets.

Each rendering writes one case as a file a node or a cluster would hold; `read_back` undoes
what an engineer's tools undo when they read it (gunzip, joining CRI partials, percent- and
base64-decoding), so a secret left in encoded form still counts as left.

Formats: CRI logs, kubernetes/kubernetes v1.31.0 pkg/kubelet/kuberuntime/logs/logs.go
(`parseCRILog`: `<RFC 3339 time> <stream> <P|F> <message>`, partial lines tagged P);
klog's header, kubernetes/klog v2.130.1 klog.go (`formatHeader`); journalctl output modes,
https://www.freedesktop.org/software/systemd/man/latest/journalctl.html; YAML block scalars,
https://yaml.org/spec/1.2.2/#81-block-scalar-headers; ConfigMap binaryData,
https://kubernetes.io/docs/concepts/configuration/configmap/; percent-encoding,
https://www.rfc-editor.org/rfc/rfc3986#section-2.1.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

import yaml

from .secrets_corpus import LookAlike, Secret, _document, _Dumper, _yaml_ready

Case = Secret | LookAlike

JOURNAL = "Dec 05 03:12:44 ip-10-0-1-2 kubelet[2211]: "
JOURNAL_ISO = "2026-12-05T03:12:44+0000 ip-10-0-1-2 node-setup[2301]: "
CRI = "2026-12-05T03:12:44.123456789Z stdout "
KLOG = "I1205 03:12:44.123456    2211 server.go:123] "

_ASSIGNMENT = re.compile(
    r"(?P<head>(?:\+ )?(?:export )?)(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<val>\S*)"
)


def _lines(case: Case, sep: str) -> list[str]:
    """The case as lines a program logs: `NAME<sep>value` for an env entry and for a shell
    assignment, the object as YAML when the case is a whole object."""
    if isinstance(case, Secret) and case.env is not None:
        name, value = case.env
        return [f"{name}{sep}{value}"]
    if not case.text:
        return _yaml(_document(case)).splitlines()
    out = []
    for line in case.text.splitlines():
        m = _ASSIGNMENT.fullmatch(line)
        out.append(f"{m['head']}{m['name']}{sep}{m['val']}" if m else line)
    return out


def _yaml(document: Any) -> str:
    return yaml.dump(_yaml_ready(document), Dumper=_Dumper, sort_keys=False, width=10**9)


def journal(case: Case) -> str:
    """`journalctl` short output: `key: value` after the journal prefix."""
    return "".join(f"{JOURNAL}{line}\n" for line in _lines(case, ": "))


def cri_klog_tab(case: Case) -> str:
    """A container's log as the kubelet keeps it: CRI prefix, klog header, `key<TAB>value`;
    the short-iso journal prefix on every other line."""
    return "".join(
        f"{CRI}F {KLOG}{line}\n" if n % 2 == 0 else f"{JOURNAL_ISO}{line}\n"
        for n, line in enumerate(_lines(case, "\t"))
    )


def journal_json(case: Case) -> str:
    """`journalctl -o json`: one object per entry, the line in MESSAGE."""
    return "".join(
        json.dumps(
            {
                "__REALTIME_TIMESTAMP": "1796440364123456",
                "_HOSTNAME": "ip-10-0-1-2",
                "SYSLOG_IDENTIFIER": "node-setup",
                "MESSAGE": line,
            }
        )
        + "\n"
        for line in _lines(case, ": ")
    )


def json_file_lines(case: Case) -> str:
    """A container's log by Docker's json-file driver, one record per line, each `log`
    ending with its line break (moby/moby v27.3.1 daemon/logger/jsonfilelog/jsonfilelog.go)."""
    return "".join(
        json.dumps({"log": line + "\n", "stream": "stdout", "time": "2026-12-05T03:12:44Z"}) + "\n"
        for line in _lines(case, ": ")
    )


def logfmt(case: Case) -> str:
    """Go's log/slog text handler, one record per line, the line a quoted `msg` (go1.23
    src/log/slog/text_handler.go)."""
    return "".join(
        f"time=2026-12-05T03:12:44.123Z level=INFO msg={json.dumps(line)} unit=node-setup\n"
        for line in _lines(case, ": ")
    )


PARTIAL = 23  # characters per CRI partial line: splits tokens, keys and prefixes alike


def cri_partial(case: Case) -> str:
    """Each line split by the runtime into `P` lines and a final `F` line."""
    out: list[str] = []
    for line in _lines(case, ": "):
        message = KLOG + line
        chunks = [message[i : i + PARTIAL] for i in range(0, len(message), PARTIAL)] or [""]
        out.extend(f"{CRI}P {chunk}\n" for chunk in chunks[:-1])
        out.append(f"{CRI}F {chunks[-1]}\n")
    return "".join(out)


def _record(case: Case) -> dict[str, Any]:
    """A structured log record holding the case two or more levels deep."""
    if isinstance(case, Secret) and case.env is not None:
        name, value = case.env
        return {"level": "info", "msg": "loaded", "config": {"auth": {name: value}}}
    if not case.text:
        return {"level": "info", "msg": "applied", "object": _document(case)}
    return {"level": "error", "msg": "command failed", "detail": {"output": case.text}}


def klog_json(case: Case) -> str:
    """A klog line whose message is a JSON document."""
    return f"{KLOG}{json.dumps(_record(case), separators=(',', ':'))}\n"


def json_escaped(case: Case) -> str:
    """A container's JSON log (json-file driver) holding a JSON record as its `log`."""
    inner = json.dumps(_record(case), separators=(",", ":")) + "\n"
    return json.dumps({"log": inner, "stream": "stdout", "time": "2026-12-05T03:12:44Z"}) + "\n"


def json_nested(case: Case) -> str:
    """An indented JSON file with the case in arrays and objects four levels down."""
    return json.dumps({"items": [{"spec": {"settings": [_record(case)]}}]}, indent=2) + "\n"


_BLOCK_STYLES = ("|", "|-", ">", "|+")


def yaml_block(case: Case) -> str:
    """YAML with the value as a block or folded scalar under its name (nested two deep)."""
    if isinstance(case, Secret) and case.env is not None:
        name, value = case.env
        style = _BLOCK_STYLES[sum(map(ord, name)) % len(_BLOCK_STYLES)]
        return f"app:\n  config:\n    {name}: {style}\n      {value}\n    region: us-west-2\n"
    body = case.text or _yaml(_document(case))
    indented = "".join(f"      {line}\n" if line else "\n" for line in body.splitlines())
    return f"app:\n  files:\n    setup.log: |\n{indented}  replicas: 2\n"


def url_encoded(case: Case) -> str:
    """Percent-encoding: a form body, and a query parameter holding a whole line or JSON."""
    if isinstance(case, Secret) and case.env is not None:
        name, value = case.env
        body = urllib.parse.urlencode({name: value, "next": "/home"})
        return f"{KLOG}POST /session body={body} 302\n"
    payload = case.text or json.dumps(_document(case))
    return f"{KLOG}GET /debug?cmd={urllib.parse.quote(payload, safe='')}&v=2 404\n"


def binary_data(case: Case) -> str:
    """A ConfigMap carrying the case as a file in binaryData (YAML, as kubectl prints it)."""
    body = "\n".join(_lines(case, "=")) + "\n"
    document = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "node-setup", "namespace": "kube-system"},
        "binaryData": {"setup.env": base64.b64encode(body.encode()).decode()},
    }
    return _yaml(document)


def base64_in_log(case: Case) -> str:
    """A whole file (a docker config, a credentials file) logged as base64 in a klog line."""
    body = base64.b64encode(("\n".join(_lines(case, "=")) + "\n").encode()).decode()
    return f"{KLOG}writing /root/.config/app.env (base64): {body}\n"


def gzipped(case: Case) -> bytes:
    """A rotated log: the journal rendering, gzip'd."""
    return gzip.compress(journal(case).encode(), mtime=0)


def invalid_utf8(case: Case) -> bytes:
    """Entries separated by NUL bytes with invalid UTF-8 before and after each (a torn
    write, /proc/<pid>/environ, a binary log)."""
    return (
        b"\xff\xfe".join(b"\x00\xc3" + line.encode() + b"\x00\x80" for line in _lines(case, ": "))
        + b"\n"
    )


RENDERINGS: dict[str, Callable[[Case], str | bytes]] = {
    "journal": journal,
    "cri-klog-tab": cri_klog_tab,
    "journal-json": journal_json,
    "json-file-lines": json_file_lines,
    "logfmt": logfmt,
    "cri-partial": cri_partial,
    "klog-json": klog_json,
    "json-escaped": json_escaped,
    "json-nested": json_nested,
    "yaml-block": yaml_block,
    "url-encoded": url_encoded,
    "binary-data": binary_data,
    "base64-in-log": base64_in_log,
    "gzip": gzipped,
    "invalid-utf8": invalid_utf8,
}

FILE_NAMES = {
    "journal-json": "journal.json",
    "json-file-lines": "container.log",
    "logfmt": "node-setup.log",
    "json-nested": "objects.json",
    "yaml-block": "objects.yaml",
    "binary-data": "configmaps.yaml",
    "gzip": "kubelet.log.1.gz",
}

# base64 runs that hold a secret are masked whole: the evidence in them goes with it
OPAQUE = frozenset({"binary-data", "base64-in-log"})

_CRI_LINE = re.compile(rb"(?m)^\S+ (?:stdout|stderr) (?P<tag>[PF]) (?P<msg>[^\n]*)\n?")
_BASE64_RUN = re.compile(rb"[A-Za-z0-9+/]{16,}={0,2}")


def read_back(rendering: str, out: bytes) -> bytes:
    """What an engineer reads from a redacted file: decompressed, partial lines joined,
    percent- and base64-encoded values decoded beside the text."""
    if rendering == "gzip":
        return gzip.decompress(out)
    if rendering == "cri-partial":
        return b"".join(
            m["msg"] + (b"\n" if m["tag"] == b"F" else b"") for m in _CRI_LINE.finditer(out)
        )
    if rendering == "url-encoded":
        return (
            urllib.parse.unquote_to_bytes(out)
            + b"\n"
            + urllib.parse.unquote_plus(out.decode()).encode()
        )
    if rendering in OPAQUE:
        decoded = []
        for run in _BASE64_RUN.findall(out):
            try:
                decoded.append(base64.b64decode(run + b"=" * (-len(run) % 4)))
            except ValueError:
                continue
        return b"\n".join([out, *decoded])
    if rendering == "journal-json":
        return b"".join(
            json.loads(line)["MESSAGE"].encode() + b"\n" for line in out.splitlines() if line
        )
    if rendering in ("json-escaped", "json-file-lines"):
        return b"".join(json.loads(line)["log"].encode() for line in out.splitlines() if line)
    if rendering == "logfmt":
        return b"".join(json.loads(m[1]).encode() + b"\n" for m in _LOGFMT_MESSAGE.finditer(out))
    return out


_LOGFMT_MESSAGE = re.compile(rb'msg=("(?:[^"\\\n]|\\.)*")')


# text that once made a decoder look ahead or back over the whole file: repeated, it must
# cost time in proportion to its length (`test_decoding_hostile_encodings_stays_linear`)
HOSTILE_ENCODINGS = {
    "cri-partial-run": f"{CRI}P password: ab",
    "cri-partial-no-final": f"{CRI}P {KLOG}",
    "percent-run": "password%3D%41%42",
    "percent-unterminated": "%4",
    "json-string-unterminated": '"msg":"password: \\',
    "json-escapes": '"\\u0041\\"token\\": ',
    "json-document-starts": '{"password":[',
    "base64-text-run": base64.b64encode(b"password: hunter2\n" * 3).decode() + " ",
    "yaml-block-openers": "password: |\n",
    "yaml-list-openers": "passwords:\n- ",
    "prefix-run": JOURNAL + KLOG,
    "tab-values": "token\tx\t",
    "nul-separated-keys": "\x00password: a",
    "form-plus-run": "?password=a+b+",
    "form-words-after-space": " a=b+c ",
}
