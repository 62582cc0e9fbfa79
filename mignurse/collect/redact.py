"""Mask secrets (and optionally network identities) in files bound for a support bundle.

Each rule is a compiled regex plus a function that turns one match into one edit (span and
replacement) or declines it. Rules run one after another over the whole text; every rule has a
literal or keyword prefix so the regex engine can skip ahead instead of trying each position.

Decisions:
- PEM: blocks whose label is on a public allow-list (CERTIFICATE, PUBLIC KEY, CRL, CSR, PGP
  public key/signature, parameters) are kept, since certificates are public and help debugging;
  every other block (every ``PRIVATE KEY`` and ``ENCRYPTED`` one, and unknown labels) is masked.
  The same decision applies to base64-wrapped PEM (``LS0tLS1CRUdJTi…``) as found in kubeconfigs.
  A private key whose END line is missing (truncated log) still has its base64 lines masked.
- Values already containing ``***REDACTED***`` are left alone and not counted, which makes
  ``redact(redact(x)) == redact(x)``.
- ``secret-env`` keeps booleans/null and names ending in name/ref/file/path/dir/id/type
  (``secretName``, ``tokenFile``): they are not secrets and are often the diagnosis.
- ``secret-env`` keeps unquoted numbers (``max_tokens=4096``, ``"prompt_tokens": 512``, the
  manifest's own ``"bearer-token": 2``): inference logs are full of token counts, and a number
  written without quotes is a count far more often than a password. A quoted one is masked.
- AWS account ids are not masked: they are not credentials and are needed for IAM/ECR issues.
- Network obfuscation maps hosts consistently per ``Redactor``; stand-ins it issued are
  recognised and left alone, so a real address equal to an issued stand-in reads as that
  stand-in (10.255.0.0/16 is rare in VPCs).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass

MARKER = "***REDACTED***"
SKIPPED_BINARY = "skipped-binary"

_Edit = tuple[int, int, str]


@dataclass(frozen=True)
class _Rule:
    name: str
    regex: re.Pattern[str]
    edit: Callable[[re.Match[str]], _Edit | None]
    # (lower-case substring, how many characters before it a match may start): every match
    # starts within that reach of one of them. Rules share substrings (token, secret, auth),
    # and each is searched once per text, so fewer and shared substrings mean fewer passes.
    triggers: tuple[tuple[str, int], ...]
    whole_text: bool = False  # scan everything with finditer (rare, literal-prefixed rules)


# --- PEM -------------------------------------------------------------------------------------

_PUBLIC_PEM = re.compile(
    r"(?:X509 |TRUSTED |NEW )?CERTIFICATE(?: REQUEST)?|X509 CRL|(?:RSA |SSH2 )?PUBLIC KEY"
    r"|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|(?:DH|EC|DSA) PARAMETERS"
)
_NL = r"(?:\r?\n|\\n)"  # real newline, or the two characters \n inside JSON strings
_PEM_BLOCK = re.compile(
    r"-----BEGIN (?P<label>[A-Z0-9 ]{1,64})-----(?:"
    r"(?P<body>[\s\S]{0,262144}?)-----END (?P=label)-----"
    rf"|(?P<tail>(?:{_NL}[ \t]*(?:Proc-Type:[^\n]*|DEK-Info:[^\n]*|[A-Za-z0-9+/=]+)[ \t]*)+))"
)


def _pem_block(m: re.Match[str]) -> _Edit | None:
    label = m["label"]
    if _PUBLIC_PEM.fullmatch(label):
        return None
    if m["body"] is not None:
        body = m["body"]
        if body.replace("\\n", "").strip() in ("", MARKER):
            return None
        nl = "\\n" if "\\n" in body and "\n" not in body else "\n"
        new = f"-----BEGIN {label}-----{nl}{MARKER}{nl}-----END {label}-----"
        return m.start(), m.end(), new
    tail = m["tail"]
    nl = "\\n" if tail.startswith("\\n") else "\n"
    return m.start(), m.end(), f"-----BEGIN {label}-----{nl}{MARKER}"


_PEM_B64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}")
_PEM_LABEL = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,64})-----")


def _pem_base64(m: re.Match[str]) -> _Edit | None:
    head = m[0][:96]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        decoded = ""
    label = _PEM_LABEL.match(decoded)
    if label and _PUBLIC_PEM.fullmatch(label[1]):
        return None
    return m.start(), m.end(), MARKER


# --- AWS -------------------------------------------------------------------------------------

_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")


def _aws_key_id(m: re.Match[str]) -> _Edit | None:
    # the 4-letter prefix stays: it tells long-term (AKIA) from temporary (ASIA) keys
    return m.start() + 4, m.end(), MARKER


_KV_SEP = r"(?:\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?|[ \t]+)"
_AWS_SECRET = re.compile(
    rf"(?i:aws_secret_access_key|secret_?access_?key){_KV_SEP}"
    r"(?P<val>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_SESSION = re.compile(
    rf"(?i:aws_session_token|aws_security_token|session_?token|x-amz-security-token){_KV_SEP}"
    r"(?P<val>[A-Za-z0-9/+=%]{16,})"
)


def _val_group(m: re.Match[str]) -> _Edit | None:
    return m.start("val"), m.end("val"), MARKER


# --- tokens ----------------------------------------------------------------------------------

_BEARER = re.compile(
    r"(?i:\bbearer)(?:[ \t]+|\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?)"
    r"(?P<val>[A-Za-z0-9\-._~+/]{16,}=*)"
    r"|(?i:\bauthorization)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?(?i:basic|token)[ \t]+"
    r"(?P<val2>[A-Za-z0-9\-._~+/]{4,}=*)"
    r"|(?P<jwt>\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
)


def _bearer(m: re.Match[str]) -> _Edit | None:
    group = next(g for g in ("val", "val2", "jwt") if m[g] is not None)
    return m.start(group), m.end(group), MARKER


_BOOTSTRAP = re.compile(
    r"(?i:token|bootstrap)[^\n]*?(?<![a-z0-9.])[a-z0-9]{6}\.(?P<val>[a-z0-9]{16})(?![a-z0-9.])"
)

_BOOTSTRAP_SECRET = re.compile(r"(?<![a-z0-9.])([a-z0-9]{6}\.)[a-z0-9]{16}(?![a-z0-9.])")


def _bootstrap(m: re.Match[str]) -> _Edit | None:
    # every token after the keyword on this line goes at once, so a second pass finds none
    end = m.string.find("\n", m.start("val"))
    end = len(m.string) if end == -1 else end
    rest = _BOOTSTRAP_SECRET.sub(lambda t: t[1] + MARKER, m.string[m.start("val") - 7 : end])
    return m.start("val") - 7, end, rest


_URL_CRED = re.compile(
    r"://(?P<user>[^\s:/@\"'<>\\]*):(?P<val>[^\s/\"'<>\\]+)@(?=[\w\[])"
    r"|(?<=\s)(?:-u|--user)[ \t=]+[^\s:\"'-][^\s:\"']*:(?P<val2>[^\s\"']+)"
)


def _url_cred(m: re.Match[str]) -> _Edit | None:
    if m["val"] is not None:
        if MARKER in m["val"]:
            return None
        return m.start("val"), m.end("val"), MARKER
    line_start = m.string.rfind("\n", 0, m.start()) + 1
    # -u user:pass means credentials only for HTTP clients (docker -u means uid:gid)
    if not re.search(r"\b(?:curl|wget)\b", m.string[line_start : m.start()]):
        return None
    if MARKER in m["val2"]:
        return None
    return m.start("val2"), m.end("val2"), MARKER


_DOCKER_AUTH = re.compile(
    r"(?:\\?\"(?:auth|\.dockerconfigjson|identitytoken)\\?\"|\bauth)[ \t]*[:=][ \t]*"
    r"\\?\"(?P<val>[A-Za-z0-9+/=_.-]+)\\?\""
)


def _docker_auth(m: re.Match[str]) -> _Edit | None:
    return None if MARKER in m["val"] else (m.start("val"), m.end("val"), MARKER)


# --- secret-env ------------------------------------------------------------------------------

# where a secret-env match can start; "api" alone would stop at every kubelet `source="api"`
_KEYWORDS = ("pass", "pwd", "secret", "token", "api_key", "api-key", "apikey", "private", "cred")
_SECRET_ENV = re.compile(
    r"(?i:pass|pwd|secret|token|api[_-]?key|private[_-]?key|cred)(?P<rest>[\w.-]*)"
    r"(?P<q>\\?[\"']?)"
    r"(?P<sep>[ \t]*[=:][ \t]*|\s*,\s*\\?\"value\\?\"\s*:\s*|[ \t]*\r?\n[ \t]*value:[ \t]*|[ \t]+)"
    r"(?=(?P<val>\\\"(?:[^\"\\\n]|\\[^\"\n])*\\\"|\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|[^\s\"']+))"
)
_NOT_SECRET_NAME = re.compile(r"(?i).*(?:name|names|namespace|ref|file|path|dir|id|ids|type)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_NOT_SECRET_VALUE = frozenset({"true", "false", "null", "none", "nil", "yes", "no"})
_K8S_ENV_JSON = re.compile(r"\\?\"name\\?\"\s*:\s*$")
_K8S_ENV_YAML = re.compile(r"(?:^|\n)[ \t]*(?:-[ \t]+)?name:[ \t]*$")
_LINE_START = re.compile(r"[ \t]*(?:-[ \t]+|export[ \t]+)?")


def _name_start(text: str, end: int) -> int:
    i = end
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_.-"):
        i -= 1
    return i


def _secret_env(m: re.Match[str]) -> _Edit | None:
    text = m.string
    start = _name_start(text, m.start())
    name = text[start : m.end("rest")]
    if _NOT_SECRET_NAME.fullmatch(name):
        return None
    q, sep, val = m["q"], m["sep"], m["val"]
    before = text[max(0, start - 80) : start]
    if "value" in sep:  # Kubernetes env entry: name and value are separate fields
        pattern = _K8S_ENV_JSON if "\n" not in sep else _K8S_ENV_YAML
        if not pattern.search(before[: len(before) - len(q)] if q else before):
            return None
    elif q:  # quoted key: "name": "value" or 'name' = value
        if not before.endswith(q) or not sep.strip():
            return None
    elif sep.strip() == ":":  # YAML key at line start, or Go-struct Name:value
        line_start = text.rfind("\n", 0, start) + 1
        at_line_start = _LINE_START.fullmatch(text, line_start, start) is not None
        if not at_line_start and (sep != ":" or (before and before[-1] not in "{ ,(")):
            return None
    elif not sep.strip() and (not name.startswith("-") or val.startswith("-")):
        return None  # a bare "password value" is prose unless it is a --flag
    vs, ve = m.start("val"), m.end("val")
    for quote in ('\\"', '"', "'"):
        if val.startswith(quote) and val.endswith(quote) and len(val) >= 2 * len(quote):
            vs, ve = vs + len(quote), ve - len(quote)
            break
    else:
        while ve > vs and text[ve - 1] in ",;)}]":  # trailing punctuation belongs to the line
            ve -= 1
        if text[vs : vs + 1] in ("{", "[", "|", ">"):  # nested object or YAML block follows
            return None
        if _NUMBER.fullmatch(text, vs, ve):  # max_tokens=4096, "bearer-token": 2: counts
            return None
    inner = text[vs:ve]
    if not inner or MARKER in inner or inner.lower() in _NOT_SECRET_VALUE:
        return None
    return vs, ve, MARKER


_RULE_LIST: tuple[_Rule, ...] = (
    _Rule("pem-block", _PEM_BLOCK, _pem_block, (("-----begin ", 0),), whole_text=True),
    _Rule("pem-base64", _PEM_B64, _pem_base64, (("ls0tls1crudjti", 0),), whole_text=True),
    _Rule("aws-access-key-id", _AWS_KEY_ID, _aws_key_id, (("akia", 0), ("asia", 0))),
    # aws_secret_access_key starts 4 before "secret"
    _Rule("aws-secret-access-key", _AWS_SECRET, _val_group, (("secret", 4),)),
    # aws_session_token, aws_security_token, x-amz-security-token
    _Rule("aws-session-token", _AWS_SESSION, _val_group, (("session", 4), ("security", 6))),
    _Rule("bearer-token", _BEARER, _bearer, (("bearer", 0), ("auth", 0), ("eyj", 0))),
    _Rule("bootstrap-token", _BOOTSTRAP, _bootstrap, (("token", 0), ("bootstrap", 0))),
    # --user holds -u one character in
    _Rule("url-credentials", _URL_CRED, _url_cred, (("://", 0), ("-u", 1))),
    # a quote (maybe escaped) comes first: \"auth\", ".dockerconfigjson", "identitytoken"
    _Rule(
        "docker-auth",
        _DOCKER_AUTH,
        _docker_auth,
        (("auth", 2), ("dockerconfigjson", 3), ("token", 10)),
    ),
    _Rule("secret-env", _SECRET_ENV, _secret_env, tuple((k, 0) for k in _KEYWORDS)),
)

# --- network obfuscation ---------------------------------------------------------------------

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_NET = re.compile(
    r"(?<![\w.-])(?P<host>(?:ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}|i-[0-9a-f]{8,17}(?=\.))"
    r"(?P<domain>\.[a-z]{2}(?:-[a-z]+)+-\d\.compute\.internal|\.ec2\.internal)?)(?![\w-])"
    r"|(?<![\w:.-])(?P<mac>[0-9A-Fa-f]{2}(?P<ms>[:-])(?:[0-9A-Fa-f]{2}(?P=ms)){4}[0-9A-Fa-f]{2})"
    r"(?![\w:.-])"
    rf"|(?<![\w.])(?P<ip4>{_OCTET}(?:\.{_OCTET}){{3}})(?![\w]|\.\d)"
    r"|(?<![\w:.])(?P<ip6>(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4})(?![\w:]|\.\d)"
)
_KEEP_IP4 = frozenset({"0.0.0.0", "255.255.255.255", "169.254.169.254"})
_KEEP_MAC = frozenset({"00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"})
NETWORK_RULES = ("net-hostname", "net-mac", "net-ipv4", "net-ipv6")

RULES: tuple[str, ...] = tuple(rule.name for rule in _RULE_LIST)


class Redactor:
    """Redacts the files of one bundle and remembers what it masked, per file and rule."""

    RULES: tuple[str, ...] = RULES

    def __init__(self, *, enabled: bool = True, obfuscate_network: bool = False) -> None:
        self.enabled = enabled
        self.obfuscate_network = obfuscate_network
        self._report: dict[str, dict[str, int]] = {}
        self._map: dict[str, str] = {}
        self._issued: set[str] = set()
        self._hosts: dict[str, str] = {}  # host label (ip-10-0-1-2) → host-0001
        self._counters = {"ip4": 0, "ip6": 0, "mac": 0, "host": 0}

    def redact(self, name: str, data: bytes) -> bytes:
        """Return ``data`` with secrets masked; binary and compressed data pass unchanged."""
        if not self.enabled:
            return data
        clean, counts = mask_secrets(name, data)
        self.record(name, counts)
        if not self.obfuscate_network or SKIPPED_BINARY in counts:
            return clean
        text = self._obfuscate(name, clean.decode("utf-8", "surrogateescape"))
        return text.encode("utf-8", "surrogateescape")

    @property
    def stateless(self) -> bool:
        """Whether `mask_secrets` is all `redact` does, so files may be masked elsewhere (in
        worker processes) and their counts `record`ed; network obfuscation keeps one map."""
        return self.enabled and not self.obfuscate_network

    def record(self, name: str, counts: dict[str, int]) -> None:
        """Count what `mask_secrets` did to `name`."""
        for rule, n in counts.items():
            self._count(name, rule, n)

    def report(self) -> dict[str, dict[str, int]]:
        """File → rule → count, only non-zero counts (rules in RULES, NETWORK_RULES, skips)."""
        return {f: dict(rules) for f, rules in self._report.items() if rules}

    def mapping(self) -> dict[str, str]:
        """Original → stand-in for every obfuscated address/name (keep it out of the bundle)."""
        return dict(self._map)

    def _count(self, name: str, rule: str, n: int) -> None:
        if n:
            per_file = self._report.setdefault(name, {})
            per_file[rule] = per_file.get(rule, 0) + n

    def _obfuscate(self, name: str, text: str) -> str:
        counts: dict[str, int] = {}

        def edit(m: re.Match[str]) -> _Edit | None:
            kind = next((k for k in ("host", "mac", "ip4", "ip6") if m[k] is not None), None)
            if kind is None:
                return None
            value = m[kind]
            new = self._stand_in(kind, value, m)
            if new is None or new == value:
                return None
            rule = {"host": "net-hostname", "mac": "net-mac", "ip4": "net-ipv4"}.get(
                kind, "net-ipv6"
            )
            counts[rule] = counts.get(rule, 0) + 1
            return m.start(kind), m.end(kind), new

        text, _ = _apply(text, _NET.finditer(text), edit)
        for rule, n in counts.items():
            self._count(name, rule, n)
        return text

    def _stand_in(self, kind: str, value: str, m: re.Match[str]) -> str | None:
        if value in self._issued:
            return None
        if value in self._map:
            return self._map[value]
        if kind == "ip4":
            if value in _KEEP_IP4 or value.startswith("127.") or value.startswith("255."):
                return None
            new = self._next("ip4", lambda n: f"10.{255 - (n >> 16)}.{(n >> 8) & 255}.{n & 255}")
        elif kind == "ip6":
            try:
                addr = ipaddress.IPv6Address(value)
            except ValueError:
                return None
            if addr.is_loopback or addr.is_unspecified:
                return None
            new = self._next("ip6", lambda n: f"fd00::{n:x}")
        elif kind == "mac":
            if value.lower().replace("-", ":") in _KEEP_MAC:
                return None
            sep = m["ms"]
            new = self._next(
                "mac",
                lambda n: (
                    sep.join(["02", "00", "00", f"{n >> 16 & 255:02x}"])
                    + sep
                    + sep.join([f"{n >> 8 & 255:02x}", f"{n & 255:02x}"])
                ),
            )
        else:
            label = value.split(".", 1)[0]
            if label not in self._hosts:
                self._hosts[label] = self._next("host", lambda n: f"host-{n:04d}")
            new = self._hosts[label] + (".example.internal" if m["domain"] else "")
            self._issued.add(new)
        self._map[value] = new
        return new

    def _next(self, kind: str, fmt: Callable[[int], str]) -> str:
        while True:
            self._counters[kind] += 1
            candidate = fmt(self._counters[kind])
            if candidate not in self._map:  # never hand out an address seen as a real one
                self._issued.add(candidate)
                return candidate


def mask_secrets(name: str, data: bytes) -> tuple[bytes, dict[str, int]]:
    """``data`` with every secret rule applied, and the count per rule. Pure, so a worker
    process can run it; binary and compressed data pass unchanged (counted as skipped)."""
    if _is_binary(name, data):
        return data, {SKIPPED_BINARY: 1}
    lines = trigger_lines(data)
    if lines == []:  # grep saw no trigger anywhere: nothing can match
        return data, {}
    counts: dict[str, int] = {}
    text = data.decode("utf-8", "surrogateescape")
    scan = _Scan(text, lines)
    for rule in _RULE_LIST:
        text, n = _apply_rule(scan, rule)
        if n:
            counts[rule.name] = n
            scan = _Scan(text)  # an edit moves positions
    return (text.encode("utf-8", "surrogateescape") if counts else data), counts


# --- finding triggers ------------------------------------------------------------------------
#
# Python's str.find runs at ~2 GB/s per trigger, and there are ~20 triggers: ~85 MB/s for a
# text, most of a collection's CPU. grep -F finds all of them in one pass (Aho-Corasick) at
# ~500 MB/s, so for large ASCII texts grep names the lines holding any trigger and the finds
# run on those lines only. Exactly the same positions: every trigger lies within one line (no
# trigger holds a newline), and for ASCII text `grep -i` under LC_ALL=C and str.lower() agree.
# A grep that fails its self-test on first use (an odd implementation) is never used again.

TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(t for r in _RULE_LIST for t, _ in r.triggers))
GREP_MIN_BYTES = 1 << 20  # below this, starting grep costs more than the finds it saves
_grep: list[str | None] = []  # [path] once checked; [None] when unusable


def trigger_lines(data: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each line of ``data`` holding a trigger, found by grep; None when grep
    is not worth it or not usable (the caller then searches the whole text)."""
    if len(data) < GREP_MIN_BYTES or not data.isascii():
        return None
    grep = _usable_grep()
    return None if grep is None else _grep_lines(grep, data)


