"""What a secret is called: the key, variable or flag names whose values are masked, shared by
the text rules (`redact`) and the JSON walk (`structured`).

A name is secret when it holds one of the words credentials go by (password, token, secret,
api key, private key, credentials, auth) and does not end in a word that makes it a pointer
or a setting instead (``secretName``, ``tokenFile``, ``--image-credential-provider-config``,
``--discovery-token-ca-cert-hash``, ``token_ttl``): those are evidence, not secrets.
Upper-case environment names ending in ``_KEY`` (``STRIPE_KEY``, ``NGC_API_KEY``) or ``_AUTH``
(``REDISCLI_AUTH``) are secret too, except public keys, and so are keys named for what they open
(``routing_key``, ``AccountKey``, ``X-Insert-Key``, ``PresharedKey``).
"""

from __future__ import annotations

import functools
import re

MARKER = "***REDACTED***"

_SECRET_WORD = re.compile(
    r"(?i)pass(?:word|wd|phrase)?|pwd|secret|token|api[_.-]?key|private[_.-]?key|cred"
    r"|\bauth\b|^_auth$|(?:basic|proxy)[_.-]?auth(?![A-Za-z])|auth(?:orization|[_-]?token)"
    r"|x-amz-(?:signature|credential)"
)
_POINTER_SUFFIXES = (
    "name", "names", "namespace", "ref", "file", "files", "path", "dir", "id", "ids", "type",
    "kind", "config", "conf", "hash", "tokens", "ttl", "seconds", "count", "length", "size",
    "enabled", "mode", "policy", "version", "url", "uri", "endpoint", "provider", "issuer",
    "audience", "expiry", "expiration", "expires", "format", "source", "usage", "bin", "arn",
    "region", "process", "scope", "scopes", "method", "header", "helper", "prefix", "suffix",
    "stdin",
)  # fmt: skip
# Words that hold a secret word without being one: vLLM's --tokenizer, a proxy's bypass list,
# a scheduler's credit (sch_fq).
_NOT_SECRET_WORD = re.compile(r"(?i)tokeniz|bypass|passthrough|compass|passive|passeng|credit")
# Keys named for what they open: routing/integration/service keys (PagerDuty, Alertmanager's
# pagerduty_configs), account and storage keys (Azure), app and application keys (Datadog),
# insert and license keys (New Relic), WireGuard's PresharedKey
_KEY_NAME = re.compile(
    r"[A-Z0-9_.-]*[A-Z0-9][_.-]KEY"
    # an HTTP header named for a key (Fastly-Key, docs.fastly.com/en/guides/using-api-tokens;
    # X-Api-Key): Title-Case words joined by hyphens, ending in -Key
    r"|(?:[A-Z][A-Za-z0-9]{0,31}-){1,6}Key"
    r"|(?i:[\w.-]*(?:ssh|encryption|master|signing|secret|access|session|license|client|routing"
    r"|integration|service|account|storage|app|application|insert|ingest|subscription|webhook"
    r"|shared|admin|deploy|auth|bot|consumer|functions|preshared|decryption|hmac|jwt"
    r"|management)[_.-]?key)"
)
# Names secret whatever their suffix says: a key's id names the key rather than holding it,
# except a GCP service-account key file's private_key_id (cloud.google.com/iam/docs/
# keys-create-delete), which gitleaks and trufflehog treat as part of the credential; and
# JFrog's X-JFrog-Art-Api header, which carries the API key (jfrog.com/help/r/jfrog-rest-apis/
# authentication)
_ALWAYS_SECRET = frozenset({"private_key_id", "x-jfrog-art-api"})
# An upper-case environment variable ending in _AUTH holds credentials (REDISCLI_AUTH,
# redis.io/docs/latest/develop/tools/cli/; NPM_CONFIG__AUTH), one ending in _PAT a personal
# access token (AZURE_DEVOPS_EXT_PAT, learn.microsoft.com/en-us/azure/devops/cli/log-in-via-pat;
# GITHUB_PAT, GITLAB_PAT)
_ENV_AUTH = re.compile(r"[A-Z0-9]+(?:_{1,2}[A-Z0-9]+)*_{1,2}(?:AUTH|PAT)")
_PUBLIC = re.compile(r"(?i)public|pub[_.-]")
# Flags that switch on using a token rather than carrying one (huggingface-cli --use-auth-token)
_SWITCH_PREFIX = re.compile(r"(?i)-*(?:use|no|enable|disable|with|without|require)[_-]")


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a key, environment variable or flag called `name` holds a secret value."""
    bare = name.lstrip("-")
    if bare.lower() in _ALWAYS_SECRET:
        return True
    if not bare or len(bare) > 128 or _NOT_SECRET_WORD.search(bare):
        return False
    if bare.lower().endswith(_POINTER_SUFFIXES) or _SWITCH_PREFIX.match(bare):
        return False
    if _SECRET_WORD.search(bare):
        return True
    if _ENV_AUTH.fullmatch(bare):
        return True
    return _KEY_NAME.fullmatch(bare) is not None and not _PUBLIC.search(bare)
