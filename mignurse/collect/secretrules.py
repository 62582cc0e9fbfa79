"""The text rules that find secrets, by the kind of credential or file they come from: PEM
blocks, AWS keys and signatures, bearer and vendor tokens, provider tokens by their documented
prefixes, connection strings, passwords on command lines, cookies, registry and chpasswd
passwords, .netrc, Kubernetes Secret objects written as JSON or YAML, values whose object says
they are secret (SSM SecureString), and secret-named environment variables and flags. Formats
come from gitleaks (gitleaks/gitleaks@v8.30.0 config/gitleaks.toml), trufflehog's detectors
(trufflesecurity/trufflehog@v3.90.0 pkg/detectors) and the providers' documentation, named
beside each rule. Each rule is a compiled regex, the literal triggers where a match may
start, and a function that turns one match into one edit (span and replacement) or declines
it; `redact` walks a text with them.

Decisions:
- PEM: blocks whose label is on a public allow-list (CERTIFICATE, PUBLIC KEY, CRL, CSR, PGP
  public key/signature, parameters) are kept, since certificates are public and help debugging;
  every other block (every ``PRIVATE KEY`` and ``ENCRYPTED`` one, and unknown labels) is masked.
  The same decision applies to base64-wrapped PEM (``LS0tLS1CRUdJTi…``) as found in kubeconfigs.
  A private key whose END line is missing (truncated log) has its whole base64 lines masked,
  and the first line that is not base64 (the next log line) is kept.
- Token formats keep their public prefix (``AKIA``, ``ghp_``, ``hf_``, ``sk-proj-``, ``hvs.``,
  ``AIza``, ``xoxb-``): it says what kind of credential was there.
- Values already containing ``***REDACTED***`` are left alone and not counted, which makes
  ``redact(redact(x)) == redact(x)``.
- ``secret-env`` keeps booleans/null, absolute paths and names ending in
  name/ref/file/path/dir/id/type/config/hash/… (``secretName``, ``tokenFile``,
  ``--image-credential-provider-config``): they are not secrets and are often the diagnosis.
- ``secret-env`` keeps unquoted numbers (``max_tokens=4096``, ``"prompt_tokens": 512``, the
  manifest's own ``"bearer-token": 2``): inference logs are full of token counts, and a number
  written without quotes is a count far more often than a password. A quoted one is masked.
- AWS account ids, ARNs, instance ids, GPU/MIG UUIDs and image digests are not masked: they
  are not credentials and are needed for the diagnosis.
- A provider prefix counts only at the start of a word that is not inside base64 or a dashed
  name, and its token must end there; prefixes that are common words (Okta's ``00``, Vault's
  legacy ``s.``) count only on lines that name the provider.
- A connection string's password ends at ``;`` or ``&``: the settings after it are evidence.
  A cookie's attributes (Path, Expires, SameSite…) stay; every cookie value goes.
- A command's password flag is masked only for the commands that take one there (``-p`` is a
  password to mysql and sshpass, a port or a profile elsewhere).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mignurse.collect.secretnames import MARKER, is_secret_name

Edit = tuple[int, int, str]

AT, LINE, TEXT = "at", "line", "text"  # where a rule's regex is tried: see redact._edits


@dataclass(frozen=True)
class Rule:
    """One text rule: its name in the redaction report, its regex, what a match becomes, and
    where it is tried."""

    name: str
    regex: re.Pattern[str]
    edit: Callable[[re.Match[str]], Edit | None]
    # (lower-case substring, how many characters before it a match may start): every match
    # starts within that reach of one of them. Rules share substrings (token, secret, auth),
    # and each is searched once per text, so fewer and shared substrings mean fewer passes.
    triggers: tuple[tuple[str, int], ...]
    # AT: a match starts at a trigger; LINE: searched once in each line holding a trigger;
    # TEXT: searched through the whole text once (literal-prefixed rules)
    scope: str = AT
    # edits found over the whole text by a function rather than match by match: what a single
    # regex cannot pair (a PEM block's BEGIN and END, a Secret's kind: and its data:); given
    # the text and a check that raises once the file's time is up
    paired: Callable[[str, Callable[[], None]], Iterator[Edit]] | None = None


_VAL_GROUPS = ("val", "val2", "val3", "val4", "val5", "val6")


def _val_group(m: re.Match[str]) -> Edit | None:
    for group in _VAL_GROUPS:
        if group in m.re.groupindex and m[group] is not None:
            if not m[group] or MARKER in m[group]:
                return None
            return m.start(group), m.end(group), MARKER
    return None


# --- log records ---------------------------------------------------------------------------

# the prefix a log writer puts before each record's message (formats named in `encodings`)
LOG_TIME = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
_SYSLOG_TIME = r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{1,6})?"
LOG_PREFIX = re.compile(
    r"[ \t]{0,16}(?:"
    # CRI: time, stream, tag
    rf"{LOG_TIME} (?:stdout|stderr) [FP] "
    # klog: severity, mmdd, time, thread id, file:line]
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}[ \t]{1,16}\d{1,10} [^\s\]]{1,256}:\d{1,10}\] "
    # journalctl short / short-precise / short-iso: time, host, identifier[pid]:
    rf"|(?:{_SYSLOG_TIME}|{LOG_TIME}) [^\s]{{1,256}} [^\s\[]{{1,256}}?(?:\[\d{{1,10}}\])?: "
    # journalctl -o short-monotonic and dmesg: [seconds since boot], then host and identifier
    r"|\[[ \t]{0,16}\d{1,10}\.\d{6}\](?: [^\s]{1,256} [^\s\[]{1,256}?(?:\[\d{1,10}\])?:)? "
    # syslog RFC 5424: <PRI>VERSION TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA
    rf"|<\d{{1,3}}>\d{{1,2}} (?:{LOG_TIME}|-) [^\s]{{1,255}} [^\s]{{1,48}} [^\s]{{1,128}}"
    r" [^\s]{1,32} (?:-|\[[^\n\]]{0,1024}\]) "
    # syslog RFC 3164 with its <PRI>
    rf"|<\d{{1,3}}>{_SYSLOG_TIME} [^\s]{{1,256}} [^\s\[]{{1,256}}?(?:\[\d{{1,10}}\])?: "
    # journalctl -o export and -o verbose: the message field
    r"|MESSAGE="
    # a bare timestamp and level (Go and Python loggers)
    rf"|{LOG_TIME}[ \t]{{1,16}}"
    r"(?:\[?(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\]?[ \t]{1,16})?"
    r")"
)


# --- PEM -------------------------------------------------------------------------------------

# cloud-init prints every instance's public SSH host keys and their fingerprints to the
# console between BEGIN/END SSH HOST KEY KEYS and … FINGERPRINTS lines (canonical/cloud-init@24.4
# tools/write-ssh-key-fingerprints): public, and in every cloud-init-output.log
_PUBLIC_PEM = re.compile(
    r"(?:X509 |TRUSTED |NEW )?CERTIFICATE(?: REQUEST)?|X509 CRL|(?:RSA |SSH2 )?PUBLIC KEY"
    r"|PGP PUBLIC KEY BLOCK|PGP SIGNATURE|(?:DH|EC|DSA) PARAMETERS"
    r"|SSH HOST KEY (?:KEYS|FINGERPRINTS)"
)
_NL = r"(?:\r?\n|\\r\\n|\\n)"  # real newline, or the two characters \n inside JSON strings
_PEM_MARKER = re.compile(r"-----(BEGIN|END) ([A-Z0-9 ]{1,64})-----")
# the base64 (and RFC 1421 header) lines after a BEGIN whose END is missing: whole lines only
_PEM_TAIL = re.compile(
    rf"(?:(?:{_NL})?[ \t]{{0,16}}(?:Proc-Type:[^\n\\]{{0,256}}|DEK-Info:[^\n\\]{{0,256}}"
    rf"|[A-Za-z0-9+/=]{{1,8192}})[ \t]{{0,16}}(?={_NL}|[\"',}}\]]|\Z))+"
)
PEM_MAX_BODY = 64 * 1024  # a 16384-bit RSA key is ~12 KiB; farther apart they are unrelated


def _pem_edits(text: str, check: Callable[[], None]) -> Iterator[Edit]:
    """Pair each BEGIN with the marker after it, once: linear however many BEGINs lack an END."""
    markers = list(_PEM_MARKER.finditer(text))
    pos = 0
    i = 0
    while i < len(markers):
        begin = markers[i]
        i += 1
        if i % 1024 == 0:
            check()
        if begin[1] != "BEGIN" or begin.start() < pos:
            continue
        label = begin[2]
        after = markers[i] if i < len(markers) else None
        paired = (
            after is not None
            and after[1] == "END"
            and after[2] == label
            and after.start() - begin.end() <= PEM_MAX_BODY
        )
        if _PUBLIC_PEM.fullmatch(label):
            i += paired
            continue
        if paired and after is not None:
            i += 1
            body = text[begin.end() : after.start()]
            if body.replace("\\n", "").strip() in ("", MARKER):
                continue
            if _pem_lines_only(body):
                nl = "\\n" if "\\n" in body and "\n" not in body else "\n"
                new = f"-----BEGIN {label}-----{nl}{MARKER}{nl}-----END {label}-----"
                yield begin.start(), after.end(), new
            else:  # other log records in between: each one's part, their prefixes kept
                yield from _pem_record_parts(text, begin.end(), after.start())
            pos = after.end()
            continue
        tail = _PEM_TAIL.match(text, begin.end())
        if tail is None or not tail[0].strip() or tail[0].strip(" \t\r\n\\n") == MARKER:
            continue
        nl = "\\n" if tail[0].lstrip(" \t").startswith("\\n") else "\n"
        yield begin.start(), tail.end(), f"-----BEGIN {label}-----{nl}{MARKER}"
        pos = tail.end()


# a PEM body's own lines: base64, RFC 1421 headers, OpenPGP armor headers (RFC 9580 6.2)
_PEM_LINE = re.compile(
    r"[A-Za-z0-9+/=]{1,8192}"
    r"|(?:Proc-Type|DEK-Info|Version|Comment|Hash|Charset|MessageID):[^\n\\]{0,256}"
)
# a line break, real or escaped in a JSON string (once, or more when JSON holds JSON)
_PEM_BREAK = re.compile(r"(?:[\r\n]|\\{1,8}[rn])+")
_BLANK = re.compile(r"(?:[ \t\r\n]|\\{1,8}[nrt])*")
# where a JSON log record's message starts: journalctl -o json, the json-file driver, slog
_RECORD_MESSAGE = re.compile(
    r'\{[^\n]{0,4096}?"(?:MESSAGE|message|msg|log)"[ \t]{0,16}:[ \t]{0,16}"'
)


def _pem_lines_only(body: str) -> bool:
    """Whether a PEM body holds only its own lines (base64, RFC 1421 headers, blank)."""
    for line in _PEM_BREAK.split(body):
        line = line.strip()
        if line and _PEM_LINE.fullmatch(line) is None:
            return False
    return True


def _pem_record_parts(text: str, start: int, end: int) -> Iterator[Edit]:
    """A private key's lines between its BEGIN and END when other records lie between them
    (each line its own journal or JSON record, an unrelated line logged in the middle): on
    each line, the message (after the log prefix, or a JSON record's message string) masked
    where it is a PEM line, everything else kept."""
    at = start
    while at < end:
        line_end = text.find("\n", at, end)
        line_end = end if line_end == -1 else line_end
        message = at
        record = None
        if at > start:  # the BEGIN line's message started at its marker
            for _ in range(3):
                prefix = LOG_PREFIX.match(text, message, line_end)
                if prefix is None or prefix.end() == message:
                    break
                message = prefix.end()
            record = _RECORD_MESSAGE.match(text, message, line_end)
            if record is not None:
                message = record.end()
        stop = line_end
        record_start = text.rfind("\n", 0, at) + 1 if at == start else message
        if text.startswith("{", at) or record is not None or text.startswith("{", record_start):
            quote = message
            while True:  # the message string ends at its first quote not escaped
                quote = text.find('"', quote, line_end)
                if quote == -1 or text[quote - 1] != "\\":
                    break
                quote += 1
            stop = line_end if quote == -1 else quote
        blank = _BLANK.match(text, message, stop)
        s = blank.end() if blank is not None else message
        e = stop
        while e > s and (text[e - 1] in " \t\r\\" or text.endswith(("\\n", "\\r"), s, e)):
            e -= 2 if text[e - 1] in "nr" and text[e - 2] == "\\" else 1
        if e > s and _pem_lines_only(text[s:e]) and MARKER not in text[s:e]:
            yield s, e, MARKER
        at = line_end + 1


_PEM_B64 = re.compile(r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*={0,2}")
_PEM_LABEL = re.compile(r"-----BEGIN ([A-Z0-9 ]{1,64})-----")


def _pem_base64(m: re.Match[str]) -> Edit | None:
    head = m[0][:96]
    try:
        decoded = base64.b64decode(head[: len(head) // 4 * 4]).decode("ascii", "replace")
    except (binascii.Error, ValueError):
        decoded = ""
    label = _PEM_LABEL.match(decoded)
    # no whole BEGIN line decoded (a run cut before its label ends, as CRI partial lines cut
    # it): what the block is cannot be told, and the joined view decodes the run whole
    if label is None or _PUBLIC_PEM.fullmatch(label[1]):
        return None
    return m.start(), m.end(), MARKER


# --- AWS (docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-authentication-methods.html,
# docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html, …/sigv4-HTTPPOSTForms.html)

_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")


def _keep_prefix(length: int) -> Callable[[re.Match[str]], Edit | None]:
    def edit(m: re.Match[str]) -> Edit | None:
        return m.start() + length, m.end(), MARKER

    return edit


_KV_SEP = r"(?:\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\\?[\"']?|[ \t]{1,16})"
_AWS_SECRET = re.compile(
    rf"(?i:aws_secret_access_key|secret_?access_?key){_KV_SEP}"
    r"(?P<val>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_SESSION = re.compile(
    rf"(?i:aws_session_token|aws_security_token|session_?token|x-amz-security-token){_KV_SEP}"
    r"(?P<val>[A-Za-z0-9/+=%]{16,8192})"
)
# presigned URLs and POST policy form fields: the signature and the credential scope
_AMZ_SIGNED = re.compile(
    r"(?i:x-amz-(?:signature|credential))(?:=|\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\\?[\"']?)"
    r"(?P<val>[^&\s\"'\\<>]{1,2048})"
    r"|(?i:\bsignature=)(?P<val2>[0-9a-f]{64})\b"
)


# --- tokens ----------------------------------------------------------------------------------

# Authorization schemes: Bearer (RFC 6750), Basic (RFC 7617), Token (PagerDuty's
# `Token token=…`, developer.pagerduty.com/docs/authentication), Bot (discord.com/developers/
# docs/reference#authentication), SSWS (developer.okta.com/docs/guides/create-an-api-token/),
# Negotiate/NTLM (RFC 4559), Firebase's legacy `key=` (firebase.google.com/docs/cloud-messaging/
# auth-server), and Digest's `response=` (RFC 7616 section 3.4)
_BEARER = re.compile(
    r"(?i:\bbearer)(?:[ \t]{1,16}|\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\\?[\"']?)"
    r"(?P<val>[A-Za-z0-9\-._~+/]{16,8192}=*)"
    # a header set in a config file: nginx's proxy_set_header Authorization "Basic …"
    # (nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_set_header)
    r"|(?i:\bauthorization)(?:\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\\?[\"']?|[ \t]{1,16}\\?[\"'])"
    r"(?:(?i:basic|token|bot|ssws|negotiate|ntlm|api-?key|splunk|geniekey)[ \t]{1,16}"
    r"|(?i:key)=)"
    # `token=` is consumed whenever present, so a masked value is never matched again
    r"(?:(?i:token=)\\?\"?|(?!(?i:token=)))"
    r"(?P<val2>[A-Za-z0-9\-._~+/%:]{4,8192}=*)"
    # S3's SigV2 header: AWS <key id>:<signature> (docs.aws.amazon.com/AmazonS3/latest/API/
    # RESTAuthentication.html); the key id stays for the aws-access-key-id rule
    r"|(?i:\bauthorization)\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\\?[\"']?AWS[ \t]{1,16}"
    r"[A-Z0-9]{16,128}:(?P<val6>[A-Za-z0-9+/]{20,128}=*)"
    r"|(?P<val3>\beyJ[A-Za-z0-9_-]{8,8192}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,8192})"
    r"|(?i:\bdigest)[ \t][^\n]{0,1024}?\bresponse=\\?\"(?P<val4>[0-9A-Fa-f]{32,128})"
    r"|(?i:\bssws)[ \t]{1,16}(?P<val5>[A-Za-z0-9_-]{20,256})"
)

# kubeadm bootstrap tokens: [a-z0-9]{6}.[a-z0-9]{16}, the id kept (kubernetes.io/docs/reference/
# access-authn-authz/bootstrap-tokens/); searched on lines that say token or bootstrap
_BOOTSTRAP = re.compile(r"(?<![A-Za-z0-9._-])[a-z0-9]{6}\.(?P<val>[a-z0-9]{16})(?![A-Za-z0-9._-])")

_URL_CRED = re.compile(
    r"://(?P<user>[^\s:/@\"'<>\\]{0,256}):(?P<val>[^\s/\"'<>\\]{1,1024})@(?=[\w\[])"
    r"|://(?P<val2>[A-Za-z0-9_.~-]{20,512})@(?=[\w\[])"
    r"|(?<=\s)(?:-u|--user)[ \t=]{1,16}[^\s:\"'-][^\s:\"']{0,256}:(?P<val3>[^\s\"']{1,1024})"
)


# Where a url-credentials trigger can start a match, of the rule or in a view of its line
# (`redact.TRIGGER_SHAPES`): `://` with an `@` after it before the next space, slash, quote or
# angle bracket (a backslash is let through: a JSON view reads `\@` as `@`), and `-u` or
# `--user` with a space, tab or `=` after it. A probe's `Get "http://10.0.1.2:8000/health"`
# and a pod named `…-7d9f8b6c5d-ux2kq` are neither, and are the most common lines in a
# kubelet's journal that hold a trigger word. `-user` counts wherever it is (`--user`, and a
# name such as `ec2-user`, whose line's views are read as well); a chpasswd list logged one
# journal JSON record a line no longer depends on that: the opener in its first record
# carries the list's context over the records after it (`encodings._with_context`).
URL_CREDENTIAL_SHAPES: dict[str, re.Pattern[str]] = {
    "://": re.compile(r"://[^\t\n\x0b\x0c\r \"'/<>]{0,8192}@"),
    "-u": re.compile(r"-u(?:ser|[ \t=])"),
}


def _url_cred(m: re.Match[str]) -> Edit | None:
    if m["val3"] is not None:
        window = m.string[max(0, m.start() - 512) : m.start()]
        # -u user:pass means credentials only for HTTP clients (docker -u means uid:gid)
        if not _HTTP_CLIENT.search(window, window.rfind("\n") + 1):
            return None
    return _val_group(m)


_HTTP_CLIENT = re.compile(r"\b(?:curl|wget)\b")


_DOCKER_AUTH = re.compile(
    r"(?:\\?\"(?:auth|\.dockerconfigjson|\.dockercfg|identitytoken)\\?\"|\bauth)[ \t]{0,16}[:=]"
    r"[ \t]{0,16}\\?\"(?P<val>[A-Za-z0-9+/=_.-]{1,65536})\\?\""
    r"|(?<![\w.])\.docker(?:configjson|cfg)[ \t]{0,16}:[ \t]{0,16}[\"']?"
    r"(?P<val2>[A-Za-z0-9+/=]{8,65536})"
)


def _docker_auth(m: re.Match[str]) -> Edit | None:
    # kubelet logs every flag at start: FLAG: --anonymous-auth="false" is a setting
    value = m["val"] if m["val"] is not None else m["val2"]
    if value is not None and value.lower() in _NOT_SECRET_VALUE:
        return None
    return _val_group(m)


# GitHub: ghp_ (personal), gho_ (OAuth), ghu_ (user-to-server), ghs_ (server-to-server), ghr_
# (refresh), up to 255 characters; github_pat_ (fine-grained)
# (github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available)
_GITHUB = re.compile(r"\b(?P<p>gh[pousr]_|github_pat_)[A-Za-z0-9_]{22,251}\b")
# Slack: xoxb- (bot), xoxp- (user), xoxa-/xoxr-/xoxe- (app, refresh), xapp- (app-level)
# (docs.slack.dev/authentication/tokens); incoming webhooks hooks.slack.com/services/T…/B…/…
# (api.slack.com/messaging/webhooks): the path is the credential
_SLACK = re.compile(
    r"\b(?P<p>xox[abposre]-|xapp-)[A-Za-z0-9-]{10,256}"
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/(?P<val>[A-Za-z0-9/_-]{8,256})"
)
# Hugging Face user access tokens hf_… (huggingface.co/docs/hub/security-tokens)
_HUGGING_FACE = re.compile(r"\b(?P<p>hf_)[A-Za-z0-9]{30,64}\b")
# OpenAI keys: project sk-proj-, service account sk-svcacct-, admin sk-admin-, legacy sk-
# (platform.openai.com/docs/api-reference/authentication); a capital and a digit in the rest
# tell a key from a lower-case Kubernetes name such as sk-prod-cluster
_SK_KEY = re.compile(
    r"\b(?P<p>sk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-|admin\d\d-)?)?)"
    r"(?=[A-Za-z0-9_-]{0,255}[A-Z])(?=[A-Za-z0-9_-]{0,255}\d)(?P<rest>[A-Za-z0-9_-]{20,256})"
)
# HashiCorp Vault tokens since 1.10: hvs. (service), hvb. (batch), hvr. (recovery)
# (developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes)
_VAULT = re.compile(r"\b(?P<p>hv[sbr]\.)[A-Za-z0-9_-]{20,512}")
# Google API keys: AIza and 35 more characters (cloud.google.com/docs/authentication/api-keys)
_GOOGLE = re.compile(r"\b(?P<p>AIza)[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")
# NVIDIA API keys (build.nvidia.com, NGC personal keys): nvapi-…
# (docs.nvidia.com/nemo/retriever/latest/extraction/api-keys/)
_NVAPI = re.compile(r"\b(?P<p>nvapi-)[A-Za-z0-9_-]{20,256}")


def _token_prefix_kept(m: re.Match[str]) -> Edit | None:
    if "val" in m.re.groupindex and m["val"] is not None:
        return _val_group(m)
    return m.end("p"), m.end(), MARKER


# docker/podman/nerdctl/helm/oras … login -p X | --password X (docs.docker.com/reference/cli/
# docker/login/: "Using --password via the CLI is insecure"); found on lines saying login
_LOGIN_PASSWORD = re.compile(
    r"\blogin\b[^\n]{0,512}?[ \t](?:-p|--password)(?:[ \t]{1,16}|=)"
    r"(?:\"(?P<val>[^\"\n]{1,512})\"|'(?P<val2>[^'\n]{1,512})'|(?P<val3>[^\s\"';|&]{1,512}))"
)

# cloud-init: `echo 'root:pw' | chpasswd` on a shell line, the chpasswd `list` (a block of
# user:password lines, or - user:password items), and the console's "Set the following
# 'random' passwords" (canonical/cloud-init@24.4 cloudinit/config/cc_set_passwords.py,
# cloudinit/config/schemas/schema-cloud-config-v1.json cc_set_passwords)
_CHPASSWD_PAIR = re.compile(
    r"(?:(?<=\\n)|(?<![\w./:-]))(?P<user>[A-Za-z_][A-Za-z0-9_.-]{0,31}):"
    # `]` ends klog's header (`server.go:123]`), never a password on its own
    r"(?P<val>[^\s'\"|:;&<>/$\\\]][^\s'\"|:;&<>\\\]]{0,255})(?![\w:\]])"
)
_CHPASSWD_BLOCK = re.compile(
    r"(?:chpasswd:[ \t]{0,16}(?:\r?\n[ \t]{1,64}(?:expire:[^\n]{0,64}|users:[^\n]{0,64}))?"
    r"\r?\n[ \t]{1,64}list:[ \t]{0,16}(?:[|>][-+]?[ \t]{0,16})?"
    r"|Set the following 'random' passwords[ \t]{0,16})"
    r"(?P<body>(?:(?:\r?\n){1,2}[ \t]{0,64}(?:-[ \t]{1,16})?[\"']?[A-Za-z_][A-Za-z0-9_.-]{0,31}:"
    r"[^\s\"']{1,256}[\"']?[ \t]{0,16}){1,256})"
)
_NOT_A_PASSWORD = frozenset({"R", "RANDOM"})  # cloud-init makes one up


def _chpasswd_line(m: re.Match[str]) -> Edit | None:
    if m["val"] in _NOT_A_PASSWORD or MARKER in m["val"]:
        return None
    return m.start("val"), m.end("val"), MARKER


def _chpasswd_block(m: re.Match[str]) -> Edit | None:
    body = m["body"]
    masked = _CHPASSWD_ITEM.sub(
        lambda item: (
            item[0]
            if item["val"] in _NOT_A_PASSWORD or MARKER in item["val"]
            else item["head"] + MARKER
        ),
        body,
    )
    return None if masked == body else (m.start("body"), m.end("body"), masked)


_CHPASSWD_ITEM = re.compile(
    r"(?P<head>\n[ \t]{0,64}(?:-[ \t]{1,16})?[\"']?[A-Za-z_][A-Za-z0-9_.-]{0,31}:)"
    r"(?P<val>[^\s\"']{1,256})"
)


# ~/.netrc: machine HOST login USER password PASSWORD, on one line or several
# (www.gnu.org/software/inetutils/manual/html_node/The-_002enetrc-file.html)
_NETRC = re.compile(r"(?<!\S)password[ \t]{1,16}(?P<val>[^\s\"'\\]{1,512})")

# --- Kubernetes Secret objects written as text ----------------------------------------------
# A Secret's data and stringData values are secret whatever their keys are called
# (kubernetes.io/docs/concepts/configuration/secret/). A JSON document is walked by
# `structured`; these find them in a JSON line of a log and in YAML.
_SECRET_DATA_JSON = re.compile(
    r'\\?"(?:data|stringData)\\?"\s{0,16}:\s{0,16}\{(?P<body>[^{}]{0,4194304})\}'
)
_JSON_PAIR_VALUE = re.compile(
    r'(?P<key>\\?"[^"\\\n]{0,256}\\?"\s{0,16}:\s{0,16}\\?")'
    r'(?P<val>(?:[^"\\\n]|\\[^"\n]){1,65536})(?=\\?")'
)
# searched on lines that say "kind":"Secret" (in any of the ways a JSON writer spaces it)
_SECRET_KIND_TRIGGERS = ('"kind":"secret"', '"kind": "secret"', '\\"kind\\":\\"secret\\"')


def _secret_data_json(m: re.Match[str]) -> Edit | None:
    body = m["body"]
    masked = _JSON_PAIR_VALUE.sub(
        lambda pair: pair[0] if MARKER in pair["val"] else pair["key"] + MARKER, body
    )
    return None if masked == body else (m.start("body"), m.end("body"), masked)


_SECRET_KIND_YAML = re.compile(
    r"(?m)^(?P<indent>[ \t]*(?:-[ \t]+)?)kind:[ \t]*[\"']?Secret[\"']?[ \t]*\r?$"
)
_YAML_DATA = re.compile(r"(?m)^(?P<indent>[ \t]*(?:-[ \t]+)?)(?:data|stringData):[ \t]*\r?$")
_YAML_ITEM = re.compile(r"(?P<head>[ \t]*[^\s:#][^:\n]{0,256}:)(?P<sep>[ \t]*)(?P<val>[^\n]*)")
_YAML_DOCUMENT = re.compile(r"(?m)^---")
_YAML_WINDOW = 256 * 1024  # farther from its kind: Secret, a data: is another object's


def _secret_yaml_edits(text: str, check: Callable[[], None]) -> Iterator[Edit]:
    """The values under data:/stringData: of every YAML document that says kind: Secret at
    the same indentation, within `_YAML_WINDOW`. One pass over the data: lines; each line
    of a masked block is looked at once."""
    kinds: dict[int, list[int]] = {}  # indentation → positions of its kind: Secret lines
    for kind in _SECRET_KIND_YAML.finditer(text):
        kinds.setdefault(len(kind["indent"]), []).append(kind.start())
    if not kinds:
        return
    documents = [m.start() for m in _YAML_DOCUMENT.finditer(text)]
    pos = 0
    for n, data in enumerate(_YAML_DATA.finditer(text)):
        if n % 256 == 0:
            check()
        column = len(data["indent"])
        if data.start() < pos or column not in kinds:
            continue
        if not _near_in_document(kinds[column], documents, data.start()):
            continue
        at = data.end() + 1
        block: int | None = None  # the indentation of a block scalar being masked
        while at < len(text):
            end = text.find("\n", at)
            end = len(text) if end == -1 else end
            line = text[at:end]
            depth = len(line) - len(line.lstrip(" \t"))
            if line.strip() and depth <= column:
                break
            if block is not None and (depth > block or not line.strip()):
                if line.strip() and MARKER not in line:
                    yield at + depth, at + len(line.rstrip()), MARKER
            elif line.strip():
                block = None
                item = _YAML_ITEM.fullmatch(line.rstrip("\r"))
                if item is not None:
                    value = item["val"].strip()
                    if value[:1] in ("|", ">"):
                        block = depth
                    elif value and MARKER not in value:
                        yield at + item.start("val"), at + len(line.rstrip()), MARKER
            at = end + 1
        pos = at


def _near_in_document(kinds: list[int], documents: list[int], at: int) -> bool:
    """Whether a kind: Secret line lies within the window of `at`, with no --- between."""
    i = bisect.bisect(kinds, at)
    for kind in kinds[max(0, i - 1) : i + 1]:
        if abs(kind - at) <= _YAML_WINDOW:
            lo, hi = min(kind, at), max(kind, at)
            if bisect.bisect(documents, lo) == bisect.bisect(documents, hi):
                return True
    return False


# --- provider tokens by their documented prefixes -------------------------------------------
# (prefix, what follows it, where the format is documented). The prefix is kept; what follows
# is masked. GL: gitleaks/gitleaks@v8.30.0 config/gitleaks.toml (the rule id follows);
# TH: trufflesecurity/trufflehog@v3.90.0 pkg/detectors/<name>.
_PROVIDER_TOKENS: tuple[tuple[str, str, str], ...] = (
    # GitLab (docs.gitlab.com/security/tokens/#token-prefixes; GL gitlab-*)
    ("glpat-", r"[\w.-]{20,300}", "GL gitlab-pat, gitlab-pat-routable"),
    ("glrt-", r"[\w.-]{20,300}", "GL gitlab-runner-authentication-token"),
    ("gldt-", r"[\w.-]{20,300}", "GL gitlab-deploy-token"),
    ("glptt-", r"[0-9a-f]{40}", "GL gitlab-ptt"),
    ("gloas-", r"[\w-]{20,300}", "GL gitlab-oauth-app-secret"),
    ("glcbt-", r"[\w.-]{20,300}", "GL gitlab-cicd-job-token"),
    ("glft-", r"[\w.-]{20,300}", "GL gitlab-feed-token"),
    ("glimt-", r"[\w.-]{25,300}", "GL gitlab-incoming-mail-token"),
    ("glagent-", r"[\w.-]{50,300}", "GL gitlab-kubernetes-agent-token"),
    ("glsoat-", r"[\w.-]{20,300}", "GL gitlab-scim-token"),
    ("glffct-", r"[\w.-]{20,300}", "GL gitlab-feature-flag-client-token"),
    ("GR1348941", r"[\w-]{20,64}", "GL gitlab-rrt"),
    # Stripe (docs.stripe.com/keys; docs.stripe.com/webhooks#verify-events)
    ("sk_live_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("rk_live_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("sk_test_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("rk_test_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("sk_prod_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("rk_prod_", r"[A-Za-z0-9]{10,247}", "GL stripe-access-token"),
    ("whsec_", r"[A-Za-z0-9+/=]{24,128}", "docs.stripe.com/webhooks#verify-events"),
    # Google (developers.google.com/identity/protocols/oauth2#size)
    ("ya29.", r"[\w-]{20,4096}", "developers.google.com/identity/protocols/oauth2"),
    ("1//0", r"[\w-]{40,1024}", "developers.google.com/identity/protocols/oauth2"),
    (
        "GOCSPX-",
        r"[\w-]{24,40}",
        "docs.github.com/en/code-security/secret-scanning/"
        "introduction/supported-secret-scanning-patterns (google_oauth_client_secret)",
    ),
    # AWS STS session tokens (docs.aws.amazon.com/STS/latest/APIReference/API_Credentials.html)
    ("IQoJb3JpZ2lu", r"[A-Za-z0-9/+=%]{60,8192}", "AWS STS Credentials.SessionToken"),
    ("FwoGZXIvYXdzE", r"[A-Za-z0-9/+=%]{60,8192}", "AWS STS Credentials.SessionToken"),
    # EKS tokens (github.com/kubernetes-sigs/aws-iam-authenticator#api-authorization-from-…)
    ("k8s-aws-v1.", r"[\w-]{40,8192}", "kubernetes-sigs/aws-iam-authenticator README"),
    # package registries and source hosting
    ("pypi-AgEIcHlwaS5vcmc", r"[\w-]{50,1000}", "GL pypi-upload-token"),
    ("npm_", r"[A-Za-z0-9]{36}", "GL npm-access-token"),
    ("rubygems_", r"[0-9a-f]{48}", "GL rubygems-api-token"),
    ("dckr_pat_", r"[\w-]{27,64}", "docs.docker.com/security/access-tokens/"),
    ("dckr_oat_", r"[\w-]{27,64}", "docs.docker.com/security/access-tokens/"),
    ("ATATT3", r"[\w=-]{100,300}", "GL atlassian-api-token"),
    ("ATBB", r"[A-Za-z0-9_=.-]{28,64}", "TH bitbucketapppassword"),
    ("AKCp", r"[A-Za-z0-9]{64,80}", "GL artifactory-api-key"),
    # JFrog reference tokens: base64 of "reftkn:…", 64 characters
    ("cmVmdGtu", r"[A-Za-z0-9]{56}", "trufflehog@v3.93.7 pkg/detectors/artifactoryreferencetoken"),
    ("pul-", r"[0-9a-f]{40}", "GL pulumi-api-token"),
    # Terraform Cloud/Enterprise: a 14-character id before .atlasv1. (GL hashicorp-tf-api-token)
    ("atlasv1.", r"[\w=-]{60,70}", "GL hashicorp-tf-api-token"),
    ("dp.pt.", r"[A-Za-z0-9]{40,44}", "GL doppler-api-token"),
    ("dp.st.", r"[\w.-]{40,100}", "docs.doppler.com/reference/api#authentication"),
    ("dp.sa.", r"[A-Za-z0-9]{40,44}", "docs.doppler.com/reference/api#authentication"),
    ("dp.ct.", r"[A-Za-z0-9]{40,44}", "docs.doppler.com/reference/api#authentication"),
    ("bkua_", r"[0-9a-f]{40}", "TH buildkite/v2"),
    ("tskey-", r"[\w-]{20,200}", "tailscale.com/kb/1085/auth-keys"),
    # payments, messaging, SaaS
    ("SG.", r"[\w-]{22}\.[\w-]{43}", "GL sendgrid-api-token"),
    ("NRAK-", r"[A-Z0-9]{27}", "GL new-relic-user-api-key"),
    ("NRII-", r"[\w-]{32}", "GL new-relic-insert-key"),
    ("NRJS-", r"[0-9a-f]{19}", "GL new-relic-browser-api-token"),
    ("shpat_", r"[0-9a-fA-F]{32}", "GL shopify-access-token"),
    ("shpss_", r"[0-9a-fA-F]{32}", "GL shopify-shared-secret"),
    ("shpca_", r"[0-9a-fA-F]{32}", "GL shopify-custom-access-token"),
    ("shppa_", r"[0-9a-fA-F]{32}", "GL shopify-private-app-access-token"),
    ("EAAA", r"[\w-]{22,60}", "GL square-access-token"),
    ("sq0atp-", r"[\w-]{22,60}", "GL square-access-token"),
    ("sq0csp-", r"[\w-]{40,60}", "TH squareapp"),
    ("HRKU-AA", r"[\w-]{58}", "GL heroku-api-key-v2"),
    ("dop_v1_", r"[0-9a-f]{64}", "GL digitalocean-pat"),
    ("doo_v1_", r"[0-9a-f]{64}", "GL digitalocean-access-token"),
    ("dor_v1_", r"[0-9a-f]{64}", "GL digitalocean-refresh-token"),
    ("lin_api_", r"[A-Za-z0-9]{40}", "GL linear-api-key"),
    ("secret_", r"[A-Za-z0-9]{43}", "developers.notion.com/docs/authorization"),
    ("ntn_", r"[A-Za-z0-9]{46}", "GL notion-api-token"),
    ("sntryu_", r"[0-9a-f]{64}", "GL sentry-user-token"),
    ("sntrys_", r"eyJ[A-Za-z0-9+/=_]{30,800}", "GL sentry-org-token"),
    ("glc_", r"[A-Za-z0-9+/]{32,400}={0,3}", "GL grafana-cloud-api-token"),
    ("glsa_", r"[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", "GL grafana-service-account-token"),
    ("eyJrIjoi", r"[A-Za-z0-9]{70,400}={0,3}", "GL grafana-api-key"),
    ("dapi", r"[0-9a-f]{32}(?:-\d)?", "GL databricks-api-token"),
    ("ops_eyJ", r"[A-Za-z0-9+/]{100,4096}={0,3}", "GL 1password-service-account-token"),
    ("PMAK-", r"[0-9a-f]{24}-[0-9a-f]{34}", "GL postman-api-token"),
    ("pscale_tkn_", r"[\w=.-]{32,64}", "GL planetscale-api-token"),
    ("pscale_pw_", r"[\w=.-]{32,64}", "GL planetscale-password"),
    ("pscale_oauth_", r"[\w=.-]{32,64}", "GL planetscale-oauth-token"),
    ("AGE-SECRET-KEY-1", r"[0-9A-Z]{58}", "GL age-secret-key"),
    ("ico-", r"[A-Za-z0-9]{32}", "GL infracost-api-token"),
    ("v1.0-", r"[0-9a-f]{24}-[0-9a-f]{146}", "GL cloudflare-origin-ca-key"),
    ("dt0c01.", r"[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}", "GL dynatrace-api-token"),
    ("LTAI", r"[A-Za-z0-9]{20}", "GL alibaba-access-key-id"),
    ("EZAK", r"[A-Za-z0-9]{54}", "GL easypost-api-token"),
    ("p8e-", r"[A-Za-z0-9]{32}", "GL adobe-client-secret"),
    ("fio-u-", r"[\w=-]{64}", "GL frameio-api-token"),
    ("CFPAT-", r"[\w-]{43}", "GL contentful-delivery-api-token"),
    ("duffel_live_", r"[\w=-]{43}", "GL duffel-api-token"),
    ("fo1_", r"[\w-]{43}", "GL flyio-access-token"),
    ("fm2_", r"[A-Za-z0-9+/]{100,4096}={0,3}", "GL flyio-access-token"),
    ("sbp_", r"[0-9a-f]{40}", "supabase.com/docs/reference/api/introduction"),
    ("pnu_", r"[A-Za-z0-9]{36}", "GL prefect-api-token"),
    ("rdme_", r"[a-z0-9]{70}", "GL readme-api-token"),
    ("sgp_", r"[0-9a-f]{40}", "GL sourcegraph-access-token"),
    ("xkeysib-", r"[0-9a-f]{64}-[A-Za-z0-9]{16}", "GL sendinblue-api-token"),
    ("sk.eyJ", r"[\w-]{20,400}\.[\w-]{20,64}", "docs.mapbox.com/help/glossary/access-token/"),
    ("figd_", r"[\w-]{38,64}", "developers.figma.com/docs/rest-api/authentication/"),
    ("nfp_", r"[A-Za-z0-9_]{36}", "TH netlify/v2"),
    # AI providers beyond the openai-key rule
    ("xai-", r"[A-Za-z0-9]{60,100}", "docs.x.ai/docs/api-reference#authentication"),
    ("sk-or-v1-", r"[0-9a-f]{64}", "openrouter.ai/docs/api-reference/authentication"),
    ("gsk_", r"[A-Za-z0-9]{52}", "console.groq.com/docs/api-keys"),
    ("r8_", r"[A-Za-z0-9]{37}", "replicate.com/docs/topics/security/api-tokens"),
    ("pplx-", r"[A-Za-z0-9]{48}", "docs.perplexity.ai/guides/getting-started"),
    ("lsv2_pt_", r"[0-9a-f]{32}_[0-9a-f]{10}", "docs.smith.langchain.com/administration"),
    ("lsv2_sk_", r"[0-9a-f]{32}_[0-9a-f]{10}", "docs.smith.langchain.com/administration"),
)
# A prefix must start a word that is neither inside base64 (+ and / are base64 letters) nor a
# part of a dashed name (aws-key-…), or follow an escaped newline in a JSON string; the token
# must end there: certificate bundles, digests and resource names never match.
# what comes before a prefix that is not the start of its token: (prefix, pattern, its length)
_BEFORE_PREFIX = {"atlasv1.": (r"[A-Za-z0-9]{14}\.", 15)}

_PROVIDER = re.compile(
    r"(?:(?<![A-Za-z0-9_+/-])|(?<=\\[nrt]))(?:"
    + "|".join(
        _BEFORE_PREFIX.get(prefix, ("", 0))[0] + re.escape(prefix) + body
        for prefix, body, _ in _PROVIDER_TOKENS
    )
    + r")(?![A-Za-z0-9_+])"
)
_PROVIDER_PREFIXES = sorted((p for p, _, _ in _PROVIDER_TOKENS), key=len, reverse=True)


def _provider_token(m: re.Match[str]) -> Edit | None:
    prefix = next((p for p in _PROVIDER_PREFIXES if m[0].startswith(p)), "")
    return m.start() + len(prefix), m.end(), MARKER  # no prefix at the start: all of it


# Azure AD (Entra ID) client secrets: three characters, a digit, Q~, then 31 to 34 more
# (GL azure-ad-client-secret); matched from the 4 characters before Q~
_AZURE_AD_SECRET = re.compile(r"(?<![\w~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![\w~.-])")

# Connection strings: Azure storage AccountKey, Service Bus and Event Hubs SharedAccessKey,
# SAS `sig=` (learn.microsoft.com/en-us/azure/storage/common/storage-configure-connection-
# string, …/service-bus-messaging/service-bus-sas, …/rest/api/storageservices/create-service-
# sas), and ODBC/JDBC/ADO.NET `Password=`/`Pwd=` after `;`, `?` or `&` (learn.microsoft.com/en-
# us/sql/connect/odbc/dsn-connection-string-attribute): the value ends at `;` or `&`, so the
# settings after it stay
_CONNECTION_STRING = re.compile(
    r"(?<![A-Za-z])(?i:AccountKey|SharedAccessKey|SharedAccessSignature)[ \t]{0,4}="
    r"[ \t]{0,4}(?P<val>[^;&\s\"'\\<>]{1,4096})"
    # a SAS signature is base64 of an HMAC-SHA256: 44 characters, more once URL-encoded
    r"|(?<![A-Za-z])sig=(?P<val4>[A-Za-z0-9%+/=]{16,1024})"
    # Oracle's thin driver: jdbc:oracle:thin:user/password@host (docs.oracle.com/en/database/
    # oracle/oracle-database/23/jjdbc/data-sources-and-URLs.html)
    r"|(?i:jdbc:oracle:thin:)[\w$#]{1,128}/(?P<val5>[^@\s\"'/]{1,256})@"
    r"|(?<=[;?&])[ \t]{0,4}(?i:password|pwd|passwd)[ \t]{0,4}=[ \t]{0,4}"
    r"(?:\{(?P<val2>[^}\n]{1,256})\}|(?P<val3>[^;&\s\"'\\<>{][^;&\s\"'\\<>]{0,1023}))"
)


def _connection_string(m: re.Match[str]) -> Edit | None:
    # sudo's journal lines say `; PWD=/home/ec2-user ;`: a working directory, not a password
    if m["val3"] is not None and _PATH.fullmatch(m["val3"]):
        return None
    return _val_group(m)


# Credentials that command-line tools take as arguments; searched on lines naming the tool.
# mysql/mariadb -pSECRET (dev.mysql.com/doc/refman/8.4/en/connection-options.html), sshpass -p
# (sshpass(1)), ldapsearch/ldapmodify… -w (ldapsearch(1)), redis-cli -a (redis.io/docs/latest/
# develop/tools/cli/), mongosh -p (mongodb.com/docs/mongodb-shell/reference/options/), sqlcmd
# -P (learn.microsoft.com/en-us/sql/tools/sqlcmd/sqlcmd-utility), ipmitool -P (ipmitool(1)),
# smbclient -U user%pass (smbclient(1)), openssl -passin/-passout pass:X (docs.openssl.org/3.0/
# man1/openssl-passphrase-options/), rabbitmqctl add_user/change_password (rabbitmq.com/docs/
# man/rabbitmqctl.8), htpasswd -b (httpd.apache.org/docs/2.4/programs/htpasswd.html). Arguments
# may be separated by NULs, as /proc/<pid>/cmdline holds them.


def _arg(n: str) -> str:
    return (
        rf"(?:'(?P<{n}>[^'\n]{{1,512}})'|\"(?P<{n}q>[^\"\n]{{1,512}})\""
        rf"|(?P<{n}b>[^\s'\";|&<>\x00\\]{{1,512}}))"
    )


_SP = r"[ \t\x00]"  # between arguments
_CLI_PASSWORD = re.compile(
    r"\b(?:mysql(?:dump|admin|import|check|show|slap|pump|sh)?|mariadb(?:-dump|-admin)?)\b"
    rf"[^\n]{{0,512}}?{_SP}-p{_arg('a')}"
    rf"|\bsshpass\b[^\n]{{0,256}}?{_SP}-p{_SP}{{0,16}}{_arg('b')}"
    rf"|\bldap(?:search|modify|add|delete|passwd|whoami|compare|modrdn|exop)\b[^\n]{{0,512}}?"
    rf"{_SP}-w{_SP}{{1,16}}{_arg('c')}"
    rf"|\bredis-cli\b[^\n]{{0,512}}?{_SP}-a{_SP}{{1,16}}{_arg('d')}"
    rf"|\bmongo(?:sh|dump|restore|export|import)?\b[^\n]{{0,512}}?{_SP}-p{_SP}{{1,16}}{_arg('e')}"
    rf"|\b(?:sqlcmd|ipmitool|mosquitto_(?:pub|sub|rr))\b[^\n]{{0,512}}?{_SP}-P{_SP}{{0,16}}"
    rf"{_arg('f')}"
    rf"|\bsmbclient\b[^\n]{{0,512}}?{_SP}(?:-U|--user)[ \t\x00=]{{1,16}}[^\s%'\"\x00]{{1,256}}%"
    rf"{_arg('g')}"
    rf"|\bopenssl\b[^\n]{{0,512}}?{_SP}-pass(?:in|out)?{_SP}{{1,16}}pass:{_arg('h')}"
    rf"|\bopenssl\b[^\n]{{0,512}}?{_SP}-k{_SP}{{1,16}}{_arg('n')}"
    # wandb login <key> (docs.wandb.ai/ref/cli/wandb-login/): a 40-hex (or longer) API key
    rf"|\bwandb{_SP}{{1,16}}login\b[^\n]{{0,256}}?{_SP}(?P<r>[0-9a-f]{{40,86}})(?![\w-])"
    # a password piped to what reads it from stdin: sudo -S (sudo(8)), passwd --stdin
    # (passwd(1) on RHEL and Amazon Linux), docker/podman/helm login --password-stdin
    rf"|\becho{_SP}{{1,16}}(?:-[ne]{{1,2}}{_SP}{{1,16}})?{_arg('m')}[ \t]{{0,16}}\|[ \t]{{0,16}}"
    r"(?:sudo\b[^|\n]{0,128}?[ \t]-[A-Za-z]{0,4}S|passwd\b[^|\n]{0,128}?--stdin"
    r"|[^|\n]{0,256}?--password-stdin)"
    # jenkins-cli -auth user:token (jenkins.io/doc/book/managing/cli/), snmp v1/v2c
    # communities (snmpcmd(1) -c), redis AUTH as MONITOR and redis-cli print it
    # (redis.io/docs/latest/commands/auth/)
    rf"|\bjenkins-cli(?:\.jar)?\b[^\n]{{0,512}}?{_SP}-auth{_SP}{{1,16}}[^\s:@'\"]{{1,128}}:"
    rf"{_arg('o')}"
    rf"|\bsnmp(?:walk|bulkwalk|get|bulkget|getnext|set|table|trap|df|status)\b[^\n]{{0,512}}?"
    rf"{_SP}-c{_SP}{{1,16}}{_arg('p')}"
    r"|(?:^|(?<=[\s\]]))(?:\\?\"AUTH\\?\"(?:[ \t]{1,16}\\?\"[^\"\\\n]{1,128}\\?\")?[ \t]{1,16}"
    r"\\?\"(?P<q>[^\"\\\n]{1,512})\\?\")"
    # typed at redis-cli's prompt (host:port> AUTH [user] password): the whole line
    r"|(?<![^\n>])(?:[ \t]{0,4}AUTH(?:[ \t]{1,16}[\w.-]{1,128})?[ \t]{1,16}"
    r"(?P<qb>[^\s\"&\\]{1,512})[ \t]{0,16}(?:$|(?=[&\"\\])))"
    rf"|\brabbitmqctl\b[^\n]{{0,128}}?\b(?:add_user|change_password){_SP}{{1,16}}"
    rf"[^\s\x00]{{1,128}}{_SP}{{1,16}}{_arg('i')}"
    rf"|\bsqlplus\b{_SP}{{1,16}}(?:-[A-Za-z]{{1,8}}{_SP}{{1,16}}){{0,4}}[\w$#]{{1,128}}/"
    rf"(?P<k>[^@\s'\"/\x00]{{1,256}})(?=[@\s\x00]|$)"
    # redis.conf and sentinel.conf (redis.io/docs/latest/operate/oss_and_stack/management/
    # config-file/): requirepass and masterauth lines
    rf"|(?:^|(?<=\n)|(?<=\\n))[ \t]{{0,64}}(?:requirepass|masterauth){_SP}{{1,16}}{_arg('l')}"
    rf"|\bhtpasswd\b{_SP}{{1,16}}-[A-Za-z]{{0,8}}b[A-Za-z]{{0,8}}{_SP}{{1,16}}"
    rf"(?:[^\s\x00]{{1,256}}{_SP}{{1,16}}){{1,2}}{_arg('j')}"
)
_CLI_TRIGGERS = (
    "mysql", "mariadb", "sshpass", "ldap", "redis-cli", "mongo", "sqlcmd", "ipmitool",
    "smbclient", "openssl", "rabbitmqctl", "htpasswd", "sqlplus", "requirepass", "masterauth",
    "mosquitto_", "| sudo", "|sudo", "-stdin", "jenkins-cli", "auth", "wandb", "snmpwalk",
    "snmpbulk", "snmpget", "snmpset", "snmptable", "snmptrap", "snmpdf", "snmpstatus",
)  # fmt: skip


_SHELL_VARIABLE = re.compile(r"\$\{?[A-Za-z_]\w{0,127}\}?")

# Any client that takes a user and then a password as `-u USER … -p PASSWORD` (cqlsh, influx,
# rabbitmqadmin, clickhouse-client and the many like them; mysql's attached -pX is above):
# `-p` after a user flag on the same command. `-p` is a port as often (docker run -u 1000 -p
# 8080:80, psql -U app -p 5432), so a port, an address:port, a URL or another flag stays.
_USER_THEN_P = re.compile(
    r"(?:^|(?<=[\s\x00]))(?:-u|-U|--user(?:name)?)(?:[ \t\x00]{1,16}|=)[^\s\x00\-][^\s\x00]{0,127}"
    rf"(?:{_SP}{{1,16}}[^\s\x00|;&]{{1,256}}){{0,8}}?{_SP}{{1,16}}-p{_SP}{{1,16}}{_arg('u')}"
)
_PORT_LIKE = re.compile(
    r"(?:\[?[0-9a-fA-F:.]{2,45}\]?:)?\d{1,5}(?:[:-]\d{1,5}){0,2}(?:/(?:tcp|udp|sctp))?"
)


# Commands whose -p is never a password: a port (docker/podman/nerdctl run -p, ssh -p), a
# journal priority (journalctl -p err, journalctl(1)), a parent-making mkdir
_P_NOT_PASSWORD = re.compile(
    r"\b(?:docker|podman|nerdctl|crictl|ctr|ssh|scp|sftp|journalctl|systemctl|kubectl|mkdir"
    r"|install|rsync|nc|ncat|socat|iperf3?|nmap)\b"
)
_PRIORITY = re.compile(r"(?i)(?:emerg|alert|crit|err|warning|notice|info|debug|[0-7])(?:\.\.\w+)?")


def _user_then_p(m: re.Match[str]) -> Edit | None:
    value = next((v for g, v in m.groupdict().items() if g.startswith("u") and v), "")
    if _PORT_LIKE.fullmatch(value) or _PRIORITY.fullmatch(value):
        return None
    if "://" in value or value.startswith("-"):
        return None
    text = m.string
    line_start = text.rfind("\n", 0, m.start()) + 1
    if _P_NOT_PASSWORD.search(text, max(line_start, m.start() - 512), m.start()):
        return None
    return _cli_password(m)


def _cli_password(m: re.Match[str]) -> Edit | None:
    for group, value in m.groupdict().items():
        if value is not None and len(group) <= 2:
            if MARKER in value or _SHELL_VARIABLE.fullmatch(value):
                return None  # masked already, or `$PW`: the name of where it is, kept
            return m.start(group), m.end(group), MARKER
    return None


def _pairs(ends: str = "") -> str:
    """name=value pairs joined by `; ` (section 4.2.1: cookie-pair *( ";" SP cookie-pair )), or
    by a bare `;` as lax writers join them: a value holds no `;` or space, so the chain is read
    once. A name after the first holds no `&`, `?` or `/`, so `sid=x;HttpOnly&v=2` in a query
    string ends at `;`. `ends`: what else ends a value (a query parameter's `&`)."""
    value = rf"[^;\s\"'\\{ends}]{{0,4096}}"
    first = rf"[^=;,\s\"'\\]{{1,256}}={value}"
    pair = rf"[^=;,\s\"'\\&?/]{{1,256}}={value}"
    return rf"{first}(?:;[ \t]{{0,16}}{pair}){{0,63}}"


# Cookie: every value; Set-Cookie: the cookie's value, its attributes kept (RFC 6265 section
# 4.1 and 4.2); also curl's --cookie. A cookie given as a query parameter (`?cookie=sid=x&v=2`)
# ends at the parameter's `&`.
_COOKIE = re.compile(
    # a header map may hold a list of values: "Set-Cookie": ["sid=…; Path=/"]
    r"(?<![A-Za-z?&])(?i:(?:set-)?cookie2?)\\?[\"']?[ \t]{0,16}[:=][ \t]{0,16}\[?\\?[\"']?"
    rf"(?P<body>{_pairs()})"
    rf"|(?<=[?&])(?i:(?:set-)?cookie2?)=(?P<body3>{_pairs('&')})"
    rf"|--cookie(?:[ \t]{{1,16}}|=)[\"']?(?P<body2>{_pairs()})"
)
_COOKIE_PAIR = re.compile(r"(?P<name>[^=;,\s]{1,256})=(?P<value>[^;\s]{1,4096})")
_COOKIE_ATTRIBUTES = frozenset(
    {"path", "domain", "expires", "max-age", "samesite", "priority", "partitioned", "version"}
)


def _cookie(m: re.Match[str]) -> Edit | None:
    group = next(g for g in ("body", "body2", "body3") if m[g] is not None)
    body = m[group]
    masked = _COOKIE_PAIR.sub(
        lambda pair: (
            pair[0]
            if pair["name"].lower() in _COOKIE_ATTRIBUTES or MARKER in pair["value"]
            else f"{pair['name']}={MARKER}"
        ),
        body,
    )
    return None if masked == body else (m.start(group), m.end(group), masked)


# Discord webhooks: the path after the id is the secret (discord.com/developers/docs/
# resources/webhook#execute-webhook); Twitch IRC `oauth:` tokens (dev.twitch.tv/docs/chat/irc/);
# PagerDuty's integration URL holds the routing key (developer.pagerduty.com/docs/events-api-v1-
# overview: /generic/2010-04-15/create_event.json, /integration/<key>/enqueue)
_CHAT_TOKENS = re.compile(
    r"(?i:discord(?:app)?\.com/api/(?:v\d{1,2}/)?webhooks/)\d{15,21}/(?P<val>[\w-]{40,100})"
    r"|(?<![\w-])(?i:oauth):(?P<val2>[a-z0-9]{30})(?![\w-])"
    r"|(?i:pagerduty\.com/integration/)(?P<val3>[A-Za-z0-9]{32})(?![A-Za-z0-9])"
    # Microsoft Teams incoming webhooks: the path after webhookb2/ is the credential
    # (GL microsoft-teams-webhook)
    r"|(?i:\.webhook\.office\.com/webhookb2/)(?P<val5>[\w@/-]{40,512})"
    # Telegram bot tokens, <bot id>:AA and 33 more (core.telegram.org/bots/api#authorizing-
    # your-bot; GL telegram-bot-api-token): the id's digits, `:AA` and exactly 33 characters
    # are specific enough under any key (`bot: …`, `BOT=…`, the api.telegram.org/bot… path);
    # the id is kept
    r"|(?:(?<![\w:-])|(?<=bot))\d{8,10}:(?P<val4>AA[A-Za-z0-9_-]{33})(?![\w-])"
)

# Tokens whose shape alone is too common to trust, masked on lines that name their provider
# (each group: the words one of which the line must hold near it). Vault tokens before 1.10,
# s. (service) and b. (batch) (developer.hashicorp.com/vault/docs/concepts/tokens#token-
# prefixes); Okta API tokens 00… (GL okta-access-token); Twilio API key SIDs SK… and account
# SIDs AC… (GL twilio-api-key; TH twilio), their prefix kept; Mailgun keys key-… (GL mailgun-
# private-api-token), the prefix kept; Telegram bot tokens <bot id>:AA… of other lengths
# (the exact shape is a chat-token anywhere), the id kept (core.telegram.org/bots/api#
# authorizing-your-bot; GL telegram-bot-api-token)
# (each branch starts with the character its match starts with, its look-behind after it, so
# that `re` skips to those characters rather than try every branch at every position of a
# line: `s(?<![\w.-]s)` is `(?<![\w.-])s`. So SK and AC are two branches, and Okta's group is
# taken by a look-behind over what its branch matched, its look-ahead starting one character
# later and reaching one less)
_CONTEXT_TOKENS = re.compile(
    r"s(?<![\w.-]s)\.(?=[A-Za-z0-9]{0,23}[A-Z])(?=[A-Za-z0-9]{0,23}\d)(?P<vault>[A-Za-z0-9]{24})"
    r"(?![\w.-])"
    r"|b(?<![\w.-]b)\.(?P<vault2>AAAAAQ[\w-]{20,512})"
    r"|0(?<![\w-]0)(?=[\w-]{0,40}[A-Z])0[A-Za-z0-9_-]{40}(?![\w-])"
    r"(?<=(?P<okta>00[A-Za-z0-9_-]{40}))"
    r"|S(?<![\w-]S)K(?P<twilio>[0-9a-fA-F]{32})(?![\w-])"
    r"|A(?<![\w-]A)C(?P<twilio2>[0-9a-fA-F]{32})(?![\w-])"
    r"|k(?<![\w-]k)ey-(?P<mailgun>[0-9a-f]{32})(?![\w-])"
    r"|:(?<=\d:)(?P<telegram>AA[A-Za-z0-9_-]{31,34})(?![\w-])"
)
_CONTEXT_WORDS = {
    "vault": ("vault", "token"),
    "vault2": ("vault", "token"),
    "okta": ("okta",),
    "twilio": ("twilio",),
    "twilio2": ("twilio",),
    "mailgun": ("mailgun",),
    "telegram": ("telegram",),
}
_CONTEXT_REACH = 512  # how far along its line a token's provider may be named


def _context_token(m: re.Match[str]) -> Edit | None:
    group = next(g for g in _CONTEXT_WORDS if m[g] is not None)
    text = m.string
    reach_back = max(0, m.start() - _CONTEXT_REACH)
    start = max(text.rfind("\n", reach_back, m.start()) + 1, reach_back)
    end = text.find("\n", m.end(), m.end() + _CONTEXT_REACH)
    near = text[start : end if end != -1 else m.end() + _CONTEXT_REACH].lower()
    if not any(word in near for word in _CONTEXT_WORDS[group]) or MARKER in m[group]:
        return None
    return m.start(group), m.end(group), MARKER


# Values whose key says nothing but whose object does: `aws ssm get-parameter
# --with-decryption` prints a SecureString's plain value under "Value"
# (docs.aws.amazon.com/cli/latest/reference/ssm/get-parameter.html), and `az storage account
# keys list` prints each key under "value" beside its "keyName"
# (learn.microsoft.com/en-us/cli/azure/storage/account/keys). A "Value"/"value" string is
# masked when one of those words lies within `_OBJECT_REACH` of it.
_JSON_VALUE = re.compile(
    r'\\?"(?:Value|value)\\?"[ \t]{0,16}:[ \t\r\n]{0,64}\\?"'
    r'(?P<val>(?:[^"\\\n]|\\[^"\n]){1,65536})(?=\\?")'
    # the same printed with --output yaml
    r"|(?m:^[ \t]{0,64}(?:-[ \t]{1,16})?(?:Value|value):[ \t]{1,16})"
    r"(?P<val2>[^\s|>][^\n]{0,65535})"
)
_OBJECT_WORDS = re.compile(
    r"SecureString|\\?\"keyName\\?\"|\bkeyName:"
)  # EC2 says "KeyName": a key pair
_OBJECT_REACH = 512


def _object_value_edits(text: str, check: Callable[[], None]) -> Iterator[Edit]:
    words = [m.start() for m in _OBJECT_WORDS.finditer(text)]
    if not words:
        return
    for n, m in enumerate(_JSON_VALUE.finditer(text)):
        if n % 1024 == 0:
            check()
        i = bisect.bisect(words, m.start())
        near = any(
            abs(words[j] - m.start()) <= _OBJECT_REACH for j in (i - 1, i) if 0 <= j < len(words)
        )
        group = "val" if m["val"] is not None else "val2"
        if near and MARKER not in m[group]:
            yield m.start(group), m.end(group), MARKER


# --- secret-env ------------------------------------------------------------------------------

# where a secret-env match can start; "api" alone would stop at every kubelet `source="api"`
_KEYWORDS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "api_key",
    "api-key",
    "apikey",
    "private",
    "cred",
    "_key",
    "-key",
    "accountkey",
    "presharedkey",
    "_auth",
    "_pat",
)
_SECRET_ENV = re.compile(
    r"(?P<kw>(?i:pass|pwd|secret|token|api[_-]?key|private[_-]?key|cred|[_-]key|accountkey"
    r"|presharedkey|_auth\b|_pat\b))"
    r"(?P<rest>[\w.-]{0,64})"
    r"(?P<q>\\?[\"']?)"
    r"(?P<sep>[ \t]{0,16}[=:][ \t]{0,16}|\s{0,64},\s{0,64}\\?\"value\\?\"\s{0,16}:\s{0,16}"
    r"|[ \t]{0,16}\r?\n[ \t]{0,64}value:[ \t]{0,16}|[ \t]{1,16}"
    r"|[ \t]{0,16}\r?\n[ \t]{0,64}-[ \t]{1,16}(?=[^\s-]))"
    # a string inside a JSON string: its own escaped quotes (\\\") and backslashes (\\\\) are
    # read as pairs, so JSON held in a JSON log line is masked whole
    r"(?=(?P<val>\\\"(?:[^\"\\\n]|\\\\\\\\|\\\\\\\"|\\\\[^\"\\\n]|\\[^\"\\\n]){0,4096}\\\""
    r"|\"(?:[^\"\\\n]|\\.){0,4096}\""
    # a bare value ends at an escaped line break or tab, escaped once (\n) or twice (\\n)
    r"|'[^'\n]{0,4096}'|(?:[^\s\"'\\]|\\(?!\\[nrt])[^nrt\"\s]){1,4096}))"
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_PATH = re.compile(r"/[\w.@+-]+(?:/[\w.@+-]*)*")
_NOT_SECRET_VALUE = frozenset({"true", "false", "null", "none", "nil", "yes", "no"})
_K8S_ENV_JSON = re.compile(r"\\?\"name\\?\"\s{0,64}:\s{0,64}$")
_K8S_ENV_YAML = re.compile(r"(?:^|\n)[ \t]{0,64}(?:-[ \t]{1,16})?name:[ \t]{0,16}$")
_YAML_LIST_ITEM = re.compile(r"(?:^|\n)[ \t]{0,64}-[ \t]{1,16}$")
# the quote may be escaped (a JSON log line) or doubled (a single-quoted YAML scalar)
# An HTTP header by its shape (RFC 9110 5.1 field names, written Title-Case-With-Hyphens as
# clients and proxies log them): `X-Consul-Token: v`, `Ocp-Apim-Subscription-Key: v` are a
# credential wherever the line holds them (a request logged in prose, a header map printed)
_HEADER_NAME = re.compile(r"(?:X-)?[A-Z][A-Za-z0-9]{0,31}(?:-[A-Z][A-Za-z0-9]{0,31}){1,6}")
_HEADER_FLAG = re.compile(r"(?:^|[ \t])(?:-H|--header)(?:[ \t]{1,16}|=)(?:''|\\?[\"'])?$")
# curl -v writes request headers after `> ` and response headers after `< `
_LINE_START = re.compile(
    r"[ \t]{0,64}(?:[<>][ \t]{1,4})?"
    r"(?:-[ \t]{1,16}|export[ \t]{1,16}|declare[ \t]{1,16}-[A-Za-z]{1,4}[ \t]{1,16})?"
)


def _name_start(text: str, end: int) -> int:
    i = end
    floor = max(0, end - 128)  # names are short; a longer run of word characters is no name
    while i > floor and (text[i - 1].isalnum() or text[i - 1] in "_.-"):
        i -= 1
    if i < end and text[i - 1 : i] == "\\":  # \npassword in a JSON string: n is the escape's
        i += 1
    return i


def _at_line_start(text: str, start: int) -> bool:
    """Whether only indentation, a YAML list dash or `export` comes before `start` on its
    line; a line may also start after the two characters \\n (YAML inside a JSON string)."""
    floor = max(0, start - 128)
    newline = text.rfind("\n", floor, start)
    escaped = text.rfind("\\n", floor, start)
    line_start = max(newline + 1, escaped + 2 if escaped != -1 else 0)
    if newline == -1 and escaped == -1 and start > 128:
        return False  # no indentation is that deep
    return _LINE_START.fullmatch(text, line_start, start) is not None


def _secret_env(m: re.Match[str]) -> Edit | None:
    text = m.string
    start = _name_start(text, m.start())
    name = text[start : m.end("rest")]
    if not is_secret_name(name):
        return None
    q, sep, val = m["q"], m["sep"], m["val"]
    before = text[max(0, start - 80) : start]
    quoted_value = val.startswith(('"', "'", '\\"'))
    if sep.strip().startswith("-"):  # a YAML args list: - --client-secret, then - the value
        if q or not name.startswith("-") or not _YAML_LIST_ITEM.search(before):
            return None
    elif "value" in sep:  # Kubernetes env entry: name and value are separate fields
        pattern = _K8S_ENV_JSON if '"value' in sep else _K8S_ENV_YAML
        if not pattern.search(before[: len(before) - len(q)] if q else before):
            return None
    elif q:  # quoted key: "name": "value" or 'name' = value
        if not before.endswith(q) or not sep.strip():
            return None
        # "key": bare-word is YAML at the start of a line, else prose (volume "creds" : secret)
        if sep.strip() == ":" and not quoted_value and not _at_line_start(text, start - len(q)):
            return None
    elif sep.strip() == ":":  # YAML key at line start, flow mapping {k: v}, Go-struct Name:value,
        # or a header given to curl -H "X-Api-Key: value"
        if (
            not _at_line_start(text, start)
            and not _HEADER_FLAG.search(before)
            and not (_HEADER_NAME.fullmatch(name) and sep.startswith(":"))
        ):
            flow = before.rstrip(" \t")[-1:] in ("{", ",")
            if not flow and (sep != ":" or (before and before[-1] not in "{ ,(")):
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
    if _PATH.fullmatch(inner):  # --image-credential-provider-config=/etc/eks/…: a path
        return None
    return vs, ve, MARKER


TEXT_RULES: tuple[Rule, ...] = (
    # pem-block is paired by _pem_edits, not by this regex (which only names its triggers)
    Rule("pem-block", _PEM_MARKER, lambda m: None, (("-----begin ", 0),), TEXT, _pem_edits),
    Rule("pem-base64", _PEM_B64, _pem_base64, (("ls0tls1crudjti", 0),), TEXT),
    Rule("aws-access-key-id", _AWS_KEY_ID, _keep_prefix(4), (("akia", 0), ("asia", 0))),
    # aws_secret_access_key starts 4 before "secret"
    Rule("aws-secret-access-key", _AWS_SECRET, _val_group, (("secret", 4),)),
    # aws_session_token, aws_security_token, x-amz-security-token
    Rule("aws-session-token", _AWS_SESSION, _val_group, (("session", 4), ("security", 6))),
    Rule("aws-signature", _AMZ_SIGNED, _val_group, (("x-amz-", 0), ("signature=", 0))),
    Rule(
        "bearer-token",
        _BEARER,
        _val_group,
        (("bearer", 0), ("auth", 0), ("eyj", 0), ("digest ", 0), ("ssws", 0)),
    ),
    Rule("bootstrap-token", _BOOTSTRAP, _val_group, (("token", 0), ("bootstrap", 0)), LINE),
    # --user holds -u one character in
    Rule("url-credentials", _URL_CRED, _url_cred, (("://", 0), ("-u", 1))),
    # a quote (maybe escaped) comes first: \"auth\", ".dockerconfigjson", "identitytoken"
    Rule(
        "docker-auth",
        _DOCKER_AUTH,
        _docker_auth,
        (("auth", 2), ("dockerconfigjson", 3), ("dockercfg", 3), ("identitytoken", 2)),
    ),
    Rule(
        "github-token",
        _GITHUB,
        _token_prefix_kept,
        (("ghp_", 0), ("gho_", 0), ("ghu_", 0), ("ghs_", 0), ("ghr_", 0), ("github_pat_", 0)),
    ),
    Rule("slack-token", _SLACK, _token_prefix_kept, (("xox", 0), ("xapp-", 0), ("hooks.slack", 0))),
    Rule("huggingface-token", _HUGGING_FACE, _token_prefix_kept, (("hf_", 0),)),
    Rule("openai-key", _SK_KEY, _token_prefix_kept, (("sk-", 0),)),
    Rule("vault-token", _VAULT, _token_prefix_kept, (("hvs.", 0), ("hvb.", 0), ("hvr.", 0))),
    Rule("google-api-key", _GOOGLE, _token_prefix_kept, (("aiza", 0),)),
    Rule("nvidia-api-key", _NVAPI, _token_prefix_kept, (("nvapi-", 0),)),
    Rule("registry-login", _LOGIN_PASSWORD, _val_group, (("login", 0),), LINE),
    Rule(
        "chpasswd",
        _CHPASSWD_PAIR,
        _chpasswd_line,
        (("chpasswd", 0), ("set the following 'random' passwords", 0)),
        LINE,
    ),
    Rule(
        "chpasswd-list",
        _CHPASSWD_BLOCK,
        _chpasswd_block,
        (("chpasswd:", 0), ("set the following 'random' passwords", 0)),
    ),
    Rule("netrc-password", _NETRC, _val_group, (("machine", 0),), LINE),
    # the YAML half is paired by _secret_yaml_edits (its regex only names the triggers)
    Rule(
        "k8s-secret-yaml",
        _SECRET_KIND_YAML,
        lambda m: None,
        (("kind:", 0),),
        TEXT,
        _secret_yaml_edits,
    ),
    Rule(
        "k8s-secret-json",
        _SECRET_DATA_JSON,
        _secret_data_json,
        tuple((t, 0) for t in _SECRET_KIND_TRIGGERS),
        LINE,
    ),
    Rule(
        "provider-token",
        _PROVIDER,
        _provider_token,
        tuple(
            dict.fromkeys(
                (p.lower(), _BEFORE_PREFIX.get(p, ("", 0))[1]) for p, _, _ in _PROVIDER_TOKENS
            )
        ),
    ),
    Rule(
        "azure-client-secret",
        _AZURE_AD_SECRET,
        lambda m: (m.start(), m.end(), MARKER),
        (("q~", 4),),
    ),
    Rule(
        "connection-string",
        _CONNECTION_STRING,
        _connection_string,
        (
            ("accountkey", 0),
            ("sharedaccesskey", 0),
            ("sharedaccesssignature", 0),
            ("sig=", 0),
            ("password", 4),
            ("pwd", 4),
            ("passwd", 4),
            ("jdbc:oracle", 0),
        ),
    ),
    Rule("cli-password", _CLI_PASSWORD, _cli_password, tuple((t, 0) for t in _CLI_TRIGGERS), LINE),
    Rule("cookie", _COOKIE, _cookie, (("cookie", 4), ("--cookie", 0))),
    Rule(
        "chat-token",
        _CHAT_TOKENS,
        _val_group,
        (
            ("discord", 0),
            ("oauth:", 0),
            ("pagerduty.com/integration/", 0),
            # a bot id's last digit, then :AA (a MAC's 0a:aa never triggers it)
            *((f"{digit}:aa", 10) for digit in range(10)),
            ("webhook.office.com/", 1),
        ),
    ),
    Rule(
        "context-token",
        _CONTEXT_TOKENS,
        _context_token,
        tuple((word, 0) for word in dict.fromkeys(w for ws in _CONTEXT_WORDS.values() for w in ws)),
        LINE,
    ),
    Rule(
        "object-value",
        _JSON_VALUE,
        lambda m: None,
        (("securestring", 0), ("keyname", 0)),
        TEXT,
        _object_value_edits,
    ),
    Rule("secret-env", _SECRET_ENV, _secret_env, tuple((k, 0) for k in _KEYWORDS)),
)


# --- secrets in other file formats -----------------------------------------------------------
# Shapes the rules above do not see, counted under the rule whose kind of secret they hold.

# XML elements named for a secret: Maven's settings.xml <password> (maven.apache.org/settings.html
# #servers), Tomcat, .NET app settings; the tag may have a namespace and attributes
_XML_ELEMENT = re.compile(
    r"<(?P<tag>(?:[A-Za-z_][\w.-]{0,63}:)?(?P<name>[A-Za-z_][\w.-]{0,127}))"
    r"(?:[ \t][^<>\n]{0,1024})?>(?P<val>[^<>\n]{1,4096})</(?P=tag)[ \t]{0,16}>"
)


def _xml_element(m: re.Match[str]) -> Edit | None:
    value = m["val"].strip()
    if not is_secret_name(m["name"]) or not value or MARKER in value:
        return None
    if value.lower() in _NOT_SECRET_VALUE or _PATH.fullmatch(value):
        return None
    start = m.start("val") + m["val"].index(value)
    return start, start + len(value), MARKER


# SQL that sets a password: CREATE/ALTER USER|ROLE … PASSWORD 'x' (www.postgresql.org/docs/17/
# sql-createrole.html), MySQL's IDENTIFIED [WITH plugin] BY 'x' and SET PASSWORD … = 'x'
# (dev.mysql.com/doc/refman/8.4/en/create-user.html), Oracle's IDENTIFIED BY x
_SQL_PASSWORD = re.compile(
    r"(?i:\bidentified[ \t]{1,16}(?:with[ \t]{1,16}[\w'\"]{1,64}[ \t]{1,16})?by"
    r"|\b(?:encrypted[ \t]{1,16})?password(?:[ \t]{1,16}for[ \t]{1,16}[^=\n]{1,256}?)?)"
    r"(?:[ \t]{1,16}|[ \t]{0,16}=[ \t]{0,16}(?i:password\()?)"
    r"(?:'(?P<val>(?:[^'\n]|''){1,512})'"
    r"|(?<=[Bb][Yy][ \t])(?P<val2>[A-Za-z][\w$#]{0,127})(?=[ \t;]|$))"
)

# ~/.pgpass and PGPASSFILE lines: hostname:port:database:username:password, `*` for any
# (www.postgresql.org/docs/17/libpq-pgpass.html); found on lines with a PostgreSQL port or `*`,
# the host named (letters, an address's dots, or `*`), not a run of numbers (10:20:30:40:50)
_PGPASS = re.compile(
    r"(?m)(?:^|(?<=[\s\"'=>]))(?=[^:\s]{0,255}[A-Za-z.*])[^:\s#\"'=<>][^:\s\"'=<>]{0,255}"
    r":(?:\d{1,5}|\*):[^:\s\"'<>]{1,256}:[^:\s\"'<>]{1,256}:(?P<val>(?:[^\s:\\\"'<&]|\\[:\\]){1,1024})(?=[\s\"'<&\\]|$)"
)
_PGPASS_TRIGGERS = (":5432:", ":5433:", ":6432:", ":*:")


def _pgpass(m: re.Match[str]) -> Edit | None:
    return None if m["val"] == "*" else _val_group(m)


# Values set by name in commands and code: `kubectl create secret generic --from-literal=k=v`
# (any key: the value is the Secret's data; kubernetes.io/docs/tasks/configmap-secret/
# managing-secret-using-kubectl/), a two-argument call naming a secret (PHP define('DB_PASSWORD',
# 'x'), os.environ.setdefault("API_TOKEN", "x"), setenv), `aws configure set <name> <value>`
# (docs.aws.amazon.com/cli/latest/reference/configure/set.html)
_NAMED_VALUE = re.compile(
    # SSM put-parameter --value with --type SecureString on the line (docs.aws.amazon.com/cli/
    # latest/reference/ssm/put-parameter.html)
    r"(?:--from-literal(?:[ \t]{1,16}|=)[\"']?[^=\s'\"]{1,253}=|\bput-parameter\b[^\n]{0,1024}?"
    r"--value(?:[ \t]{1,16}|=))"
    r"(?:'(?P<val>[^'\n]{1,4096})'|\"(?P<val2>[^\"\n]{1,4096})\"|(?P<val3>[^\s'\"]{1,4096}))"
    r"|\([ \t]{0,16}(?P<q>[\"'])(?P<name>[\w.-]{1,128})(?P=q)[ \t]{0,16},[ \t]{0,16}"
    r"(?P<q2>[\"'])(?P<val4>[^\"'\n]{1,4096})(?P=q2)[ \t]{0,16}\)"
    r"|\baws[ \t]{1,16}configure[ \t]{1,16}set[ \t]{1,16}(?P<name2>[\w.-]{1,128})[ \t]{1,16}"
    r"(?P<val5>[^\s'\"]{1,4096})"
)
_CREATE_SECRET = re.compile(r"\bsecret\b|SecureString")


def _named_value(m: re.Match[str]) -> Edit | None:
    if m["val4"] is not None or m["val5"] is not None:
        name = m["name"] if m["val4"] is not None else m["name2"]
        value = m["val4"] if m["val4"] is not None else m["val5"]
        if not is_secret_name(name) or value.lower() in _NOT_SECRET_VALUE:
            return None
        return _val_group(m)
    # on the command's line, within a reach that keeps a long line linear
    text, reach = m.string, 1024
    line = text.rfind("\n", max(0, m.start() - reach), m.start()) + 1
    line_end = text.find("\n", m.end(), m.end() + reach)
    line_end = min(len(text), m.end() + reach) if line_end == -1 else line_end
    if not _CREATE_SECRET.search(text, max(line, m.start() - reach), line_end):
        return None  # --from-literal to a ConfigMap, a String parameter: configuration
    return _val_group(m)


# strongSwan/Libreswan ipsec.secrets: `<ids> : PSK "secret"` and XAUTH/EAP/NTLM passwords
# (docs.strongswan.org/docs/latest/swanctl/swanctlConf.html, ipsec.secrets(5))
_IPSEC_SECRET = re.compile(
    r"(?<![\w-]):[ \t]{0,16}(?:PSK|XAUTH|EAP|NTLM)[ \t]{1,16}"
    r"(?:\\?\"(?P<val>[^\"\\\n]{1,512})\\?\"|'(?P<val2>[^'\n]{1,512})'"
    r"|(?P<val3>[^\s\"'\\]{1,512}))"
)


_KEYWORD_TRIGGERS = tuple((k, 0) for k in _KEYWORDS)
FILE_FORMAT_RULES: tuple[Rule, ...] = (
    Rule("cli-password", _USER_THEN_P, _user_then_p, ((" -p ", 0),), LINE),
    Rule("secret-env", _XML_ELEMENT, _xml_element, tuple((k, 0) for k in _KEYWORDS), LINE),
    Rule("cli-password", _SQL_PASSWORD, _val_group, (("identified", 0), ("password", 0)), LINE),
    Rule("netrc-password", _PGPASS, _pgpass, tuple((t, 0) for t in _PGPASS_TRIGGERS), LINE),
    Rule(
        "netrc-password",
        _IPSEC_SECRET,
        _val_group,
        ((" psk ", 0), (":psk ", 0), ("xauth", 0), (" eap ", 0), (" ntlm ", 0)),
        LINE,
    ),
    Rule(
        "secret-env",
        _NAMED_VALUE,
        _named_value,
        (("--from-literal", 0), ("configure set", 0), ("put-parameter", 0), *_KEYWORD_TRIGGERS),
        LINE,
    ),
)