def _grep_lines(grep: str, data: bytes) -> list[tuple[int, int]] | None:
    argv = [grep, "-a", "-b", "-F", "-i"]
    for trigger in TRIGGERS:
        argv += ["-e", trigger]
    try:
        done = subprocess.run(
            argv,
            input=data,
            capture_output=True,
            env={"LC_ALL": "C", "PATH": os.environ.get("PATH", "")},
            check=False,
        )
    except OSError:
        return None
    if done.returncode == 1:
        return []
    if done.returncode != 0:
        return None
    lines: list[tuple[int, int]] = []
    for row in done.stdout.split(b"\n"):
        colon = row.find(b":")
        if colon > 0:
            start = int(row[:colon])
            lines.append((start, start + len(row) - colon - 1))
    return lines


def _usable_grep() -> str | None:
    if not _grep:
        found = shutil.which("grep")
        ok = found is not None and _grep_lines(found, _GREP_PROBE) == _GREP_PROBE_LINES
        _grep.append(found if ok else None)
    return _grep[0]


_GREP_PROBE = b"no trigger here\nx-AMZ-Security-TOKEN: 1\n\n--USER a:b -----BEGIN CERT\nplain\n"
_GREP_PROBE_LINES = [(16, 39), (41, 67)]


class _Scan:
    """One text version, lower-cased once, with each trigger's positions found once; with
    `lines` (from grep), only those spans are lower-cased and searched."""

    def __init__(self, text: str, lines: list[tuple[int, int]] | None = None) -> None:
        self.text = text
        if lines is None and text.isascii():
            lines = trigger_lines(text.encode("ascii"))
        if lines is None:
            lowered = text.lower()
            if len(lowered) != len(text):  # some characters change length when lowered
                lowered = text.translate(_ASCII_LOWER)
            self._pieces = [(0, lowered)]
        else:
            self._pieces = [(start, text[start:end].lower()) for start, end in lines]
        self._found: dict[str, list[int]] = {}

    def positions(self, trigger: str) -> list[int]:
        found = self._found.get(trigger)
        if found is None:
            found = []
            for offset, piece in self._pieces:
                at = piece.find(trigger)
                while at != -1:
                    found.append(offset + at)
                    at = piece.find(trigger, at + 1)
            self._found[trigger] = found
        return found


