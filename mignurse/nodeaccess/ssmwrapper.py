"""What SSM runs on the node and what comes back: the `sh` wrapper around the collection script
(saved with a quoted heredoc, run into a temp file, then POSTed to S3 under a presigned policy
or printed base64-encoded for the agent to upload to the command's output bucket), the lines
it prints (`mignurse-key=`, `mignurse-rc=`), where the SSM agent puts that output, and the
streaming decoder for the output-bucket form. `ssm.SSMFleet` sends it and reads it back.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import secrets
import shlex
import urllib.parse

UPLOAD_FAILED_RC = 86  # the wrapper's exit status when curl (or base64) could not hand it over
NO_ENCODER_RC = 87  # output-bucket: neither base64 nor openssl on the node
# Where the agent puts an AWS-RunShellScript invocation's output under OutputS3KeyPrefix:
# path.Join(prefix, CommandId, InstanceId) (aws/amazon-ssm-agent agent/runcommand/utils.go),
# then the plugin name and the step id "0.aws:runShellScript" with colons removed
# (agent/framework/runpluginutil/runpluginutil.go `output.Init(pluginName, stepName)`,
# agent/fileutil BuildS3Path), then stdout / stderr; an empty stream makes no object.
PLUGIN_OUTPUT_DIR = "awsrunShellScript/0.awsrunShellScript"
# the wrapper's own stdout: the object it wrote (presigned) and the script's exit status
RC_LINE = re.compile(r"^mignurse-rc=(\d+)\s*$", re.MULTILINE)
KEY_LINE = re.compile(r"^mignurse-key=(\S+)\s*$", re.MULTILINE)


def _save_and_run(script: str, *, checks: str = "") -> str:
    """sh that saves `script` in a temp folder with a quoted heredoc, runs `checks`, then runs
    the script with its stdout into "$d/out" and its exit status in `rc`."""
    marker = "MIGNURSE_EOF_" + secrets.token_hex(8)
    if marker in script:  # astronomically unlikely; a clash would end the heredoc early
        raise ValueError("heredoc marker clash; try again")
    body = script if script.endswith("\n") else script + "\n"
    return (
        'd=$(mktemp -d "${TMPDIR:-/tmp}/mignurse.XXXXXX") || '
        "{ echo 'mignurse: mktemp failed' >&2; exit 85; }\n"
        "trap 'rm -rf \"$d\"' EXIT\n"
        "trap 'exit 143' TERM INT\n"  # so the EXIT trap cleans up when SSM kills us
        f"{checks}"
        f"cat >\"$d/script.sh\" <<'{marker}'\n"
        f"{body}"
        f"{marker}\n"
        'sh "$d/script.sh" </dev/null >"$d/out"\n'
        "rc=$?\n"
    )


def wrapper_script(script: str, post_url: str, fields: dict[str, str], prefix: str) -> str:
    """The sh text SSM runs: save `script`, run it into a file, POST the file, print its rc.

    `fields` are the presigned POST form fields except `key`, which the node makes from its
    own name (one command carries the same text to every instance) under `prefix`."""
    form = " ".join(
        f"--form-string {shlex.quote(f'{name}={value}')}"
        for name, value in fields.items()
        if name != "key"
    )
    return _save_and_run(script) + (
        "host=$(uname -n | tr -c 'A-Za-z0-9.\\n-' _ | tr -d '\\n')\n"
        "rand=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \\n')\n"
        f'key={shlex.quote(prefix)}"${{host:-node}}-$rand.out"\n'
        f'if ! curl --fail --silent --show-error --form-string "key=$key" {form} '
        f'-F "file=@$d/out" {shlex.quote(post_url)} >/dev/null; then\n'
        '  echo "mignurse: uploading the output to S3 failed (script rc $rc)" >&2\n'
        f"  exit {UPLOAD_FAILED_RC}\n"
        "fi\n"
        'echo "mignurse-key=$key"\n'
        'echo "mignurse-rc=$rc"\n'
    )


def output_bucket_script(script: str) -> str:
    """The sh text SSM runs when the agent uploads stdout to the command's output bucket:
    `mignurse-rc=<N>` first, then the script's stdout base64-encoded (the agent stores text).
    The encoder is found before the script runs, so a node without one fails at once."""
    checks = (
        "if command -v base64 >/dev/null 2>&1; then encode=base64\n"
        "elif command -v openssl >/dev/null 2>&1; then encode='openssl base64'\n"
        "else\n"
        "  echo 'mignurse: neither base64 nor openssl is on the node to encode the output "
        "for the SSM output bucket' >&2\n"
        f"  exit {NO_ENCODER_RC}\n"
        "fi\n"
    )
    return _save_and_run(script, checks=checks) + (
        'echo "mignurse-rc=$rc"\n'
        'if ! $encode <"$d/out"; then\n'  # unquoted on purpose: "openssl base64" is two words
        '  echo "mignurse: base64-encoding the output failed (script rc $rc)" >&2\n'
        f"  exit {UPLOAD_FAILED_RC}\n"
        "fi\n"
    )


def agent_output_key(prefix: str, command_id: str, instance_id: str, stream: str) -> str:
    """The key the SSM agent writes an AWS-RunShellScript stream ("stdout" or "stderr") to,
    joined and cleaned like Go's path.Join (no doubled or trailing slashes)."""
    parts = [prefix, command_id, instance_id, PLUGIN_OUTPUT_DIR, stream]
    joined = posixpath.normpath("/".join(part for part in parts if part))
    return "/" + joined.lstrip("/") if joined.startswith("/") else joined


