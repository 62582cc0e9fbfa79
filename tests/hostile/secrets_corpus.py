"""Fake but format-valid secrets of every kind a GPU node's files and a cluster's objects
carry, and benign look-alikes that redaction must leave alone: generated here, never a real
credential. Each secret kind names where its format is documented.

A `Secret` is one line (or block) of text as a node, a tool or an operator writes it, the
strings that must not survive redaction, and optionally the Kubernetes shape it takes (an env
entry, container args, or a whole object). `render` writes a case as each file type a bundle
holds: plain text, one-line JSON, indented JSON, YAML, a log with NUL bytes.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_rng = random.Random(20261129)
B62 = string.ascii_letters + string.digits


def _pick(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def b62(n: int) -> str:
    """Letters and digits, at least one capital and one digit (as real keys have)."""
    return _rng.choice(string.ascii_uppercase) + _rng.choice(string.digits) + _pick(B62, n - 2)


def upper(n: int) -> str:
    return _pick(string.ascii_uppercase + "234567", n)


def hexs(n: int) -> str:
    return _pick("0123456789abcdef", n)


def lower(n: int) -> str:
    return _pick(string.ascii_lowercase + string.digits, n)


def b64(nbytes: int) -> str:
    return base64.b64encode(_rng.randbytes(nbytes)).decode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def password() -> str:
    return _pick(string.ascii_letters, 6) + _pick(string.digits, 3) + _pick("!%#+", 1) + b62(6)


def uuid() -> str:
    h = hexs(32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def jwt() -> str:
    head = b64url(b'{"alg":"RS256","kid":"' + hexs(40).encode() + b'"}')
    claims = {
        "aud": ["https://kubernetes.default.svc"],
        "exp": 1795000000,
        "iss": "https://oidc.eks.us-west-2.amazonaws.com/id/" + upper(32),
        "sub": "system:serviceaccount:inference:vllm",
    }
    body = b64url(json.dumps(claims).encode())
    return f"{head}.{body}.{b64url(_rng.randbytes(256))}"


def pem_body(lines: int) -> list[str]:
    raw = b64(48 * lines)
    return [raw[i : i + 64] for i in range(0, len(raw), 64)]


def pem(label: str, lines: int = 8, headers: str = "") -> tuple[str, list[str]]:
    body = pem_body(lines)
    block = "\n".join([f"-----BEGIN {label}-----", *headers.splitlines(), *body])
    return block + f"\n-----END {label}-----", body


@dataclass(frozen=True)
class Secret:
    kind: str
    source: str  # where the format is documented
    text: str  # as written to a log, a config file or a shell trace
    secrets: tuple[str, ...]  # none of these may survive
    keep: tuple[str, ...] = ()  # these must survive (evidence around the secret)
    env: tuple[str, str] | None = None  # the Kubernetes env entry that carries it
    args: tuple[str, ...] | None = None  # the container args that carry it
    document: dict[str, Any] | None = None  # a whole Kubernetes object


@dataclass(frozen=True)
class LookAlike:
    kind: str
    text: str  # must come out of redaction unchanged, in every rendering
    document: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


DOC_AWS_KEYS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_access-keys.html"
DOC_SIGV4_QUERY = "https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html"
DOC_SIGV4_POST = "https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-HTTPPOSTForms.html"
DOC_SIGV4_HEADER = (
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-authentication-methods.html"
)
DOC_IMDS = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html"
DOC_GITHUB = "https://github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available"
DOC_SLACK = "https://docs.slack.dev/authentication/tokens"
DOC_SLACK_HOOK = "https://api.slack.com/messaging/webhooks"
DOC_HF = "https://huggingface.co/docs/hub/security-tokens"
DOC_OPENAI = "https://platform.openai.com/docs/api-reference/authentication"
DOC_VAULT = "https://developer.hashicorp.com/vault/docs/concepts/tokens#token-prefixes"
DOC_GOOGLE = "https://cloud.google.com/docs/authentication/api-keys"
DOC_NVAPI = "https://docs.nvidia.com/nemo/retriever/latest/extraction/api-keys/"
DOC_DOCKER_LOGIN = "https://docs.docker.com/reference/cli/docker/login/"
DOC_DOCKER_CONFIG = "https://docs.docker.com/reference/cli/docker/login/#credential-stores"
DOC_CONTAINERD = "https://github.com/containerd/containerd/blob/v1.7.27/docs/cri/registry.md"
DOC_CHPASSWD = "canonical/cloud-init@24.4 cloudinit/config/schemas/schema-cloud-config-v1.json"
DOC_CHPASSWD_RANDOM = "canonical/cloud-init@24.4 cloudinit/config/cc_set_passwords.py"
DOC_BOOTSTRAP = (
    "https://kubernetes.io/docs/reference/access-authn-authz/bootstrap-tokens/#token-format"
)
DOC_PEM = "https://www.rfc-editor.org/rfc/rfc7468"
DOC_PEM_ENCRYPTED = "https://www.rfc-editor.org/rfc/rfc1421"
DOC_KUBECONFIG = "https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/"
DOC_URL = "https://www.rfc-editor.org/rfc/rfc3986#section-3.2.1"
DOC_K8S_SECRET = "https://kubernetes.io/docs/concepts/configuration/secret/"
DOC_LAST_APPLIED = (
    "https://kubernetes.io/docs/reference/labels-annotations-taints/"
    "#kubectl-kubernetes-io-last-applied-configuration"
)
DOC_BEARER = "https://www.rfc-editor.org/rfc/rfc6750#section-2.1"
DOC_BASIC = "https://www.rfc-editor.org/rfc/rfc7617#section-2"
DOC_JWT = "https://www.rfc-editor.org/rfc/rfc7519#section-3"
DOC_EKS_TOKEN = "https://github.com/kubernetes-sigs/aws-iam-authenticator#api-authorization-from-outside-a-cluster"
DOC_NETRC = "https://www.gnu.org/software/inetutils/manual/html_node/The-_002enetrc-file.html"
DOC_NPM = "https://docs.npmjs.com/cli/v10/configuring-npm/npmrc#auth-related-configuration"
DOC_ENV = "https://kubernetes.io/docs/tasks/inject-data-application/define-environment-variable-container/"
GITLEAKS = "https://github.com/gitleaks/gitleaks/blob/v8.30.0/config/gitleaks.toml"
DOC_GITHUB_SECRET_SCANNING = (
    "https://docs.github.com/en/code-security/secret-scanning/introduction/"
    "supported-secret-scanning-patterns"
)
TRUFFLEHOG = "https://github.com/trufflesecurity/trufflehog/tree/v3.90.0/pkg/detectors/"
DOC_GITLAB_TOKENS = "https://docs.gitlab.com/security/tokens/#token-prefixes"
DOC_DOCKER_PAT = "https://docs.docker.com/security/access-tokens/"
DOC_STRIPE = "https://docs.stripe.com/keys#obtain-api-keys"
DOC_STRIPE_WEBHOOK = "https://docs.stripe.com/webhooks#verify-events"
DOC_DATADOG = "https://docs.datadoghq.com/account_management/api-app-keys/"
DOC_NOTION = "https://developers.notion.com/docs/authorization"
DOC_TELEGRAM = "https://core.telegram.org/bots/api#authorizing-your-bot"
DOC_DISCORD_WEBHOOK = "https://discord.com/developers/docs/resources/webhook#execute-webhook"
DOC_DISCORD_AUTH = "https://discord.com/developers/docs/reference#authentication"
DOC_SENTRY_DSN = "https://docs.sentry.io/concepts/key-terms/dsn-explainer/"
DOC_TWITCH_IRC = "https://dev.twitch.tv/docs/chat/irc/#connecting-to-the-twitch-irc-server"
DOC_OKTA = "https://developer.okta.com/docs/guides/create-an-api-token/main/"
DOC_AGE = "https://github.com/C2SP/C2SP/blob/main/age.md#the-x25519-recipient-type"
DOC_WIREGUARD = "https://www.wireguard.com/quickstart/#key-generation"
DOC_PGP = "https://www.rfc-editor.org/rfc/rfc9580#section-6.2"
DOC_GCP_TOKENS = "https://developers.google.com/identity/protocols/oauth2#size"
DOC_GCP_SA_KEY = "https://cloud.google.com/iam/docs/keys-create-delete#creating"
DOC_AZURE_STORAGE = (
    "https://learn.microsoft.com/en-us/azure/storage/common/storage-configure-connection-string"
)
DOC_AZURE_STORAGE_KEYS = "https://learn.microsoft.com/en-us/cli/azure/storage/account/keys"
DOC_AZURE_SERVICE_BUS = (
    "https://learn.microsoft.com/en-us/azure/service-bus-messaging/service-bus-sas"
)
DOC_AZURE_SAS = "https://learn.microsoft.com/en-us/rest/api/storageservices/create-service-sas"
DOC_SSM_GET = "https://docs.aws.amazon.com/cli/latest/reference/ssm/get-parameter.html"
DOC_SECRETS_MANAGER = (
    "https://docs.aws.amazon.com/cli/latest/reference/secretsmanager/get-secret-value.html"
)
DOC_CREDENTIAL_PROCESS = (
    "https://docs.aws.amazon.com/sdkref/latest/guide/feature-process-credentials.html"
)
DOC_MYSQL_PASSWORD = (
    "https://dev.mysql.com/doc/refman/8.4/en/connection-options.html#option_general_password"
)
DOC_SSHPASS = "https://manpages.debian.org/bookworm/sshpass/sshpass.1.en.html"
DOC_LDAPSEARCH = "https://manpages.debian.org/bookworm/ldap-utils/ldapsearch.1.en.html"
DOC_PGPASSWORD = "https://www.postgresql.org/docs/17/libpq-envars.html"
DOC_REDIS_CLI = "https://redis.io/docs/latest/develop/tools/cli/#host-port-password-and-database"
DOC_REDIS_CONF = "https://redis.io/docs/latest/operate/oss_and_stack/management/config-file/"
DOC_OPENSSL_PASS = "https://docs.openssl.org/3.0/man1/openssl-passphrase-options/"
DOC_COOKIE = "https://www.rfc-editor.org/rfc/rfc6265#section-4"
DOC_DIGEST = "https://www.rfc-editor.org/rfc/rfc7616#section-3.4"
DOC_PAGERDUTY_REST = "https://developer.pagerduty.com/docs/authentication"
DOC_PAGERDUTY_EVENTS = "https://developer.pagerduty.com/docs/events-api-v2-overview"
DOC_CONFLUENT = "https://docs.confluent.io/cloud/current/client-apps/config-client.html"
DOC_JDBC = "https://jdbc.postgresql.org/documentation/use/#connection-parameters"
DOC_ODBC = "https://learn.microsoft.com/en-us/sql/connect/odbc/dsn-connection-string-attribute"


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "vllm-7d9f8b6c5d-x7k2p", "namespace": "inference"},
        "spec": {
            "nodeName": "ip-10-0-37-142.us-west-2.compute.internal",
            "containers": [container],
        },
    }


def secrets() -> list[Secret]:
    """Every secret kind, freshly generated (deterministic: a fixed seed)."""
    out: list[Secret] = []

    def add(kind: str, source: str, text: str, *secret: str, **kw: Any) -> None:
        out.append(Secret(kind, source, text, tuple(secret), **kw))

    # --- AWS ---------------------------------------------------------------------------------
    akia, asia, sk = "AKIA" + upper(16), "ASIA" + upper(16), b62(40)
    session = "IQoJb3JpZ2luX2VjE" + b64(300).replace("=", "")
    add(
        "aws-access-key-id",
        DOC_AWS_KEYS,
        f"+ export AWS_ACCESS_KEY_ID={akia}",
        akia,
        env=("AWS_ACCESS_KEY_ID", akia),
    )
    add(
        "aws-temporary-key-id",
        DOC_AWS_KEYS,
        f"+ aws configure set aws_access_key_id {asia} --profile gpu",
        asia,
        keep=("--profile gpu",),
    )
    add(
        "aws-secret-access-key",
        DOC_AWS_KEYS,
        f"+ export AWS_SECRET_ACCESS_KEY={sk}",
        sk,
        env=("AWS_SECRET_ACCESS_KEY", sk),
    )
    sk2 = b62(40)
    add(
        "aws-credentials-file",
        DOC_AWS_KEYS,
        f"[default]\naws_access_key_id = {akia}\naws_secret_access_key = {sk2}\nregion = us-west-2",
        sk2,
        akia,
        keep=("region = us-west-2",),
    )
    add(
        "aws-session-token",
        DOC_AWS_KEYS,
        f"+ export AWS_SESSION_TOKEN={session}",
        session,
        env=("AWS_SESSION_TOKEN", session),
    )
    imds_secret, imds_token = b62(40), "IQoJb3JpZ2luX2VjE" + b64(240).replace("=", "")
    add(
        "imds-role-credentials",
        DOC_IMDS,
        '{"Code":"Success","LastUpdated":"2026-11-29T03:00:00Z","Type":"AWS-HMAC",'
        f'"AccessKeyId":"{asia}","SecretAccessKey":"{imds_secret}","Token":"{imds_token}",'
        '"Expiration":"2026-11-29T09:00:00Z"}',
        imds_secret,
        imds_token,
        asia,
        keep=("2026-11-29T09:00:00Z",),
    )
    sig, sts = hexs(64), "IQoJb3JpZ2luX2VjE" + b64(180).replace("=", "").replace("+", "%2B")
    base = "https://models-bucket.s3.us-west-2.amazonaws.com/llama/model-00001.safetensors"
    scope = "%2F20261129%2Fus-west-2%2Fs3%2Faws4_request"
    add(
        "presigned-url-signature",
        DOC_SIGV4_QUERY,
        f'curl -fsSLo /models/m.bin "{base}?X-Amz-Algorithm=AWS4-HMAC-SHA256'
        f"&X-Amz-Date=20261129T030000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
        f'&X-Amz-Signature={sig}"',
        sig,
        keep=("X-Amz-Expires=3600", "X-Amz-Date=20261129T030000Z"),
    )
    cred_key = "ASIA" + upper(16)
    add(
        "presigned-url-credential",
        DOC_SIGV4_QUERY,
        f"GET {base}?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={cred_key}{scope}"
        "&X-Amz-Date=20261129T030000Z 200",
        cred_key,
        keep=("X-Amz-Algorithm=AWS4-HMAC-SHA256",),
    )
    add(
        "presigned-url-security-token",
        DOC_SIGV4_QUERY,
        f"GET {base}?X-Amz-Security-Token={sts}&X-Amz-Date=20261129T030000Z 403 AccessDenied",
        sts,
        keep=("403 AccessDenied",),
    )
    post_sig, post_token, post_cred = hexs(64), "IQoJb3JpZ2luX2VjE" + b64(150), "ASIA" + upper(16)
    add(
        "post-policy-fields",
        DOC_SIGV4_POST,
        "curl --fail --form-string 'key=runs/ip-10-0-1-2.out' "
        f"--form-string 'x-amz-credential={post_cred}/20261129/us-west-2/s3/aws4_request' "
        f"--form-string 'x-amz-security-token={post_token}' "
        f"--form-string 'x-amz-signature={post_sig}' -F file=@/tmp/out "
        "https://bundles.s3.us-west-2.amazonaws.com/",
        post_sig,
        post_token,
        post_cred,
        keep=("key=runs/ip-10-0-1-2.out",),
    )
    header_sig = hexs(64)
    add(
        "sigv4-authorization-header",
        DOC_SIGV4_HEADER,
        f"Authorization: AWS4-HMAC-SHA256 Credential={akia}/20261129/us-west-2/s3/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={header_sig}",
        header_sig,
        keep=("SignedHeaders=host;x-amz-date",),
    )

    # --- HTTP and Kubernetes tokens ---------------------------------------------------------
    bearer = b64url(_rng.randbytes(30))
    add(
        "bearer-header",
        DOC_BEARER,
        'I1129 03:00:00.1 2345 round_trippers.go:466] "Request Headers" '
        f'Authorization="Bearer {bearer}"',
        bearer,
        keep=("round_trippers.go:466",),
    )
    token = jwt()
    add(
        "service-account-jwt",
        DOC_JWT,
        f"projected token refreshed: {token}",
        token.split(".")[2],
        token.split(".")[1],
    )
    eks = "k8s-aws-v1." + b64url(_rng.randbytes(420))
    add(
        "eks-kubeconfig-token",
        DOC_EKS_TOKEN,
        f"users:\n- name: gpu-prod\n  user:\n    token: {eks}",
        eks,
        keep=("name: gpu-prod",),
    )
    basic = base64.b64encode(f"deploy:{password()}".encode()).decode()
    add("basic-auth-header", DOC_BASIC, f"> Authorization: Basic {basic}", basic)
    boot_id, boot_secret = lower(6), lower(16)
    add(
        "bootstrap-token",
        DOC_BOOTSTRAP,
        f"+ kubeadm join 10.0.0.10:6443 --token {boot_id}.{boot_secret} "
        f"--discovery-token-ca-cert-hash sha256:{hexs(64)}",
        boot_secret,
        keep=(boot_id + ".",),
    )

    # --- private keys ------------------------------------------------------------------------
    for kind, label, extra in (
        ("pem-rsa-private-key", "RSA PRIVATE KEY", ""),
        ("pem-ec-private-key", "EC PRIVATE KEY", ""),
        ("pem-pkcs8-private-key", "PRIVATE KEY", ""),
        ("pem-openssh-private-key", "OPENSSH PRIVATE KEY", ""),
        ("pem-encrypted-private-key", "ENCRYPTED PRIVATE KEY", ""),
        (
            "pem-legacy-encrypted",
            "RSA PRIVATE KEY",
            "Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC," + hexs(32).upper() + "\n",
        ),
    ):
        block, body = pem(label, headers=extra)
        add(
            kind,
            DOC_PEM_ENCRYPTED if extra else DOC_PEM,
            f"writing key:\n{block}\ndone",
            *body,
            keep=("writing key:", "done"),
        )
    body = pem_body(4)
    add(
        "pem-truncated-private-key",
        DOC_PEM,
        "2026-11-29T03:00:00.000000+0000 ip-10-0-1-2 cloud-init[1234]: -----BEGIN RSA PRIVATE "
        "KEY-----\n" + "\n".join(body[:3]) + "\n2026-11-29T03:00:01.000000+0000 ip-10-0-1-2 "
        "kubelet[2345]: I1129 node ready",
        *body[:3],
        keep=("2026-11-29T03:00:01.000000+0000 ip-10-0-1-2 kubelet[2345]: I1129",),
    )
    key_b64 = base64.b64encode(pem("RSA PRIVATE KEY")[0].encode()).decode()
    add(
        "kubeconfig-client-key-data",
        DOC_KUBECONFIG,
        f"users:\n- name: admin\n  user:\n    client-key-data: {key_b64}",
        key_b64[40:],
    )

    # --- URLs and registries -----------------------------------------------------------------
    pw = password()
    add(
        "url-userinfo",
        DOC_URL,
        f"+ curl -sSfL https://deploy:{pw}@artifacts.corp.example.com/gpu/setup.sh -o /tmp/s.sh",
        pw,
        keep=("artifacts.corp.example.com/gpu/setup.sh",),
    )
    pw = password()
    add(
        "proxy-credentials",
        DOC_URL,
        f"+ export https_proxy=http://proxyuser:{pw}@proxy.corp.example.com:3128",
        pw,
        keep=("proxy.corp.example.com:3128",),
    )
    pw = password()
    add(
        "curl-user",
        DOC_URL,
        f"+ curl -u deploy:{pw} https://artifacts.corp.example.com/drivers/",
        pw,
    )
    pw = password()
    add(
        "database-url",
        DOC_URL,
        f"DATABASE_URL=postgres://app:{pw}@db.internal:5432/app",
        pw,
        env=("DATABASE_URL", f"postgres://app:{pw}@db.internal:5432/app"),
        keep=("db.internal",),
    )
    auth = base64.b64encode(f"$oauthtoken:nvapi-{b62(64)}".encode()).decode()
    add(
        "docker-config-auth",
        DOC_DOCKER_CONFIG,
        '{"auths": {"nvcr.io": {"auth": "' + auth + '"}}}',
        auth,
        keep=("nvcr.io",),
    )
    auth = base64.b64encode(f"AWS:{b62(30)}".encode()).decode()
    add(
        "containerd-registry-auth",
        DOC_CONTAINERD,
        '[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.corp.example.com".auth]'
        f'\n  auth = "{auth}"',
        auth,
    )
    pw = password()
    add(
        "containerd-registry-password",
        DOC_CONTAINERD,
        '[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.corp.example.com".auth]'
        f'\n  username = "deploy"\n  password = "{pw}"',
        pw,
        keep=('username = "deploy"',),
    )
    ident = jwt()
    add(
        "docker-identitytoken",
        DOC_DOCKER_CONFIG,
        '{"auths": {"registry.corp.example.com": {"identitytoken": "' + ident + '"}}}',
        ident.split(".")[2],
    )
    pw = password()
    add(
        "docker-login-p",
        DOC_DOCKER_LOGIN,
        f"+ docker login -u '$oauthtoken' -p {pw} nvcr.io",
        pw,
        keep=("nvcr.io",),
    )
    pw = password()
    add(
        "docker-login-password",
        DOC_DOCKER_LOGIN,
        f"+ nerdctl login --username AWS --password {pw} "
        "602401143452.dkr.ecr.us-west-2.amazonaws.com",
        pw,
        keep=("602401143452.dkr.ecr.us-west-2.amazonaws.com",),
    )
    pw = password()
    add(
        "netrc",
        DOC_NETRC,
        f"machine artifacts.corp.example.com login deploy password {pw}",
        pw,
        keep=("machine artifacts.corp.example.com",),
    )
    npm = "npm_" + b62(36)
    add("npmrc-auth-token", DOC_NPM, f"//registry.npmjs.org/:_authToken={npm}", npm)

    # --- vendor tokens -----------------------------------------------------------------------
    for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
        tok = prefix + b62(36)
        add(f"github-{prefix[:-1]}", DOC_GITHUB, f"+ gh auth login --with-token <<< {tok}", tok)
    pat = "github_pat_" + b62(22) + "_" + b62(59)
    add(
        "github-fine-grained-pat", DOC_GITHUB, f"GITHUB_TOKEN={pat}", pat, env=("GITHUB_TOKEN", pat)
    )
    tok = "ghp_" + b62(36)
    add(
        "github-token-in-clone-url",
        DOC_GITHUB,
        f"+ pip install git+https://{tok}@github.com/acme/gpu-kernels.git@v1.2.0",
        tok,
        keep=("github.com/acme/gpu-kernels.git@v1.2.0",),
    )
    tok = "ghs_" + b62(36)
    add(
        "github-app-token-in-url",
        DOC_GITHUB,
        f"+ git clone https://x-access-token:{tok}@github.com/acme/infra.git",
        tok,
        keep=("github.com/acme/infra.git",),
    )
    tok = f"xoxb-{_pick(string.digits, 13)}-{_pick(string.digits, 13)}-{b62(24)}"
    add("slack-bot-token", DOC_SLACK, f"SLACK_BOT={tok}", tok, env=("SLACK_BOT", tok))
    digits = [_pick(string.digits, 13) for _ in range(3)]
    tok = f"xoxp-{digits[0]}-{digits[1]}-{digits[2]}-{hexs(32)}"
    add(
        "slack-user-token",
        DOC_SLACK,
        f"notify: using {tok} for #gpu-oncall",
        tok,
        keep=("#gpu-oncall",),
    )
    tok = f"xapp-1-A0{upper(9)}-{_pick(string.digits, 13)}-{hexs(64)}"
    add("slack-app-token", DOC_SLACK, f"socket mode token {tok}", tok)
    hook = f"T0{upper(8)}/B0{upper(8)}/{b62(24)}"
    add(
        "slack-webhook",
        DOC_SLACK_HOOK,
        f'+ curl -X POST https://hooks.slack.com/services/{hook} -d \'{{"text":"node NotReady"}}\'',
        hook.rsplit("/", 1)[1],
        keep=("node NotReady",),
    )
    hf = "hf_" + _pick(string.ascii_letters, 34)
    add(
        "huggingface-token",
        DOC_HF,
        f"huggingface_hub.errors.HfHubHTTPError: 401 Unauthorized (token {hf})",
        hf,
        keep=("401 Unauthorized",),
    )
    hf = "hf_" + _pick(string.ascii_letters, 34)
    add("huggingface-env", DOC_HF, f"HF_TOKEN={hf}", hf, env=("HF_TOKEN", hf))
    hf = "hf_" + _pick(string.ascii_letters, 34)
    add(
        "huggingface-cli-flag",
        DOC_HF,
        f"vllm serve meta-llama/Llama-3.1-8B-Instruct --hf-token {hf} --tensor-parallel-size 2",
        hf,
        args=("--model", "meta-llama/Llama-3.1-8B-Instruct", "--hf-token", hf),
        keep=("meta-llama/Llama-3.1-8B-Instruct",),
    )
    tok = b62(32)
    add(
        "token-equals-flag",
        DOC_ENV,
        f"python train.py --token={tok} --epochs 3",
        tok,
        args=("train.py", f"--token={tok}", "--epochs", "3"),
        keep=("--epochs 3",),
    )
    key = "sk-proj-" + b62(48) + "T3BlbkFJ" + b62(48)
    add("openai-project-key", DOC_OPENAI, f"OPENAI_API_KEY={key}", key, env=("OPENAI_API_KEY", key))
    key = "sk-" + b62(20) + "T3BlbkFJ" + b62(20)
    add(
        "openai-legacy-key",
        DOC_OPENAI,
        f"openai.AuthenticationError: Incorrect API key provided: {key}",
        key,
    )
    tok = "hvs.CAESI" + b62(86)
    add("vault-service-token", DOC_VAULT, f"VAULT_TOKEN={tok}", tok, env=("VAULT_TOKEN", tok))
    tok = "hvb.AAAAAQ" + b62(140)
    add("vault-batch-token", DOC_VAULT, f"vault agent: renewed lease with {tok}", tok)
    key = "AIza" + _pick(B62 + "_-", 35)
    add(
        "google-api-key",
        DOC_GOOGLE,
        f"GET https://maps.googleapis.com/maps/api/geocode/json?address=x&key={key} 200",
        key,
    )
    key = "nvapi-" + _pick(B62 + "_-", 64)
    add("nvidia-api-key", DOC_NVAPI, f"NGC_API_KEY={key}", key, env=("NGC_API_KEY", key))

    # --- cloud-init ----------------------------------------------------------------------------
    p1, p2 = password(), password()
    add(
        "chpasswd-list-block",
        DOC_CHPASSWD,
        f"#cloud-config\nchpasswd:\n  expire: false\n  list: |\n    root:{p1}\n    ec2-user:{p2}\n"
        "    admin:RANDOM\nssh_pwauth: false",
        p1,
        p2,
        keep=("admin:RANDOM", "ssh_pwauth: false"),
    )
    p1 = password()
    add(
        "chpasswd-list-items",
        DOC_CHPASSWD,
        f"chpasswd:\n  list:\n    - ubuntu:{p1}\n    - backup:R\n  expire: false",
        p1,
        keep=("backup:R",),
    )
    p1 = password()
    add(
        "chpasswd-users",
        DOC_CHPASSWD,
        f"chpasswd:\n  users:\n    - {{name: user1, password: {p1}, type: text}}\n"
        "    - {name: user3, type: RANDOM}",
        p1,
        keep=("name: user3",),
    )
    p1 = password()
    add(
        "chpasswd-shell-pipe",
        DOC_CHPASSWD,
        f"+ echo 'root:{p1}' | chpasswd",
        p1,
        keep=("| chpasswd",),
    )
    p1 = password()
    add(
        "chpasswd-random-output",
        DOC_CHPASSWD_RANDOM,
        f"Set the following 'random' passwords\n\nuser3:{p1}",
        p1,
        keep=("user3:",),
    )
    p1 = password()
    add(
        "cloud-config-password",
        DOC_CHPASSWD,
        f"#cloud-config\npassword: {p1}\nssh_pwauth: true",
        p1,
        keep=("ssh_pwauth: true",),
    )

    # --- environment and application settings ----------------------------------------------------
    for name in (
        "DB_PASSWORD",
        "MYSQL_ROOT_PASSWORD",
        "API_TOKEN",
        "S3_SECRET",
        "WANDB_API_KEY",
        "ENCRYPTION_KEY",
        "REDIS_PASSWD",
    ):
        value = password()
        add(f"env-{name.lower()}", DOC_ENV, f"{name}={value}", value, env=(name, value))
    pw = password()
    add(
        "connection-string",
        (
            "https://learn.microsoft.com/en-us/dotnet/api/system.data.sqlclient.sqlconnection.connectionstring"
        ),
        f"ConnectionStrings__Default=Server=db;Database=app;User Id=sa;Password={pw};",
        pw,
        keep=("User Id=sa",),
    )

    # --- source control, CI and package registries -------------------------------------------
    tok = "glpat-" + _pick(B62 + "_-", 20)
    add(
        "gitlab-pat",
        GITLEAKS,
        f"remote: HTTP Basic: Access denied for {tok} on gitlab.corp.example.com/ml/kernels",
        tok,
        keep=("gitlab.corp.example.com/ml/kernels",),
    )
    tok = "glpat-" + b62(38) + ".01." + lower(7)
    add("gitlab-pat-routable", GITLEAKS, f"GITLAB_TOKEN={tok}", tok, env=("GITLAB_TOKEN", tok))
    tok = "glrt-t1_" + _pick(B62 + "_-", 27)
    add(
        "gitlab-runner-token",
        DOC_GITLAB_TOKENS,
        f'[[runners]]\n  name = "gpu-runner"\n  url = "https://gitlab.com"\n  token = "{tok}"',
        tok,
        keep=('name = "gpu-runner"',),
    )
    tok = "gldt-" + _pick(B62 + "_-", 20)
    add(
        "gitlab-deploy-token",
        DOC_GITLAB_TOKENS,
        f"pulling registry.gitlab.com/acme/cuda-base:12.4 as gitlab+deploy-token-7 {tok}",
        tok,
        keep=("registry.gitlab.com/acme/cuda-base:12.4",),
    )
    tok = "glptt-" + hexs(40)
    add(
        "gitlab-pipeline-trigger-token",
        DOC_GITLAB_TOKENS,
        f"+ curl -X POST --fail -F token={tok} -F ref=main "
        "https://gitlab.com/api/v4/projects/42/trigger/pipeline",
        tok,
        keep=("ref=main",),
    )
    tok = "gloas-" + hexs(64)
    add("gitlab-oauth-app-secret", GITLEAKS, f"oauth application secret {tok} rotated", tok)
    tok = "GR1348941" + _pick(B62 + "_-", 20)
    add(
        "gitlab-runner-registration",
        GITLEAKS,
        "+ gitlab-runner register --non-interactive --url https://gitlab.com "
        f"--registration-token {tok} --executor kubernetes",
        tok,
        keep=("--executor kubernetes",),
    )
    tok = "pypi-AgEIcHlwaS5vcmc" + _pick(B62 + "_-", 120)
    add(
        "pypi-token",
        GITLEAKS,
        f"+ twine upload -u __token__ -p {tok} dist/*",
        tok,
        keep=("dist/*",),
    )
    tok = "npm_" + b62(36)
    add("npm-token", GITLEAKS, f"npm notice using {tok} for registry.npmjs.org", tok)
    tok = "dckr_pat_" + _pick(B62 + "_-", 27)
    add(
        "docker-hub-pat",
        DOC_DOCKER_PAT,
        f"+ echo {tok} | docker login -u acmebot --password-stdin",
        tok,
        keep=("--password-stdin",),
    )
    tok = "ATATT3xFfGF0" + _pick(B62 + "_-", 174) + "=" + hexs(8).upper()
    add(
        "atlassian-api-token",
        GITLEAKS,
        f"jira: POST /rest/api/3/issue as oncall@example.com with {tok} -> 201",
        tok,
        keep=("/rest/api/3/issue",),
    )
    tok = "rubygems_" + hexs(48)
    add("rubygems-api-key", GITLEAKS, f"gem push: credentials {tok}", tok)
    tok = "pul-" + hexs(40)
    add("pulumi-access-token", GITLEAKS, f"PULUMI_ACCESS_TOKEN={tok}", tok)
    tok = lower(14) + ".atlasv1." + _pick(string.ascii_lowercase + string.digits + "-_", 67)
    add(
        "terraform-cloud-token",
        GITLEAKS,
        f'credentials "app.terraform.io" {{\n  token = "{tok}"\n}}',
        tok,
        keep=('credentials "app.terraform.io"',),
    )
    ref = "cmVmdGtuOjAxOjE3" + b62(48)
    add(
        "jfrog-reference-token",
        "https://github.com/trufflesecurity/trufflehog/tree/v3.93.7/pkg/detectors/"
        "artifactoryreferencetoken",
        f"+ jf rt ping --url https://acme.jfrog.io/artifactory --access-token={ref}",
        ref,
        keep=("https://acme.jfrog.io/artifactory",),
    )
    key = "AKCp8" + b62(68)
    add(
        "jfrog-api-key",
        GITLEAKS,
        f"X-JFrog-Art-Api: {key}",
        key,
    )

    api_key, api_secret = upper(16), _pick(B62 + "+/", 64)
    add(
        "confluent-jaas-config",
        DOC_CONFLUENT,
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{api_key}" password="{api_secret}";',
        api_secret,
        keep=("PlainLoginModule required",),
    )
    api_secret = _pick(B62 + "+/", 64)
    add(
        "confluent-cloud-api-secret",
        DOC_CONFLUENT,
        f"CONFLUENT_CLOUD_API_SECRET={api_secret}",
        api_secret,
        env=("CONFLUENT_CLOUD_API_SECRET", api_secret),
    )

    # --- payments, messaging and SaaS ------------------------------------------------------------
    for prefix in ("sk_live_", "rk_live_", "sk_test_"):
        tok = prefix + b62(99)
        add(
            f"stripe-{prefix[:-1].replace('_', '-')}",
            DOC_STRIPE,
            f"stripe.error.AuthenticationError: Invalid API Key provided: {tok}",
            tok,
            keep=("stripe.error.AuthenticationError",),
        )
    tok = "whsec_" + b62(32)
    add(
        "stripe-webhook-secret",
        DOC_STRIPE_WEBHOOK,
        f"webhook endpoint we_1 signing with {tok}",
        tok,
        env=("STRIPE_WEBHOOK_SIGNING", tok),
    )
    tok = "SG." + _pick(B62 + "_-", 22) + "." + _pick(B62 + "_-", 43)
    add(
        "sendgrid-api-key",
        GITLEAKS,
        f"smtp: AUTH PLAIN apikey {tok} 235 Authentication successful",
        tok,
        keep=("235 Authentication successful",),
    )
    sid, secret = "SK" + hexs(32), b62(32)
    add(
        "twilio-api-key",
        GITLEAKS,
        f"twilio client {sid} sending SMS to on-call",
        sid,
        keep=("sending SMS",),
    )
    acct, auth_token = "AC" + hexs(32), hexs(32)
    add(
        "twilio-account-auth",
        TRUFFLEHOG + "twilio",
        f"+ curl -sS -u {acct}:{auth_token} https://api.twilio.com/2010-04-01/Accounts/{acct}/Messages.json",
        auth_token,
    )
    key = "key-" + hexs(32)
    add(
        "mailgun-api-key",
        GITLEAKS,
        f"mailgun: sending via api:{key}@api.mailgun.net",
        key,
        keep=("api.mailgun.net",),
    )
    key = hexs(32)
    add("datadog-api-key", DOC_DATADOG, f"DD_API_KEY={key}", key, env=("DD_API_KEY", key))
    key = hexs(40)
    add(
        "datadog-app-key-header",
        DOC_DATADOG,
        f'+ curl -sS -H "DD-APPLICATION-KEY: {key}" https://api.datadoghq.com/api/v1/monitor',
        key,
        keep=("https://api.datadoghq.com/api/v1/monitor",),
    )
    key = hexs(32)
    add(
        "datadog-yaml-api-key",
        DOC_DATADOG,
        f"## datadog.yaml\napi_key: {key}\nsite: datadoghq.com",
        key,
        keep=("site: datadoghq.com",),
    )
    key = "NRAK-" + upper(27)
    add("newrelic-user-key", GITLEAKS, f"newrelic: NerdGraph query with {key} failed 401", key)
    key = "NRII-" + _pick(string.ascii_letters + string.digits + "-", 32)
    add(
        "newrelic-insert-key",
        GITLEAKS,
        f'+ curl -H "X-Insert-Key: {key}" https://insights-collector.newrelic.com/v1/accounts/1/events',
        key,
    )
    key = "sk-ant-api03-" + _pick(B62 + "_-", 93) + "AA"
    add(
        "anthropic-api-key",
        GITLEAKS,
        f"anthropic.AuthenticationError: invalid x-api-key {key}",
        key,
        keep=("anthropic.AuthenticationError",),
    )
    key = "sk-svcacct-" + b62(58) + "T3BlbkFJ" + b62(58)
    add("openai-service-account-key", DOC_OPENAI, f"client = OpenAI(api_key='{key}')", key)
    tok = "hf_" + _pick(string.ascii_letters, 34)
    add(
        "huggingface-git-credential",
        DOC_HF,
        f"+ git clone https://user:{tok}@huggingface.co/meta-llama/Llama-3.1-8B",
        tok,
        keep=("huggingface.co/meta-llama/Llama-3.1-8B",),
    )
    for prefix in ("shpat_", "shpss_"):
        tok = prefix + hexs(32)
        add(f"shopify-{prefix[:-1]}", GITLEAKS, f"shopify webhook auth {tok}", tok)
    tok = "EAAA" + _pick(B62 + "_-", 60)
    add("square-access-token", GITLEAKS, f"square: charging with {tok}", tok)
    tok = "sq0csp-" + _pick(B62 + "_-", 43)
    add("square-oauth-secret", TRUFFLEHOG + "squareapp", f"square app secret {tok}", tok)
    tok = "HRKU-AA" + _pick(B62 + "_-", 58)
    add("heroku-api-key", GITLEAKS, f"heroku: logged in with {tok}", tok)
    tok = "dop_v1_" + hexs(64)
    add(
        "digitalocean-pat",
        GITLEAKS,
        f"+ doctl auth init --access-token {tok}",
        tok,
        args=("auth", "init", "--access-token", tok),
    )
    tok = "lin_api_" + b62(40)
    add("linear-api-key", GITLEAKS, f"linear: creating incident issue with {tok}", tok)
    tok = "secret_" + b62(43)
    add("notion-integration-secret", DOC_NOTION, f"notion client auth={tok}", tok)
    tok = "ntn_" + _pick(string.digits, 11) + b62(35)
    add("notion-ntn-token", GITLEAKS, f"notion: postmortem page written with {tok}", tok)
    bot_id, bot_secret = _pick(string.digits, 10), "AA" + _pick(B62 + "_-", 33)
    add(
        "telegram-bot-token",
        DOC_TELEGRAM,
        f"POST https://api.telegram.org/bot{bot_id}:{bot_secret}/sendMessage 200",
        bot_secret,
        keep=("/sendMessage 200",),
    )
    hook_id, hook_token = _pick(string.digits, 19), _pick(B62 + "_-", 68)
    add(
        "discord-webhook",
        DOC_DISCORD_WEBHOOK,
        f"+ curl -H 'Content-Type: application/json' -d '{{\"content\":\"GPU node down\"}}' "
        f"https://discord.com/api/webhooks/{hook_id}/{hook_token}",
        hook_token,
        keep=("GPU node down",),
    )
    bot = "MT" + b62(24) + "." + b62(6) + "." + _pick(B62 + "_-", 38)
    add(
        "discord-bot-token",
        DOC_DISCORD_AUTH,
        f"discord gateway: Authorization: Bot {bot}",
        bot,
    )
    tok = "sntryu_" + hexs(64)
    add("sentry-user-token", GITLEAKS, f"sentry-cli: using auth token {tok}", tok)
    claims = b64url(
        b'{"iat":1795000000.0,"url":"https://sentry.io","region_url":"https://us.sentry.io","org":"acme"}'
    )
    tok = f"sntrys_{claims}_{b62(43)}"
    add(
        "sentry-org-token",
        GITLEAKS,
        f"SENTRY_AUTH_TOKEN={tok}",
        tok,
        env=("SENTRY_AUTH_TOKEN", tok),
    )
    dsn_key = hexs(32)
    add(
        "sentry-dsn",
        DOC_SENTRY_DSN,
        f"sentry_sdk.init(dsn='https://{dsn_key}@o4507.ingest.us.sentry.io/4507')",
        dsn_key,
        keep=("ingest.us.sentry.io/4507",),
    )
    tok = "glc_" + b64(60).replace("=", "")
    add("grafana-cloud-token", GITLEAKS, f"grafana-agent: remote_write auth {tok}", tok)
    tok = "glsa_" + b62(32) + "_" + hexs(8)
    add(
        "grafana-service-account-token",
        GITLEAKS,
        f'+ curl -H "Authorization: Bearer {tok}" https://grafana.corp.example.com/api/dashboards',
        tok,
    )
    tok = "dapi" + hexs(32)
    add(
        "databricks-token",
        GITLEAKS,
        f"databricks-cli: host=https://dbc-1.cloud.databricks.com profile=DEFAULT {tok}",
        tok,
        keep=("profile=DEFAULT",),
    )
    tok = "dp.pt." + b62(43)
    add("doppler-token", GITLEAKS, f"+ doppler run --token {tok} -- ./serve.sh", tok)
    tok = "ops_eyJ" + b64(240).replace("=", "")
    add("1password-service-account", GITLEAKS, f"op: signed in with {tok}", tok)
    tok = "PMAK-" + hexs(24) + "-" + hexs(34)
    add("postman-api-key", GITLEAKS, f"newman run collection.json --postman-api-key {tok}", tok)
    tok = "pscale_tkn_" + b62(43)
    add("planetscale-token", GITLEAKS, f"pscale: service token {tok} created", tok)
    tok = "oauth:" + lower(30)
    add(
        "twitch-irc-token",
        DOC_TWITCH_IRC,
        f"> PASS {tok}\n> NICK gpubot",
        tok,
        keep=("NICK gpubot",),
    )
    tok = "00" + _pick(B62 + "_-", 40)
    add(
        "okta-api-token",
        DOC_OKTA,
        f"GET https://acme.okta.com/api/v1/users Authorization: SSWS {tok} 200",
        tok,
        keep=("https://acme.okta.com/api/v1/users",),
    )
    key = "AGE-SECRET-KEY-1" + _pick("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
    add(
        "age-secret-key",
        DOC_AGE,
        f"# created: 2026-11-29T03:00:00Z\n# public key: age1{lower(58)}\n{key}",
        key,
        keep=("# created: 2026-11-29T03:00:00Z",),
    )
    wg, psk = b64(32), b64(32)
    add(
        "wireguard-private-key",
        DOC_WIREGUARD,
        f"[Interface]\nAddress = 10.8.0.2/24\nPrivateKey = {wg}\n\n[Peer]\nPublicKey = {b64(32)}\n"
        f"PresharedKey = {psk}\nEndpoint = vpn.corp.example.com:51820",
        wg,
        psk,
        keep=("Endpoint = vpn.corp.example.com:51820", "Address = 10.8.0.2/24"),
    )
    block, body = pem("PGP PRIVATE KEY BLOCK")
    add("pgp-private-key-block", DOC_PGP, f"gpg --export-secret-keys -a:\n{block}", *body)
    tok = "ico-" + b62(32)
    add("infracost-api-key", GITLEAKS, f"infracost: INFRACOST_API_KEY set ({tok})", tok)
    tok = "v1.0-" + hexs(24) + "-" + hexs(146)
    add("cloudflare-origin-ca-key", GITLEAKS, f"cloudflare origin ca key {tok}", tok)
    tok = "dt0c01." + upper(24) + "." + upper(64)
    add("dynatrace-token", GITLEAKS, f"oneagent: Api-Token {tok} accepted", tok)
    key = "LTAI" + b62(20)
    add("alibaba-access-key-id", GITLEAKS, f"aliyun oss: AccessKeyId {key}", key)

    # --- Google Cloud --------------------------------------------------------------------------
    tok = "ya29.a0" + _pick(B62 + "_-", 180)
    add(
        "gcp-access-token",
        DOC_GCP_TOKENS,
        f"GET https://storage.googleapis.com/storage/v1/b/models/o?access_token={tok} 200",
        tok,
    )
    tok = "1//0g" + _pick(B62 + "_-", 98)
    add(
        "gcp-refresh-token",
        DOC_GCP_TOKENS,
        f"gcloud: refreshed credentials from {tok} for oncall@example.com",
        tok,
        keep=("oncall@example.com",),
    )
    key_id, sa_body = hexs(40), pem_body(8)
    sa_key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(sa_body) + "\n-----END PRIVATE KEY-----\n"
    service_account = {
        "type": "service_account",
        "project_id": "gpu-prod-4242",
        "private_key_id": key_id,
        "private_key": sa_key,
        "client_email": "trainer@gpu-prod-4242.iam.gserviceaccount.com",
        "client_id": _pick(string.digits, 21),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    add(
        "gcp-service-account-json",
        DOC_GCP_SA_KEY,
        json.dumps(service_account, indent=2),
        key_id,
        *sa_body,
        keep=("trainer@gpu-prod-4242.iam.gserviceaccount.com",),
    )
    secret = "GOCSPX-" + _pick(B62 + "_-", 28)
    add(
        "gcp-oauth-client-secret",
        DOC_GITHUB_SECRET_SCANNING,
        f"oauth client secret {secret}",
        secret,
    )

    # --- Azure ---------------------------------------------------------------------------------
    account_key = b64(64)
    conn = (
        "DefaultEndpointsProtocol=https;AccountName=gpumodels;"
        f"AccountKey={account_key};EndpointSuffix=core.windows.net"
    )
    add(
        "azure-storage-connection-string",
        DOC_AZURE_STORAGE,
        f"AZURE_STORAGE_CONNECTION_STRING={conn}",
        account_key,
        env=("AZURE_STORAGE_CONNECTION_STRING", conn),
        keep=("AccountName=gpumodels", "EndpointSuffix=core.windows.net"),
    )
    account_key = b64(64)
    add(
        "azure-storage-account-key",
        DOC_AZURE_STORAGE,
        f"+ az storage blob upload --account-name gpumodels --account-key {account_key} -f m.bin",
        account_key,
        keep=("--account-name gpumodels",),
    )
    sb_key = b64(32)
    add(
        "azure-service-bus-key",
        DOC_AZURE_SERVICE_BUS,
        "Endpoint=sb://gpu-events.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        f"SharedAccessKey={sb_key}",
        sb_key,
        keep=("SharedAccessKeyName=RootManageSharedAccessKey",),
    )
    sas_sig = b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
    add(
        "azure-sas-signature",
        DOC_AZURE_SAS,
        "GET https://gpumodels.blob.core.windows.net/models/llama.bin?sv=2022-11-02&ss=b&srt=o"
        f"&sp=r&se=2026-11-30T03:00:00Z&spr=https&sig={sas_sig} 403",
        sas_sig,
        keep=("se=2026-11-30T03:00:00Z",),
    )
    ad_secret = _pick(B62, 3) + _pick(string.digits, 1) + "Q~" + _pick(B62 + "_~.-", 34)
    add(
        "azure-ad-client-secret",
        GITLEAKS,
        f"msal: acquiring token for client 1b2c3d4e with secret {ad_secret}",
        ad_secret,
    )
    listing = [
        {"creationTime": "2026-11-29T03:00:00Z", "keyName": "key1", "permissions": "FULL",
         "value": b64(64)},
    ]  # fmt: skip
    add(
        "azure-storage-keys-list",
        DOC_AZURE_STORAGE_KEYS,
        "+ az storage account keys list -n gpumodels\n" + json.dumps(listing, indent=2),
        listing[0]["value"],
        keep=('"keyName": "key1"',),
    )

    # --- AWS, beyond keys ----------------------------------------------------------------------
    ssm_value = "nvapi-" + _pick(B62 + "_-", 64)
    ssm = {
        "Parameter": {
            "Name": "/gpu-prod/ngc",
            "Type": "SecureString",
            "Value": ssm_value,
            "Version": 3,
            "ARN": "arn:aws:ssm:us-west-2:123456789012:parameter/gpu-prod/ngc",
        }
    }
    add(
        "ssm-securestring",
        DOC_SSM_GET,
        "+ aws ssm get-parameter --name /gpu-prod/ngc --with-decryption\n"
        + json.dumps(ssm, indent=4),
        ssm_value,
        keep=('"Name": "/gpu-prod/ngc"',),
    )
    ssm_value = password() + b62(12)
    ssm_line = dict(ssm, Parameter={**ssm["Parameter"], "Value": ssm_value})
    add("ssm-securestring-line", DOC_SSM_GET, json.dumps(ssm_line), ssm_value)
    sm_password = password()
    secret_string = json.dumps({"username": "app", "password": sm_password, "host": "db.internal"})
    add(
        "secretsmanager-secret-string",
        DOC_SECRETS_MANAGER,
        json.dumps(
            {
                "ARN": "arn:aws:secretsmanager:us-west-2:123456789012:secret:prod/db-AbCdEf",
                "Name": "prod/db",
                "SecretString": secret_string,
                "VersionStages": ["AWSCURRENT"],
            },
            indent=4,
        ),
        sm_password,
        keep=('"Name": "prod/db"',),
    )
    sm_binary = b64(48)
    add(
        "secretsmanager-secret-binary",
        DOC_SECRETS_MANAGER,
        '{"Name": "prod/tls", "SecretBinary": "'
        + sm_binary
        + '", "VersionStages": ["AWSCURRENT"]}',
        sm_binary,
    )
    fwo = "FwoGZXIvYXdzE" + b64(210).replace("=", "")
    add(
        "aws-session-token-fwo",
        DOC_AWS_KEYS,
        f"botocore: using temporary credentials {fwo} expiring 2026-11-29T09:00:00Z",
        fwo,
        keep=("2026-11-29T09:00:00Z",),
    )
    iq = "IQoJb3JpZ2luX2VjE" + b64(300).replace("=", "")
    sk3 = b62(40)
    process_out = json.dumps(
        {"Version": 1, "AccessKeyId": "ASIA" + upper(16), "SecretAccessKey": sk3,
         "SessionToken": iq, "Expiration": "2026-11-29T09:00:00Z"}
    )  # fmt: skip
    add(
        "aws-credential-process-output",
        DOC_CREDENTIAL_PROCESS,
        f"credential_process /usr/local/bin/aws-sso-creds returned {process_out}",
        sk3,
        iq,
    )
    eks = "k8s-aws-v1." + b64url(_rng.randbytes(420))
    add(
        "eks-token-bearer",
        DOC_EKS_TOKEN,
        f"GET https://ABC.gr7.us-west-2.eks.amazonaws.com/api/v1/nodes with token {eks} 401",
        eks,
    )

    # --- credentials on command lines ---------------------------------------------------------
    pw = password()
    add(
        "mysql-p",
        DOC_MYSQL_PASSWORD,
        f"+ mysql -h db.internal -u root -p{pw} -e 'SHOW PROCESSLIST'",
        pw,
        keep=("SHOW PROCESSLIST",),
    )
    pw = password()
    add(
        "mysql-password-flag",
        DOC_MYSQL_PASSWORD,
        f"+ mysqldump --user=backup --password={pw} app > /backup/app.sql",
        pw,
        keep=("/backup/app.sql",),
    )
    pw = password()
    add(
        "sshpass-p",
        DOC_SSHPASS,
        f"+ sshpass -p '{pw}' ssh -o StrictHostKeyChecking=no ec2-user@10.0.1.2 nvidia-smi",
        pw,
        keep=("nvidia-smi",),
    )
    pw = password()
    add(
        "ldapsearch-w",
        DOC_LDAPSEARCH,
        f'+ ldapsearch -x -H ldaps://ldap.corp -D "cn=svc,dc=corp" -w {pw} -b dc=corp uid=oncall',
        pw,
        keep=("uid=oncall",),
    )
    pw = password()
    add(
        "pgpassword-env",
        DOC_PGPASSWORD,
        f"+ PGPASSWORD={pw} psql -h db.internal -U app -c 'select 1'",
        pw,
        keep=("select 1",),
    )
    pw = password()
    add(
        "redis-cli-a",
        DOC_REDIS_CLI,
        f"+ redis-cli -h cache.internal -a {pw} --no-auth-warning INFO memory",
        pw,
        keep=("INFO memory",),
    )
    pw = password()
    add(
        "redis-conf-requirepass",
        DOC_REDIS_CONF,
        f"# /etc/redis/redis.conf\nbind 0.0.0.0\nrequirepass {pw}\nmaxmemory 2gb",
        pw,
        keep=("maxmemory 2gb",),
    )
    pw = password()
    add(
        "rediscli-auth-env",
        DOC_REDIS_CLI,
        f"+ REDISCLI_AUTH={pw} redis-cli -h cache.internal INFO replication",
        pw,
        keep=("INFO replication",),
    )
    pw = password()
    add(
        "openssl-passin",
        DOC_OPENSSL_PASS,
        f"+ openssl pkcs12 -export -in c.pem -inkey k.pem -out c.p12 -passout pass:{pw}",
        pw,
        keep=("-out c.p12",),
    )
    secret = b62(40)
    add(
        "client-secret-flag",
        DOC_ENV,
        f"+ oauth2-proxy --client-id=gpu-dash --client-secret {secret} --provider=oidc",
        secret,
        args=("--client-id=gpu-dash", "--client-secret", secret, "--provider=oidc"),
        keep=("--provider=oidc",),
    )
    tok = b62(48)
    add(
        "token-flag-space",
        DOC_ENV,
        f"+ kubectl --server https://10.0.0.10:6443 --token {tok} get nodes",
        tok,
        keep=("get nodes",),
    )

    # --- HTTP -----------------------------------------------------------------------------------
    sess, csrf = b62(32), b62(32)
    add(
        "cookie-header",
        DOC_COOKIE,
        f"> Cookie: sessionid={sess}; csrftoken={csrf}; theme=dark",
        sess,
        csrf,
        keep=("> Cookie: sessionid=",),
    )
    sess = b64url(_rng.randbytes(48))
    add(
        "set-cookie-header",
        DOC_COOKIE,
        f"< Set-Cookie: _oauth2_proxy={sess}; Path=/; Expires=Sun, 29 Nov 2026 09:00:00 GMT;"
        " HttpOnly",
        sess,
        keep=("Path=/",),
    )
    response = hexs(32)
    add(
        "digest-authorization",
        DOC_DIGEST,
        'Authorization: Digest username="admin", realm="bmc", nonce="'
        + hexs(16)
        + f'", uri="/redfish/v1", response="{response}", qop=auth',
        response,
        keep=('uri="/redfish/v1"',),
    )
    tok = b62(40)
    add(
        "token-authorization",
        DOC_PAGERDUTY_REST,
        f'+ curl -H "Authorization: Token token={tok}" https://api.pagerduty.com/incidents',
        tok,
    )
    key = b62(32)
    add(
        "pagerduty-routing-key",
        DOC_PAGERDUTY_EVENTS,
        "+ curl -X POST https://events.pagerduty.com/v2/enqueue -d "
        f'\'{{"routing_key":"{key}","event_action":"trigger"}}\'',
        key,
        keep=('"event_action":"trigger"',),
    )
    key = hexs(32)
    add(
        "pagerduty-integration-key",
        DOC_PAGERDUTY_EVENTS,
        f"receivers:\n- name: pagerduty-gpu\n  pagerduty_configs:\n  - service_key: {key}",
        key,
        keep=("name: pagerduty-gpu",),
    )
    key = lower(32)
    add(
        "pagerduty-integration-url",
        DOC_PAGERDUTY_EVENTS,
        f"alert sent: POST https://events.pagerduty.com/integration/{key}/enqueue 202 Accepted",
        key,
        keep=("202 Accepted",),
    )
    key = b62(40)
    add(
        "api-key-header",
        DOC_ENV,
        f"+ curl -H 'X-API-Key: {key}' https://inference.corp.example.com/v1/models",
        key,
        keep=("https://inference.corp.example.com/v1/models",),
    )
    tok = "hvs.CAESI" + b62(86)
    add(
        "vault-token-header",
        DOC_VAULT,
        f'+ curl -H "X-Vault-Token: {tok}" https://vault.corp:8200/v1/secret/data/ngc',
        tok,
    )
    tok = "s." + b62(24)
    add("vault-legacy-token", DOC_VAULT, f"vault: token s.{tok[2:6]}… renewed: {tok}", tok)

    # --- database URLs and connection strings ------------------------------------------------
    for scheme in ("mongodb+srv", "mysql", "amqp"):
        pw = password()
        add(
            f"{scheme.replace('+', '-')}-url",
            DOC_URL,
            f"connecting to {scheme}://app:{pw}@db.corp.example.com/app failed: timeout",
            pw,
            keep=("db.corp.example.com/app",),
        )
    pw = password()
    add(
        "redis-url-password-only",
        DOC_URL,
        f"REDIS_URL=redis://:{pw}@cache.internal:6379/0",
        pw,
        env=("REDIS_URL", f"redis://:{pw}@cache.internal:6379/0"),
        keep=("cache.internal:6379/0",),
    )
    pw = password()
    add(
        "jdbc-url-password",
        DOC_JDBC,
        f"jdbc:postgresql://db.internal:5432/app?user=app&password={pw}&ssl=true",
        pw,
        keep=("db.internal:5432/app",),
    )
    pw = password()
    add(
        "odbc-pwd",
        DOC_ODBC,
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:db.internal,1433;"
        f"Uid=sa;Pwd={pw};Encrypt=yes",
        pw,
        keep=("Uid=sa", "Encrypt=yes"),
    )

    # --- whole Kubernetes objects ----------------------------------------------------------------
    data_pw, data_key = b64(18), b64(32)
    add(
        "k8s-secret-data",
        DOC_K8S_SECRET,
        "",
        data_pw,
        data_key,
        document={
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "db-creds", "namespace": "inference"},
            "data": {"password": data_pw, "tls.key": data_key},
        },
    )
    string_pw = password()
    add(
        "k8s-secret-string-data",
        DOC_K8S_SECRET,
        "",
        string_pw,
        document={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "app"},
            "stringData": {"config.ini": f"user=app\nsecret={string_pw}\n"},
        },
    )
    dockercfg = base64.b64encode(
        json.dumps({"auths": {"nvcr.io": {"auth": b64(40)}}}).encode()
    ).decode()
    add(
        "k8s-dockerconfigjson",
        DOC_K8S_SECRET,
        "",
        dockercfg,
        document={
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": "ngc-secret", "namespace": "gpu-operator"},
            "data": {".dockerconfigjson": dockercfg},
        },
    )
    cm_token = b62(40)
    add(
        "configmap-secret-key",
        DOC_K8S_SECRET,
        "",
        cm_token,
        document={
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "notifier"},
            "data": {"webhook-token": cm_token, "channel": "#gpu-oncall"},
        },
        keep=("#gpu-oncall",),
    )
    applied_key = b62(40)
    applied = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "karpenter"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": applied_key}],
                        }
                    ]
                }
            }
        },
    }
    add(
        "last-applied-configuration",
        DOC_LAST_APPLIED,
        "",
        applied_key,
        document={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "karpenter",
                "namespace": "kube-system",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied) + "\n"
                },
            },
            "spec": {"replicas": 2},
        },
        keep=("karpenter",),
    )
    _file_format_secrets(add)
    _block_secrets(add)
    return out


def _block_secrets(add: Callable[..., None]) -> None:
    """Blocks whose secret lines hold no trigger word, only the opener above them does: the
    lines are masked for the block they are in, also where each is a log record of its own
    (no user name here holds a word such as `-user` that a rule looks for)."""
    p1, p2, p3 = password(), password(), password()
    add(
        "chpasswd-list-plain-users",
        DOC_CHPASSWD,
        f"#cloud-config\nchpasswd:\n  expire: false\n  list: |\n    root:{p1}\n"
        f"    admin2:{p2}\n    backup:{p3}\nssh_pwauth: false",
        p1,
        p2,
        p3,
        keep=("admin2:", "backup:", "ssh_pwauth: false"),
    )
    p1, p2, p3 = password(), password(), password()
    add(
        "chpasswd-list-items-plain-users",
        DOC_CHPASSWD,
        f"chpasswd:\n  list:\n    - root:{p1}\n    - admin2:{p2}\n    - backup:{p3}\n"
        "  expire: false",
        p1,
        p2,
        p3,
        keep=("- admin2:", "- backup:", "expire: false"),
    )
    p1, p2, p3 = password(), password(), password()
    add(
        "chpasswd-random-output-users",
        DOC_CHPASSWD_RANDOM,
        f"Set the following 'random' passwords\n\nroot:{p1}\nadmin2:{p2}\nbackup:{p3}",
        p1,
        p2,
        p3,
        keep=("admin2:", "backup:"),
    )


DOC_TOML = "https://toml.io/en/v1.0.0#string"
DOC_SPRING = "https://docs.spring.io/spring-boot/appendix/application-properties/index.html"
DOC_MAVEN_SETTINGS = "https://maven.apache.org/settings.html#servers"
DOC_DOTNET_CONFIG = (
    "https://learn.microsoft.com/en-us/dotnet/framework/configure-apps/file-schema/appsettings/"
)
DOC_TERRAFORM_VAULT = "https://registry.terraform.io/providers/hashicorp/vault/latest/docs"
DOC_MY_CNF = "https://dev.mysql.com/doc/refman/8.4/en/option-files.html"
DOC_PGPASS = "https://www.postgresql.org/docs/17/libpq-pgpass.html"
DOC_CURL_VERBOSE = "https://curl.se/docs/manpage.html#-v"
DOC_BASH_DECLARE = (
    "https://www.gnu.org/software/bash/manual/html_node/Bash-Builtins.html#index-declare"
)
DOC_DOCKER_RUN_ENV = "https://docs.docker.com/reference/cli/docker/container/run/#env"
DOC_KUBECTL_SECRET = (
    "https://kubernetes.io/docs/tasks/configmap-secret/managing-secret-using-kubectl/"
)
DOC_HELM_SET = "https://helm.sh/docs/helm/helm_upgrade/"
DOC_PG_CREATE_ROLE = "https://www.postgresql.org/docs/17/sql-createrole.html"
DOC_MYSQL_CREATE_USER = "https://dev.mysql.com/doc/refman/8.4/en/create-user.html"
DOC_NGINX_HEADER = "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_set_header"
DOC_PHP_DEFINE = "https://www.php.net/manual/en/function.define.php"
DOC_AWS_CONFIGURE_SET = "https://docs.aws.amazon.com/cli/latest/reference/configure/set.html"
DOC_TELEGRAM_NEUTRAL = DOC_TELEGRAM
DOC_REDIS_AUTH = "https://redis.io/docs/latest/commands/auth/"
DOC_WANDB = "https://docs.wandb.ai/ref/cli/wandb-login/"
DOC_STS_XML = (
    "https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html"
)
DOC_SUDO = "https://www.sudo.ws/docs/man/sudo.man/#S"
DOC_IPSEC = "https://docs.strongswan.org/docs/latest/config/ipsecSecrets.html"
DOC_SSM_PUT = "https://docs.aws.amazon.com/cli/latest/reference/ssm/put-parameter.html"
DOC_SNMP = "https://net-snmp.sourceforge.io/docs/man/snmpcmd.html"
DOC_JENKINS_CLI = "https://www.jenkins.io/doc/book/managing/cli/"


def _file_format_secrets(add: Callable[..., None]) -> None:
    """Secrets in the configuration files, shells and tools a node or an operator's script
    writes them in: TOML, Java properties, XML, HCL, INI sections, .pgpass, curl -v, quoted
    exports, `declare -x`, docker -e, kubectl --from-literal, helm --set, SQL, nginx."""
    pw = password()
    add(
        "toml-password",
        DOC_TOML,
        f'[database]\nhost = "db1"\npassword = "{pw}"',
        pw,
        keep=('host = "db1"',),
    )
    pw = password()
    add(
        "java-properties-password",
        DOC_SPRING,
        f"spring.datasource.url=jdbc:postgresql://db1:5432/app\nspring.datasource.password={pw}",
        pw,
        keep=("spring.datasource.url",),
    )
    pw = password()
    add(
        "maven-settings-xml-password",
        DOC_MAVEN_SETTINGS,
        f"<server>\n  <id>nexus</id>\n  <username>deploy</username>\n  <password>{pw}</password>"
        "\n</server>",
        pw,
        keep=("<username>deploy</username>",),
    )
    pw = password()
    add(
        "dotnet-xml-password",
        DOC_DOTNET_CONFIG,
        f'<add key="Db" value="ok"/>\n<Password>{pw}</Password>',
        pw,
        keep=('<add key="Db"',),
    )
    token = "hvs." + b62(90)
    add(
        "terraform-hcl-token",
        DOC_TERRAFORM_VAULT,
        f'provider "vault" {{\n  address = "https://vault:8200"\n  token = "{token}"\n}}',
        token[4:],
        keep=('address = "https://vault:8200"',),
    )
    pw = password()
    add(
        "my-cnf-client-password",
        DOC_MY_CNF,
        f"[client]\nuser = root\npassword = {pw}",
        pw,
        keep=("user = root",),
    )
    pw = password()
    add("pgpass-line", DOC_PGPASS, f"db1.internal:5432:app:ops:{pw}", pw, keep=("db1.internal",))
    tok = b62(40)
    add(
        "curl-verbose-authorization",
        DOC_CURL_VERBOSE,
        f"> GET /v1/models HTTP/1.1\n> Host: api.internal\n> Authorization: Bearer {tok}",
        tok,
        keep=("> Host: api.internal",),
    )
    tok = b62(32)
    add("export-quoted-token", DOC_BASH_DECLARE, f"export SERVICE_TOKEN='{tok}'", tok)
    pw = password()
    add("declare-x-password", DOC_BASH_DECLARE, f'declare -x DB_PASSWORD="{pw}"', pw)
    pw = password()
    add(
        "docker-run-env-password",
        DOC_DOCKER_RUN_ENV,
        f"docker run -d -e DB_PASSWORD={pw} -e DB_HOST=db1 registry/app:1.4",
        pw,
        keep=("DB_HOST=db1",),
    )
    value = b62(24)
    add(
        "kubectl-from-literal",
        DOC_KUBECTL_SECRET,
        f"kubectl create secret generic db-dsn --from-literal=dsn={value} -n app",
        value,
        keep=("db-dsn",),
    )
    pw = password()
    add(
        "helm-set-password",
        DOC_HELM_SET,
        f"helm upgrade --install redis bitnami/redis --set auth.password={pw} --set replica=2",
        pw,
        keep=("replica=2",),
    )
    pw = _pick(string.ascii_letters, 8) + _pick(string.digits, 4)
    add(
        "sql-create-role-password",
        DOC_PG_CREATE_ROLE,
        f"CREATE ROLE ops WITH LOGIN PASSWORD '{pw}';",
        pw,
        keep=("CREATE ROLE ops",),
    )
    pw = _pick(string.ascii_letters, 8) + _pick(string.digits, 4)
    add(
        "mysql-identified-by",
        DOC_MYSQL_CREATE_USER,
        f"CREATE USER 'ops'@'%' IDENTIFIED BY '{pw}';",
        pw,
        keep=("CREATE USER",),
    )
    basic = base64.b64encode(f"ops:{password()}".encode()).decode()
    add(
        "nginx-authorization-header",
        DOC_NGINX_HEADER,
        f'proxy_set_header Authorization "Basic {basic}";',
        basic,
        keep=("proxy_set_header",),
    )
    pw = password()
    add("php-define-password", DOC_PHP_DEFINE, f"define('DB_PASSWORD', '{pw}');", pw)
    key = b62(40)
    add(
        "aws-configure-set",
        DOC_AWS_CONFIGURE_SET,
        f"aws configure set aws_secret_access_key {key} --profile gpu",
        key,
        keep=("--profile gpu",),
    )
    pw = password()
    add(
        "redis-monitor-auth",
        DOC_REDIS_AUTH,
        f'1764900000.123 [0 10.0.1.2:51234] "AUTH" "{pw}"',
        pw,
        keep=("10.0.1.2:51234",),
    )
    pw = password()
    add(
        "redis-cli-prompt-auth",
        DOC_REDIS_AUTH,
        f"127.0.0.1:6379> AUTH default {pw}",
        pw,
        keep=("127.0.0.1:6379>",),
    )
    pw = password().replace("!", "x")
    add(
        "echo-to-sudo-stdin",
        DOC_SUDO,
        f"echo {pw} | sudo -S systemctl restart kubelet",
        pw,
        keep=("systemctl restart kubelet",),
    )
    pw = password().replace("!", "x")
    add(
        "echo-to-password-stdin",
        DOC_DOCKER_LOGIN,
        f"echo '{pw}' | docker login -u ops --password-stdin registry.internal",
        pw,
        keep=("registry.internal",),
    )
    pw = password()
    add("ipsec-psk", DOC_IPSEC, f'10.0.1.2 10.0.9.9 : PSK "{pw}"', pw, keep=("10.0.9.9",))
    key = b62(32)
    add(
        "curl-verbose-api-key",
        DOC_CURL_VERBOSE,
        f"> POST /v1/chat HTTP/1.1\n> X-Api-Key: {key}",
        key,
        keep=("POST /v1/chat",),
    )
    pw = password()
    add(
        "ssm-put-parameter-securestring",
        DOC_SSM_PUT,
        f"aws ssm put-parameter --name /db/pw --type SecureString --value '{pw}' --overwrite",
        pw,
        keep=("--overwrite",),
    )
    community = lower(16)
    add(
        "snmp-community",
        DOC_SNMP,
        f"snmpwalk -v2c -c {community} 10.0.1.2 ifTable",
        community,
        keep=("ifTable",),
    )
    tok = hexs(34)
    add(
        "jenkins-cli-auth",
        DOC_JENKINS_CLI,
        f"java -jar jenkins-cli.jar -s https://ci.internal/ -auth ops:{tok} build nightly",
        tok,
        keep=("build nightly",),
    )
    pw = password()
    add(
        "openssl-enc-k",
        DOC_OPENSSL_PASS,
        f"openssl enc -d -aes-256-cbc -k '{pw}' -in model.enc",
        pw,
        keep=("model.enc",),
    )
    secret_key, session = b62(40), "IQoJb3JpZ2luX2VjE" + b64(120).replace("=", "")
    add(
        "aws-sts-xml-credentials",
        DOC_STS_XML,
        "<Credentials>\n  <AccessKeyId>ASIA" + upper(16) + "</AccessKeyId>\n"
        f"  <SecretAccessKey>{secret_key}</SecretAccessKey>\n"
        f"  <SessionToken>{session}</SessionToken>\n"
        "  <Expiration>2026-12-05T10:00:00Z</Expiration>\n</Credentials>",
        secret_key,
        session,
        keep=("<Expiration>2026-12-05T10:00:00Z</Expiration>",),
    )
    for kind, prefix, body, source in (
        ("xai-api-key", "xai-", b62(80), "https://docs.x.ai/docs/api-reference#authentication"),
        (
            "figma-pat",
            "figd_",
            _pick(B62 + "_-", 40),
            "https://developers.figma.com/docs/rest-api/authentication/",
        ),
        ("sourcegraph-token", "sgp_", hexs(40), GITLEAKS),
        ("brevo-api-key", "xkeysib-", hexs(64) + "-" + b62(16), GITLEAKS),
        (
            "mapbox-secret-token",
            "sk.eyJ",
            b64url(b'1":"ops","a":"ck12"}') + "." + b62(22),
            "https://docs.mapbox.com/help/glossary/access-token/",
        ),
        ("netlify-pat", "nfp_", b62(36), TRUFFLEHOG),
    ):
        add(
            kind, source, f"notify: using key {prefix}{body} for alerts", body, keep=("for alerts",)
        )
    hook = f"{uuid()}@{uuid()}/IncomingWebhook/{hexs(32)}/{uuid()}"
    add(
        "teams-webhook",
        GITLEAKS,
        f"alertmanager: POST https://acme.webhook.office.com/webhookb2/{hook} 200",
        hook,
        keep=("acme.webhook.office.com",),
    )
    key = hexs(40)
    add("wandb-login", DOC_WANDB, f"+ wandb login --relogin {key}", key, keep=("--relogin",))
    bot = f"{_pick(string.digits, 9)}:AA{_pick(B62 + '_-', 33)}"
    add("telegram-bot-token-neutral-key", DOC_TELEGRAM_NEUTRAL, f"bot: {bot}", bot[12:])


def look_alikes() -> list[LookAlike]:
    """Text a node or cluster writes that holds a trigger word or a secret-like shape and
    must survive redaction byte for byte."""
    gpu, mig, digest = "GPU-" + uuid(), "MIG-" + uuid(), hexs(64)
    cert, _ = pem("CERTIFICATE")
    public, _ = pem("PUBLIC KEY", 4)
    cert_b64 = base64.b64encode(cert.encode()).decode()
    items = [
        ("gpu-uuid", f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu})"),
        ("mig-uuid", f"  MIG 3g.40gb     Device  0: (UUID: {mig})"),
        (
            "instance-id",
            'launched nodeclaim {"NodeClaim":"gpu-a-x7k2p","instance-id":"i-0a1b2c3d4e5f67890"}',
        ),
        (
            "image-digest",
            f'PullImage "nvcr.io/nvidia/k8s-device-plugin@sha256:{digest}" returns image',
        ),
        ("iam-role-arn", '"roleArn": "arn:aws:iam::123456789012:role/KarpenterNodeRole-gpu-prod"'),
        (
            "secret-not-found",
            'MountVolume.SetUp failed for volume "creds" : secret "ngc-secret" not found',
        ),
        (
            "secret-volume-path",
            'Operation for "{volumeName:kubernetes.io/secret/9f1c-ngc-secret podName:9f1c}" failed',
        ),
        (
            "credential-provider-flag",
            (
                "--image-credential-provider-config=/etc/eks/image-credential-provider/config.json "
                "--image-credential-provider-bin-dir=/etc/eks/image-credential-provider"
            ),
        ),
        ("discovery-hash", f"--discovery-token-ca-cert-hash sha256:{digest}"),
        ("secret-name", "secretName: ngc-secret"),
        ("automount-token", "automountServiceAccountToken: false"),
        (
            "token-counts",
            (
                "INFO metrics: prompt_tokens=512 max_tokens=4096 completion_tokens: 77 "
                "avg_generation_throughput=181.2 tokens/s"
            ),
        ),
        ("pod-uid", f'"Error syncing pod, skipping" podUID="{uuid()}"'),
        ("ecr-image", "image: 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.10"),
        ("certificate", cert),
        ("public-key", public),
        ("certificate-base64", f"certificate-authority-data: {cert_b64}"),
        ("token-prose", "Failed to get token: connection refused"),
        (
            "docker-uid",
            "docker run -u 1000:1000 nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04 nvidia-smi",
        ),
        ("url-with-at", "see https://example.com:8443/path@v2 or mail oncall@example.com"),
        (
            "containerd-ids",
            f'ImageCreate event name:"sha256:{digest}" labels:{{io.cri-containerd.image: managed}}',
        ),
        ("ssh-public-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + b62(43) + " admin@bastion"),
        ("token-file-flag", "--token-file=/var/run/secrets/kubernetes.io/serviceaccount/token"),
        (
            "projected-token-path",
            "AWS_WEB_IDENTITY_TOKEN_FILE=/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
        ),
        (
            "tokenizer",
            (
                "Initializing an LLM engine with config: model='meta-llama/Llama-3.1-8B-Instruct', "
                "tokenizer='meta-llama/Llama-3.1-8B-Instruct', tokenizer_mode=auto"
            ),
        ),
        ("bootstrap-kubeconfig", "--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig"),
        ("nodepool-hash", 'karpenter.sh/nodepool-hash: "6821555240594823858"'),
        (
            "amz-date-params",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20261129T030000Z&X-Amz-Expires=3600",
        ),
        (
            "word-ending-sk",
            "systemd[1]: Started task-proj-42-cleanup.service and disk-by-uuid.mount",
        ),
        ("lowercase-sk-name", "nodepool sk-prod-cluster-gpu-nodepool-7f9c2 is ready"),
        ("hf-transfer", "HF_HUB_ENABLE_HF_TRANSFER=1"),
        ("password-authentication", "PasswordAuthentication no"),
        ("etc-passwd", "root:x:0:0:root:/root:/bin/bash"),
        ("sha256sums", f"{digest}  nodes/ip-10-0-1-2/kubelet.log"),
        ("manifest-counts", '"counts": {"nodes/n1/kubelet.log": {"bearer-token": 2}}'),
        (
            "driver-version",
            "| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |",
        ),
        ("boot-id", f"-- Boot {hexs(32)} --"),
        ("nvidia-caps", "cr--r--r-- 1 root root 236, 1 Nov 29 03:00 /dev/nvidia-caps/nvidia-cap1"),
        ("cloud-config-no-list", "#cloud-config\nssh_pwauth: false\nchpasswd: {expire: false}"),
        (
            "sts-identity",
            '{"UserId": "AROA'
            + upper(17)
            + ':i-0a1b2c3d4e5f67890", "Account": "123456789012", "Arn": '
            '"arn:aws:sts::123456789012:assumed-role/KarpenterNodeRole/i-0a1b2c3d4e5f67890"}',
        ),
        ("image-pull-secrets", '"imagePullSecrets": [{"name": "ngc-secret"}]'),
        ("tls-key-flag", "--tls-private-key-file=/var/lib/kubelet/pki/kubelet-server-current.pem"),
        (
            "create-secret-from-file",
            "kubectl create secret generic db-creds --from-file=password.txt",
        ),
        (
            "metric-label",
            'kubelet_volume_stats_available_bytes{persistentvolumeclaim="secret-store"} 1.2e+10',
        ),
        ("base64-config", '"config": "eyJrZXkiOiJ2YWx1ZSJ9"'),
        ("ec2-hostname", "ip-10-0-37-142.us-west-2.compute.internal Ready"),
        ("token-expiry", "tokenExpirationSeconds: 86400"),
        # --- real-shaped node and cluster text: each names where its shape was seen --------
        # kubernetes/kubernetes@v1.31.0 pkg/kubelet/kubelet_node_status.go (journalctl -u kubelet)
        (
            "kubelet-register-node",
            "Nov 29 03:00:00 ip-10-0-37-142.us-west-2.compute.internal kubelet[2345]: I1129 "
            '03:00:00.123456    2345 kubelet_node_status.go:76] "Attempting to register node" '
            'node="ip-10-0-37-142.us-west-2.compute.internal"',
        ),
        # kubernetes/kubernetes@v1.31.0
        #  staging/src/k8s.io/apiserver/pkg/authentication/request/bearertoken/bearertoken.go
        (
            "apiserver-invalid-bearer",
            'E1129 03:00:00.000000      11 authentication.go:73] "Unable to authenticate the '
            'request" err="[invalid bearer token, service account token has expired]"',
        ),
        # containerd/containerd@v1.7.27 internal/cri/server/images/image_pull.go (journalctl -u
        #  containerd)
        (
            "containerd-pull-returns",
            'time="2026-11-29T03:00:00.123456789Z" level=info msg="PullImage '
            '\\"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.10\\" returns image '
            f'reference \\"sha256:{digest}\\""',
        ),
        # containerd/containerd@v1.7.27 core/remotes/docker/resolver.go
        (
            "containerd-authorization-failed",
            'time="2026-11-29T03:00:00Z" level=info msg="trying next host" error="pull access '
            "denied, repository does not exist or may require authorization: server message: "
            'insufficient_scope: authorization failed" host=nvcr.io',
        ),
        # canonical/cloud-init@24.4 cloudinit/config/cc_set_passwords.py (cloud-init.log)
        (
            "cloud-init-pwauth",
            "2026-11-29 03:00:01,234 - cc_set_passwords.py[DEBUG]: Leaving SSH config "
            "'PasswordAuthentication' unchanged. ssh_pwauth=None",
        ),
        # canonical/cloud-init@24.4 cloudinit/cmd/main.py (cloud-init-output.log)
        (
            "cloud-init-banner",
            "Cloud-init v. 24.4-0ubuntu1~24.04.1 running 'modules:config' at Sat, 29 Nov 2026 "
            "03:00:00 +0000. Up 12.34 seconds.",
        ),
        # canonical/cloud-init@24.4 tools/write-ssh-key-fingerprints (cloud-init-output.log)
        (
            "cloud-init-ssh-host-keys",
            "ec2: #############################################################\n"
            "ec2: -----BEGIN SSH HOST KEY FINGERPRINTS-----\n"
            f"ec2: 256 SHA256:{b62(43)} root@ip-10-0-37-142.us-west-2.compute.internal (ECDSA)\n"
            f"ec2: 256 SHA256:{b62(43)} root@ip-10-0-37-142.us-west-2.compute.internal (ED25519)\n"
            "ec2: -----END SSH HOST KEY FINGERPRINTS-----\n"
            "ec2: #############################################################\n"
            "-----BEGIN SSH HOST KEY KEYS-----\n"
            f"ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBB{b62(88)}= "
            "root@ip-10-0-37-142.us-west-2.compute.internal\n"
            f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b62(43)} "
            "root@ip-10-0-37-142.us-west-2.compute.internal\n"
            "-----END SSH HOST KEY KEYS-----",
        ),
        # sudo-project/sudo@SUDO_1_9_15p5 plugins/sudoers/logging.c (journalctl _COMM=sudo)
        (
            "sudo-journal-pwd",
            "Nov 29 03:00:00 ip-10-0-37-142 sudo[4567]:  ec2-user : TTY=pts/0 ; "
            "PWD=/home/ec2-user ; USER=root ; COMMAND=/bin/systemctl restart kubelet",
        ),
        # openssh/openssh-portable@V_9_6_P1 auth.c (journalctl -u sshd)
        (
            "sshd-failed-password",
            "Nov 29 03:00:00 ip-10-0-37-142 sshd[8910]: Failed password for invalid user admin "
            "from 10.0.0.1 port 51234 ssh2",
        ),
        # kubernetes/kubernetes@v1.31.0 staging/src/k8s.io/component-base/cli/flag/flags.go
        # (kubelet at -v=1 and above logs every flag it started with)
        (
            "kubelet-flag-lines",
            'I1129 03:00:00.000000    2345 flags.go:64] FLAG: --anonymous-auth="false"\n'
            "I1129 03:00:00.000000    2345 flags.go:64] FLAG: "
            '--authentication-token-webhook="true"\n'
            'I1129 03:00:00.000000    2345 flags.go:64] FLAG: --authorization-mode="Webhook"\n'
            'I1129 03:00:00.000000    2345 flags.go:64] FLAG: --tls-private-key-file=""\n'
            "I1129 03:00:00.000000    2345 flags.go:64] FLAG: "
            '--bootstrap-kubeconfig="/var/lib/kubelet/bootstrap-kubeconfig"',
        ),
        # kubernetes/kubernetes@v1.31.0 staging/src/k8s.io/client-go/tools/cache/reflector.go
        (
            "kubelet-secret-forbidden",
            'W1129 03:00:00.000000    2345 reflector.go:561] object-"inference"/"ngc-secret": '
            'failed to list *v1.Secret: secrets "ngc-secret" is forbidden: User '
            '"system:node:ip-10-0-37-142.us-west-2.compute.internal" cannot list resource '
            '"secrets" in API group "" in the namespace "inference"',
        ),
        # kubernetes/kubernetes@v1.31.0 pkg/kubelet/kubelet_pods.go (getPullSecretsForPod)
        (
            "kubelet-pull-secret-missing",
            'I1129 03:00:00.000000    2345 kubelet_pods.go:1082] "Unable to retrieve pull secret, '
            'the image pull may not succeed." pod="inference/vllm-0" secret="" '
            'err="secret \\"ngc-secret\\" not found"',
        ),
        # containerd/containerd@v1.7.27 core/remotes/docker/authorizer.go (registry token fetch)
        (
            "containerd-oauth-token-401",
            'level=error msg="PullImage \\"nvcr.io/nim/x:1\\" failed" error="failed to authorize: '
            "failed to fetch oauth token: unexpected status from GET request to "
            "https://authn.nvidia.com/token?scope=repository%3Anim%2Fx%3Apull&service=registry: "
            '401 Unauthorized"',
        ),
        # aws/amazon-ssm-agent@3.3.1142.0 agent/credentialproviders (amazon-ssm-agent.log)
        (
            "ssm-agent-credential-refresher",
            "2026-11-29 03:00:00.0000 INFO [CredentialRefresher] Next credential rotation will be "
            "in 29.99 minutes",
        ),
        # a webhook's caBundle is base64 of a certificate: provider prefixes inside it are no
        # token (kubernetes.io/docs/reference/kubernetes-api/extend-resources/
        # mutating-webhook-configuration-v1/)
        (
            "provider-prefixes-inside-base64",
            f'"caBundle": "{b64(30)}+dapi{hexs(32)}/AKCp{b62(69)}+SG.{b62(22)}.{b62(43)}='
            f'{b64(30)}"',
        ),
        # Kubernetes object names may hold a provider prefix after a dash (kubernetes.io/docs/
        # concepts/overview/working-with-objects/names/)
        ("provider-prefix-in-a-name", f"cronjob.batch/rotate-tskey-{lower(24)} created"),
        # nvidia-smi -q, driver 580 (docs.nvidia.com/deploy/nvidia-smi/index.html)
        (
            "nvidia-smi-q",
            "==============NVSMI LOG==============\n\nDriver Version                        : "
            "580.95.05\nCUDA Version                          : 13.0\n\nAttached GPUs       "
            f"                  : 8\nGPU 00000000:53:00.0\n    Product Name                  "
            f"        : NVIDIA H100 80GB HBM3\n    Serial Number                         : "
            f"1654922001234\n    GPU UUID                              : {gpu}\n    VBIOS "
            "Version                         : 96.00.89.00.01\n    MIG Mode\n        Current "
            "                          : Enabled\n        Pending                           : "
            "Enabled",
        ),
        # nvidia-smi mig -lgip, driver 580 (docs.nvidia.com/datacenter/tesla/mig-user-guide/)
        (
            "nvidia-smi-mig-lgip",
            "+-------------------------------------------------------------------------------+\n"
            "| GPU instance profiles:                                                        |\n"
            "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |\n"
            "|                                Free/Total   GiB              CE    JPEG  OFA  |\n"
            "|===============================================================================|\n"
            "|   0  MIG 1g.10gb         19     7/7        9.75       No     16     1     0   |\n"
            "|                                                               1     1     0   |\n"
            "+-------------------------------------------------------------------------------+",
        ),
        # nvidia-smi -L with MIG devices (docs.nvidia.com/datacenter/tesla/mig-user-guide/)
        (
            "nvidia-smi-l",
            f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu})\n"
            f"  MIG 1g.10gb     Device  0: (UUID: {mig})",
        ),
        # NVIDIA/open-gpu-kernel-modules@580.95.05 (dmesg: Xid 79)
        (
            "nvrm-xid",
            "[ 1234.567890] NVRM: Xid (PCI:0000:53:00): 79, pid='<unknown>', name=<unknown>, "
            "GPU has fallen off the bus.",
        ),
        # aws/karpenter-provider-aws@v1.4.0 pkg/controllers/nodeclaim/lifecycle (controller JSON
        #  log)
        (
            "karpenter-launched",
            '{"level":"INFO","time":"2026-11-29T03:00:00.123Z","logger":"controller",'
            '"message":"launched nodeclaim","commit":"1ad0d78","controller":"nodeclaim.lifecycle",'
            '"controllerGroup":"karpenter.sh","controllerKind":"NodeClaim","NodeClaim":'
            f'{{"name":"gpu-a-x7k2p"}},"reconcileID":"{uuid()}","provider-id":'
            '"aws:///us-west-2a/i-0a1b2c3d4e5f67890","instance-type":"p5.48xlarge","zone":'
            '"us-west-2a","capacity-type":"on-demand","allocatable":{"cpu":"191450m",'
            '"memory":"1938410Mi","nvidia.com/gpu":"8","vpc.amazonaws.com/efa":"32"}}',
        ),
        # aws/karpenter-provider-aws@v1.4.0 pkg/providers/amifamily (SSM alias resolution log)
        (
            "karpenter-ssm-ami",
            '{"level":"DEBUG","message":"discovered ssm parameter","parameter":"/aws/service/eks/'
            'optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id","value":'
            '"ami-0123456789abcdef0"}',
        ),
        # aws ssm get-parameter of a String parameter
        #  (docs.aws.amazon.com/cli/latest/reference/ssm/get-parameter.html)
        (
            "ssm-string-parameter",
            '{\n    "Parameter": {\n        "Name": "/aws/service/eks/optimized-ami/1.31/'
            'amazon-linux-2023/x86_64/nvidia/recommended/image_id",\n        "Type": "String",\n'
            '        "Value": "ami-0123456789abcdef0",\n        "Version": 42\n    }\n}',
        ),
        # aws ec2 describe-instances
        #  (docs.aws.amazon.com/cli/latest/reference/ec2/describe-instances.html)
        (
            "ec2-key-pair-and-tags",
            '{"InstanceId": "i-0a1b2c3d4e5f67890", "ImageId": "ami-0123456789abcdef0", '
            '"KeyName": "gpu-oncall", "Tags": [{"Key": "Name", "Value": "gpu-prod-p5"}, '
            '{"Key": "karpenter.sh/nodepool", "Value": "gpu-a"}]}',
        ),
        # IMDS instance identity document
        #  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-identity-documents.html)
        (
            "imds-identity-document",
            '{\n  "accountId" : "123456789012",\n  "architecture" : "x86_64",\n  '
            '"availabilityZone" : "us-west-2a",\n  "imageId" : "ami-0123456789abcdef0",\n  '
            '"instanceId" : "i-0a1b2c3d4e5f67890",\n  "instanceType" : "p5.48xlarge",\n  '
            '"pendingTime" : "2026-11-29T03:00:00Z",\n  "region" : "us-west-2"\n}',
        ),
        # kubernetes-sigs/aws-iam-authenticator@v0.6.29 pkg/server/server.go (authenticator log)
        (
            "iam-authenticator-access-granted",
            'time="2026-11-29T03:00:00Z" level=info msg="access granted" arn="arn:aws:iam::'
            '123456789012:role/KarpenterNodeRole-gpu-prod" client="127.0.0.1:51234" method=POST '
            "path=/authenticate sts=sts.us-west-2.amazonaws.com "
            'username="system:node:ip-10-0-37-142.us-west-2.compute.internal"',
        ),
        # aws/amazon-vpc-cni-k8s@v1.19.2 pkg/ipamd/ipamd.go (ipamd.log)
        (
            "ipamd-eni",
            '{"level":"info","ts":"2026-11-29T03:00:00.000Z","caller":"ipamd/ipamd.go:1234",'
            '"msg":"Added ENI(eni-0123456789abcdef0)\'s IP 10.0.37.143 to datastore"}',
        ),
        # ARNs of a Secrets Manager secret and an SSM parameter
        #  (docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html)
        (
            "secret-arns",
            '"SecretId": "arn:aws:secretsmanager:us-west-2:123456789012:secret:prod/db-AbCdEf", '
            '"parameter": "arn:aws:ssm:us-west-2:123456789012:parameter/gpu-prod/ngc"',
        ),
        # vllm-project/vllm@v0.6.3 vllm/engine/metrics.py (engine stats line)
        (
            "vllm-throughput",
            "INFO 11-29 03:00:00 metrics.py:351] Avg prompt throughput: 512.3 tokens/s, Avg "
            "generation throughput: 181.2 tokens/s, Running: 8 reqs, Swapped: 0 reqs",
        ),
        # oauth2-proxy/oauth2-proxy@v7.7.1 pkg/sessions (log line)
        (
            "session-cookie-prose",
            "[2026/11/29 03:00:00] [oauthproxy.go:900] session cookie not set, redirecting",
        ),
        # opencontainers/runc@v1.2.4 signals.go (signal forwarding)
        ("runc-signal", 'level=debug msg="forwarding signal" sig=15 pid=2345'),
        # NVIDIA/nccl@v2.23.4 and aws/aws-ofi-nccl@v1.13.0 (NCCL_DEBUG=INFO)
        (
            "nccl-efa",
            "ip-10-0-37-142:2345:2401 [0] NCCL INFO NET/OFI Selected Provider is efa "
            "(found 32 nics)",
        ),
        # journalctl -o export fields
        #  (www.freedesktop.org/software/systemd/man/latest/systemd.journal-fields.html)
        (
            "journal-ids",
            f"_BOOT_ID={hexs(32)}\n_MACHINE_ID={hexs(32)}\n_SYSTEMD_UNIT=kubelet.service",
        ),
        # kubectl get node -o json resourceVersion and provider id
        #  (kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions)
        (
            "resource-version",
            '"resourceVersion": "987654321", "providerID": "aws:///us-west-2a/i-0a1b2c3d4e5f67890"',
        ),
        # kubectl describe node taints
        #  (kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/)
        (
            "gpu-taints",
            "Taints:             nvidia.com/gpu=present:NoSchedule\n"
            "                    karpenter.sh/disrupted:NoSchedule",
        ),
        # Azure storage account name without its key
        #  (learn.microsoft.com/en-us/azure/storage/common/storage-account-overview)
        ("azure-account-name", "AccountName=gpumodels;EndpointSuffix=core.windows.net"),
        # file formats: settings named like secrets, paths, ConfigMap literals, SQL without
        # a password, a header passed through by variable
        ("xml-password-policy", "<passwordPolicy>strict</passwordPolicy>"),
        ("xml-token-file", "<tokenFile>/var/run/secrets/eks.amazonaws.com/token</tokenFile>"),
        (
            "kubectl-configmap-literal",
            "kubectl create configmap tuning --from-literal=mode=fast --from-literal=gpus=8",
        ),
        ("sql-role-without-password", "ALTER ROLE ops VALID UNTIL 'infinity';"),
        ("php-define-setting", "define('WP_DEBUG', 'false');"),
        ("aws-configure-region", "aws configure set region us-west-2 --profile gpu"),
        ("nginx-pass-through-header", "proxy_set_header Authorization $http_authorization;"),
        ("postgres-listen-address", "listen_addresses = '*'  # port = 5432"),
        ("telegram-short-id", "chat 1:AA-update applied to 12:AAbb"),
        ("auth-failed", "AUTH failed: WRONGPASS invalid username-password pair"),
        ("echo-to-tee", "echo 'vm.max_map_count=262144' | sudo tee /etc/sysctl.d/99-gpu.conf"),
        (
            "password-stdin-from-variable",
            "echo $REGISTRY_PASSWORD | docker login --password-stdin x",
        ),
        (
            "ssm-put-parameter-string",
            "aws ssm put-parameter --name /app/mode --value fast --type String",
        ),
        ("ipsec-rsa-key-file", "%any : RSA /etc/ipsec.d/private/node.pem"),
        ("snmp-v3", "snmpwalk -v3 -l authPriv -u monitor 10.0.1.2 ifTable"),
    ]
    out = [LookAlike(kind, text) for kind, text in items]
    # kubectl get node -o json of a Karpenter GPU node (kubernetes.io/docs/reference/kubernetes-api/
    # cluster-resources/node-v1/, aws/karpenter-provider-aws@v1.4.0 pkg/apis/v1/labels.go)
    out.append(
        LookAlike(
            "kubectl-node-json",
            "",
            document={
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "ip-10-0-37-142.us-west-2.compute.internal",
                    "resourceVersion": "987654321",
                    "uid": uuid(),
                    "annotations": {
                        "alpha.kubernetes.io/provided-node-ip": "10.0.37.142",
                        "karpenter.k8s.aws/ec2nodeclass-hash": "1234567890123456789",
                        "karpenter.sh/nodepool-hash-version": "v3",
                        "node.alpha.kubernetes.io/ttl": "0",
                    },
                    "labels": {
                        "karpenter.k8s.aws/instance-gpu-name": "h100",
                        "karpenter.sh/capacity-type": "on-demand",
                        "node.kubernetes.io/instance-type": "p5.48xlarge",
                        "nvidia.com/mig.config": "all-1g.10gb",
                    },
                },
                "spec": {
                    "providerID": "aws:///us-west-2a/i-0a1b2c3d4e5f67890",
                    "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                },
                "status": {
                    "nodeInfo": {
                        "bootID": uuid(),
                        "machineID": hexs(32),
                        "systemUUID": uuid(),
                        "containerRuntimeVersion": "containerd://1.7.27",
                    },
                    "images": [
                        {
                            "names": [f"nvcr.io/nvidia/k8s-device-plugin@sha256:{digest}"],
                            "sizeBytes": 123456789,
                        }
                    ],
                },
            },
        )
    )
    # a pod using IRSA: the token is a file, the role an ARN (docs.aws.amazon.com/eks/latest/
    # userguide/pod-configuration.html)
    out.append(
        LookAlike(
            "irsa-pod-env",
            "",
            document=_pod(
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                    "env": [
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                        {
                            "name": "AWS_ROLE_ARN",
                            "value": "arn:aws:iam::123456789012:role/trainer-irsa",
                        },
                        {
                            "name": "AWS_WEB_IDENTITY_TOKEN_FILE",
                            "value": "/var/run/secrets/eks.amazonaws.com/serviceaccount/token",
                        },
                        {"name": "AWS_STS_REGIONAL_ENDPOINTS", "value": "regional"},
                        {"name": "NCCL_SOCKET_IFNAME", "value": "^lo,docker"},
                    ],
                    "envFrom": [{"secretRef": {"name": "wandb"}}],
                }
            ),
        )
    )
    out.append(
        LookAlike(
            "k8s-secret-volume",
            "",
            document={
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "vllm"},
                "spec": {
                    "automountServiceAccountToken": False,
                    "volumes": [
                        {"name": "creds", "secret": {"secretName": "db-creds", "defaultMode": 420}},
                        {
                            "name": "token",
                            "projected": {
                                "sources": [
                                    {
                                        "serviceAccountToken": {
                                            "path": "token",
                                            "expirationSeconds": 3607,
                                        }
                                    }
                                ]
                            },
                        },
                    ],
                    "containers": [
                        {
                            "name": "vllm",
                            "args": [
                                "--tokenizer",
                                "meta-llama/Llama-3.1-8B",
                                "--max-num-batched-tokens",
                                "8192",
                            ],
                            "env": [
                                {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "1"},
                                {"name": "PWD", "value": "/workspace"},
                                {
                                    "name": "HF_TOKEN",
                                    "valueFrom": {
                                        "secretKeyRef": {"name": "hf-token", "key": "token"}
                                    },
                                },
                            ],
                        }
                    ],
                },
            },
        )
    )
    return out


def real_evidence_files() -> list[Path]:
    """The data files of the real-evidence corpus (`tests/corpus`, see its README): benign
    text and JSON in the shapes nodes, tools and clusters write, each with its source line."""
    corpus = Path(__file__).parents[1] / "corpus"
    return sorted(
        p
        for p in corpus.rglob("*")
        if p.is_file() and p.name not in ("README.md", "SOURCE") and p.suffix != ".source"
    )


# --- renderings ---------------------------------------------------------------------------------


class _Block(str):
    """A string YAML writes as a literal block (|), as a ConfigMap's script is written."""