def _apply_rule(scan: _Scan, rule: _Rule) -> tuple[str, int]:
    """Try one rule only where its triggers occur, so unrelated text costs one find per trigger."""
    text = scan.text
    if rule.whole_text:
        if not any(scan.positions(t) for t, _ in rule.triggers):
            return text, 0
        return _apply(text, rule.regex.finditer(text), rule.edit)
    starts: set[int] = set()
    for trigger, back in rule.triggers:
        for at in scan.positions(trigger):
            starts.update(range(max(0, at - back), at + 1))
    if not starts:
        return text, 0
    matches = (rule.regex.match(text, p) for p in sorted(starts))
    return _apply(text, (m for m in matches if m is not None), rule.edit)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _apply(
    text: str, matches: Iterable[re.Match[str]], edit: Callable[[re.Match[str]], _Edit | None]
) -> tuple[str, int]:
    """Apply each accepted, non-overlapping edit in order; return the new text and the count."""
    parts: list[str] = []
    pos = 0
    count = 0
    for m in matches:
        change = edit(m)
        if change is None or change[0] < pos:
            continue
        start, end, new = change
        parts.append(text[pos:start])
        parts.append(new)
        pos = end
        count += 1
    if not count:
        return text, 0
    parts.append(text[pos:])
    return "".join(parts), count


_BINARY_SUFFIXES = (".gz", ".tgz", ".tar", ".zst", ".xz", ".bz2", ".zip", ".bin")
_MAGIC = (b"\x1f\x8b", b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\x00", b"PK\x03\x04")


def _is_binary(name: str, data: bytes) -> bool:
    return (
        b"\x00" in data[:8192] or name.lower().endswith(_BINARY_SUFFIXES) or data.startswith(_MAGIC)
    )