def key_from_output_url(url: str, bucket: str) -> str:
    """The object key in a `StandardOutputUrl`/`StandardErrorUrl`, path-style
    (`https://s3.REGION.amazonaws.com/BUCKET/KEY`) or virtual-hosted
    (`https://BUCKET.s3.REGION.amazonaws.com/KEY`); "" when empty or another bucket's."""
    if not url:
        return ""
    parsed = urllib.parse.urlsplit(url)
    host = (parsed.hostname or "").lower()
    path = urllib.parse.unquote(parsed.path).lstrip("/")
    if host.startswith(bucket.lower() + "."):
        return path
    if path.startswith(bucket + "/"):
        return path[len(bucket) + 1 :]
    return ""


class Base64Stream:
    """Decodes base64 text that arrives in chunks of any size: line breaks and other
    whitespace are dropped, and an incomplete 4-character group is carried to the next
    chunk, so no more than 3 characters are ever held back."""

    _WHITESPACE = b" \t\r\n\v\f"

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._carry + chunk.translate(None, self._WHITESPACE)
        whole = len(data) - len(data) % 4
        self._carry = data[whole:]
        try:
            return base64.b64decode(data[:whole], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"not base64: {exc}") from None

    def close(self) -> None:
        if self._carry:
            raise ValueError(f"base64 ends mid-group ({len(self._carry)} characters left over)")


class WrapperOutput:
    """The output-bucket wrapper's stdout, fed in chunks: `first_line` (the rc line, as text)
    once its line break has arrived, and the decoded bytes of the base64 after it."""

    MAX_FIRST_LINE = 4096

    def __init__(self) -> None:
        self.first_line: str | None = None
        self._head = b""
        self._decoder = Base64Stream()

    def feed(self, chunk: bytes) -> bytes:
        if self.first_line is None:
            self._head += chunk
            cut = self._head.find(b"\n")
            if cut < 0:
                if len(self._head) > self.MAX_FIRST_LINE:
                    raise ValueError(f"no line break in the first {self.MAX_FIRST_LINE} bytes")
                return b""
            self.first_line = self._head[:cut].decode("utf-8", "replace")
            chunk, self._head = self._head[cut + 1 :], b""
        return self._decoder.feed(chunk)

    def close(self) -> None:
        if self.first_line is None:
            raise ValueError("it ends before the first line does")
        self._decoder.close()