def _block(dumper: yaml.SafeDumper, value: _Block) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style="|")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Block, _block)


def _document(case: Secret | LookAlike) -> dict[str, Any]:
    """The Kubernetes object a case lives in."""
    if case.document is not None:
        return case.document
    if isinstance(case, Secret) and case.env is not None:
        name, value = case.env
        return _pod(
            {
                "name": "app",
                "image": "app:1",
                "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": name, "value": value}],
            }
        )
    if isinstance(case, Secret) and case.args is not None:
        return _pod({"name": "app", "image": "app:1", "args": list(case.args)})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "node-setup"},
        "data": {"setup.sh": case.text},
    }


def _yaml_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _yaml_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_yaml_ready(v) for v in value]
    if isinstance(value, str) and "\n" in value:
        return _Block(value)
    return value


def as_text(case: Secret | LookAlike) -> str:
    body = (
        case.text
        if case.text
        else yaml.dump(_yaml_ready(_document(case)), Dumper=_Dumper, sort_keys=False, width=10**9)
    )
    return f"Cloud-init v. 24.4 running 'modules:final'\n{body}\nCloud-init v. 24.4 finished\n"


def as_json_line(case: Secret | LookAlike) -> str:
    """A container log line (json-file driver) or a structured log record: one line."""
    if not case.text:
        return json.dumps(_document(case), separators=(",", ":")) + "\n"
    return (
        json.dumps(
            {"log": case.text + "\n", "stream": "stderr", "time": "2026-11-29T03:00:00.123456789Z"}
        )
        + "\n"
    )


def as_json_indented(case: Secret | LookAlike) -> str:
    return json.dumps(_document(case), indent=2) + "\n"


def as_yaml(case: Secret | LookAlike) -> str:
    return yaml.dump(_yaml_ready(_document(case)), Dumper=_Dumper, sort_keys=False, width=10**9)


def with_nuls(case: Secret | LookAlike) -> bytes:
    """A log after an unclean shutdown: NULs where unwritten blocks were, then the text."""
    text = as_text(case).encode()
    return b"\x00" * 9000 + text + b"\x00" * 512 + text


RENDERINGS: dict[str, Callable[[Secret | LookAlike], str | bytes]] = {
    "text": as_text,
    "json-line": as_json_line,
    "json-indented": as_json_indented,
    "yaml": as_yaml,
    "nul": with_nuls,
}


def file_name(rendering: str) -> str:
    return {
        "json-line": "app.log",
        "json-indented": "objects.json",
        "yaml": "objects.yaml",
        **encodings.FILE_NAMES,
    }.get(rendering, "cloud-init-output.log")


def read_back(rendering: str, out: bytes) -> bytes:
    """`out` as an engineer reads it (see `secret_encodings.read_back`)."""
    return encodings.read_back(rendering, out)


def leaked(case: Secret, out: bytes) -> list[str]:
    """The case's secrets that survive in `out`, in any spelling a renderer used."""
    text = out.decode("utf-8", "replace")
    found = []
    for secret in case.secrets:
        spellings = {secret, json.dumps(secret)[1:-1], json.dumps(json.dumps(secret))[1:-1]}
        if any(s in text for s in spellings):
            found.append(secret[:24] + "…")
    return found


# --- hostile text: what made redaction quadratic ------------------------------------------------


def mask_cpu_seconds(data: bytes, name: str = "kubelet.log") -> float:
    """The least CPU time of three maskings of `data` as file `name`: the linear-time tests
    compare it for an input and one four times its size."""
    from mignurse.collect.redact import mask_secrets

    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        mask_secrets(name, data)
        best = min(best, time.process_time() - started)
    return best


HOSTILE_PATTERNS: dict[str, str] = {
    # each BEGIN without its END once made the engine look ahead 256 KiB
    "pem-begin-lines": "-----BEGIN RSA PRIVATE KEY-----\n",
    "pem-begin-then-base64": "-----BEGIN EC PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1LfVLPH\n",
    "pem-begin-one-line": "-----BEGIN X----- ",
    "token-words-one-line": "token ",
    # a user flag then -p, over and over on one line (the -u USER … -p PASSWORD rule)
    "user-then-p-one-line": "-u a -p -u b c d -p ",
    "header-names-one-line": "X-A-Token: X-B-Key: ",
    "password-run": "password",
    "password-equals-run": "password=",
    "quoted-key-unterminated": '"password": "',
    "secret-name-value-pairs": 'name: X_SECRET\n  value: "',
    "jwt-prefix-run": "eyJ",
    "jwt-parts-run": "eyJhbGciOiJSUzI1NiJ9.",
    "url-scheme-run": "://a:b",
    "curl-user-run": "curl -u a:",
    "login-run": "login -p ",
    "chpasswd-pairs": "chpasswd a:b ",
    "bearer-run": "Bearer ",
    "bootstrap-lookalike": "token abcdef.0123456789abcdefg ",
    "sk-run": "sk-",
    "provider-prefix-run": "glpat-",
    "provider-prefix-words": "sk_live_a dapi0 SG.x ",
    "cli-password-run": "mysql -p",
    "cli-command-words": "sshpass ldapsearch openssl ",
    "cookie-pairs": "Cookie: a=b; ",
    "cookie-run": "Set-Cookie: ",
    "telegram-run": "1:AA",
    "securestring-values": '"Type": "SecureString", "Value": "',
    "connection-string-run": ";Password=",
    "azure-secret-run": "abc1Q~",
    "digest-run": "Digest response=",
    "vault-okta-line": "vault okta token s.",
    "escaped-json-string": '\\"password\\": \\"\\\\\\"',
    "github-run": "ghp_",
    "amz-run": "X-Amz-Signature=",
    "secret-kind-json": '{"kind":"Secret","data":{"a":"',
    "secret-kind-yaml": "kind: Secret\ndata:\n",
    "yaml-data-columns": "kind: Secret\n  data:\n",
    "chpasswd-yaml": "chpasswd:\n  list: |\n",
    "dashes": "-----",
    "nul-and-keywords": "\x00password\x00token\x00",
    "escaped-newlines": "\\npassword: \\n",
    # a PEM body broken by other records: each line read once
    "pem-begin-then-records": "-----BEGIN RSA PRIVATE KEY-----\nDec 05 h k[1]: other\n",
    "xml-secret-tags": "<password><password>x</pass",
    "pgpass-colons": "a:5432:b:c:d:",
    "sql-identified-run": "IDENTIFIED BY '",
    "cookie-pairs-no-space": "Cookie: a=b;c=d;",
    "from-literal-run": "secret --from-literal=a=",
    "named-call-run": "('DB_PASSWORD', '",
    "telegram-colon-aa": "123456789:AA",
    "echo-pipe-run": "echo a | ",
    "redis-auth-quoted-run": '"AUTH" "',
    "ipsec-psk-run": ': PSK "',
    "snmp-community-run": "snmpwalk -c ",
}


def hostile_text(pattern: str, size: int) -> bytes:
    """`size` bytes of one hostile pattern, repeated (one long line when it has no newline)."""
    unit = HOSTILE_PATTERNS[pattern].encode()
    return (unit * (size // len(unit) + 1))[:size]


# the encodings beyond text, JSON and YAML (they render with the helpers above)
from . import secret_encodings as encodings  # noqa: E402

RENDERINGS.update(encodings.RENDERINGS)
