"""Secrets that sit across log records, inside query strings and form bodies, after klog's
header, in doubly escaped text, and tokens under neutral keys: masked where they are, and the
records, headers and settings around them kept as an engineer needs to read them."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from hostile.secrets_corpus import mask_cpu_seconds

from mignurse.collect.archives import mask_file
from mignurse.collect.redact import MARKER, Redactor, mask_secrets

KLOG = "I1205 03:12:44.123456    2211 server.go:123] "
JOURNAL = "Dec 05 03:12:44 ip-10-0-1-2 kubelet[2211]: "
JOURNAL_ISO = "2026-12-05T03:12:44+0000 ip-10-0-1-2 node-setup[2301]: "
CRI = "2026-12-05T03:12:44.123456789Z stdout F "
KEY_LINES = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "Z3Rlc3RrZXlib2R5bGluZXR3b2Zvcm15dGVzdGNhc2VzaGVyZWFuZHRoZXJlMTIz",
    "c2Vjb25kbGluZW9mdGhla2V5Ym9keWhlcmV0b29mb3JhbGx0aGVjYXNlcw==",
)


def _masked(name: str, text: str) -> str:
    return Redactor().redact(name, text.encode()).decode("utf-8", "surrogateescape")


def _key(label: str = "RSA PRIVATE KEY") -> list[str]:
    return [f"-----BEGIN {label}-----", *KEY_LINES, f"-----END {label}-----"]


@pytest.mark.parametrize("prefix", [JOURNAL, JOURNAL_ISO, KLOG, CRI, "[  12.345678] "])
def test_a_private_key_logged_line_by_line_keeps_every_record_prefix(prefix: str) -> None:
    lines = [*_key()[:2], "kubelet restarted, waiting for the key", *_key()[2:]]
    text = "".join(f"{prefix}{line}\n" for line in lines)
    out = _masked("journal/cloud-init.log", text)
    assert not any(line in out for line in KEY_LINES)
    # every record keeps its prefix, and the unrelated record between keeps its message
    assert out.splitlines() == [
        f"{prefix}-----BEGIN RSA PRIVATE KEY-----",
        f"{prefix}{MARKER}",
        f"{prefix}kubelet restarted, waiting for the key",
        f"{prefix}{MARKER}",
        f"{prefix}{MARKER}",
        f"{prefix}-----END RSA PRIVATE KEY-----",
    ]


def test_a_private_key_in_journalctl_json_output_stays_one_json_record_per_line() -> None:
    records = [
        {"__CURSOR": f"s=9f1c;i={n}", "MESSAGE": line, "_PID": "2301", "_COMM": "node-setup"}
        for n, line in enumerate(_key("OPENSSH PRIVATE KEY"))
    ]
    text = "".join(json.dumps(record) + "\n" for record in records)
    out = _masked("journal/node-setup.json", text)
    decoded = [json.loads(line) for line in out.splitlines()]
    assert [r["MESSAGE"] for r in decoded] == [
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        MARKER,
        MARKER,
        MARKER,
        "-----END OPENSSH PRIVATE KEY-----",
    ]
    assert [r["__CURSOR"] for r in decoded] == [r["__CURSOR"] for r in records]


def test_klog_header_on_a_line_about_chpasswd_is_not_a_user_password_pair() -> None:
    lines = [
        json.dumps({"log": f"{KLOG}running chpasswd for 2 users\n", "stream": "stderr"}),
        f"cloud-init {KLOG}running chpasswd for 2 users",
        f"{KLOG}echo 'root:Zx9-root-pw' | chpasswd",
    ]
    out = _masked("pods/cloud-init.log", "\n".join(lines) + "\n")
    assert out.count("server.go:123]") == 3 and "Zx9-root-pw" not in out
    assert f"root:{MARKER}' | chpasswd" in out


def test_a_public_certificate_cut_before_its_label_ends_is_kept() -> None:
    certificate = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU").decode()
    for cut in (16, 20, 24, 30):  # a logger's line limit, a partial line never finished
        for line in (
            f"{KLOG}loaded ca: {certificate[:cut]}\n",
            f"{CRI[:-2]}P certificate-authority-data: {certificate[:cut]}\n",
        ):
            assert _masked("pods/aws-node.log", line) == line
    private = base64.b64encode(b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA").decode()
    assert private not in _masked("kubeconfig", f"client-key-data: {private}\n")


@pytest.mark.parametrize("escape", ["\\\\n", "\\\\r\\\\n", "\\\\t", "\\n", "\\t"])
def test_a_secret_value_ends_at_an_escaped_line_break_in_doubly_escaped_text(escape: str) -> None:
    line_break = "\\\\n" if escape.startswith("\\\\") else "\\n"
    text = f'msg="user-data: #cloud-config{line_break}password: Zx9-pw{escape}ssh_pwauth: true"\n'
    out = _masked("cloud-init.log", text)
    assert out == text.replace("Zx9-pw", MARKER)


def test_a_tab_separated_value_ends_at_a_doubly_escaped_tab_or_line_break() -> None:
    text = "API_KEY\tZx9key\\\\tnext_field\nDB_PASSWORD\tZx9pw\\\\r\\\\nHOST=db1\n"
    assert _masked("env.txt", text) == text.replace("Zx9key", MARKER).replace("Zx9pw", MARKER)


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ("GET /login?cookie=sid=Zx9sessionval;HttpOnly&v=2 302", ";HttpOnly&v=2 302"),
        ("GET /login?a=1&cookie=sid=Zx9sessionval&v=2 302", "&v=2 302"),
        ("Set-Cookie: sid=Zx9sessionval;Path=/;HttpOnly", ";Path=/;HttpOnly"),
        ("Cookie: sid=Zx9sessionval; theme=Zx9themeval", ""),
        ("Cookie: sid=Zx9sessionval;theme=Zx9themeval", ""),
        ('{"Set-Cookie": ["sid=Zx9sessionval; Path=/; HttpOnly"]}', '; Path=/; HttpOnly"]}'),
    ],
)
def test_a_cookie_ends_where_a_cookie_header_cannot_go_on(line: str, kept: str) -> None:
    out = _masked("access.log", f"{KLOG}{line}\n")
    assert "Zx9" not in out and out.endswith(f"{kept}\n")


def test_an_unchanged_gzip_or_tarball_goes_out_with_the_bytes_it_came_with() -> None:
    log = gzip.compress(f"{JOURNAL}node Ready\n".encode(), mtime=1)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        member = tarfile.TarInfo("var/log/messages")
        member.size = len(b"node Ready\n")
        tar.addfile(member, io.BytesIO(b"node Ready\n"))
    for name, data in (("kubelet.log.1.gz", log), ("eks-logs.tar.gz", buffer.getvalue())):
        assert mask_file(name, data).data == data
        assert mask_secrets(name, data)[0] == data
        assert Redactor().mask(name, data).data == data
    secret = gzip.compress(f"{JOURNAL}password: Zx9-pw\n".encode(), mtime=1)
    assert b"Zx9-pw" not in gzip.decompress(mask_file("kubelet.log.2.gz", secret).data or b"")


# secrets that take several tokens: a command line, a header, a credentials file
SHAPES = {
    "mysql": ("mysql -h db1.internal -u root -pZx9mysqlPw -e 'select 1'", "Zx9mysqlPw"),
    "mysql-long": ("mysqldump --user=root --password=Zx9dumpPw appdb", "Zx9dumpPw"),
    "sshpass": ("sshpass -p Zx9sshPw ssh ec2-user@10.0.1.2 uptime", "Zx9sshPw"),
    "ldapsearch": ("ldapsearch -x -D cn=admin -w Zx9ldapPw -b dc=corp", "Zx9ldapPw"),
    "basic": ("Authorization: Basic " + base64.b64encode(b"ops:Zx9basic").decode(), "b3BzOlp4"),
    "bearer": ("Authorization: Bearer Zx9bearerTokenValue0123456789", "Zx9bearer"),
    "ini": (
        "[default]\naws_access_key_id = AKIAZX9EXAMPLE0KEY12\n"
        "aws_secret_access_key = Zx9/secretAccessKeyValue0123456789abcdEF\nregion = us-west-2\n",
        "Zx9/secret",
    ),
}


@pytest.mark.parametrize("encode", [quote_plus, lambda s: quote(s, safe="")], ids=["plus", "pct"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_secret_url_encoded_as_a_form_or_query_value_is_masked(
    shape: str, encode: Callable[[str], str]
) -> None:
    payload, secret = SHAPES[shape]
    form = f"cmd={encode(payload)}&x=1"
    out = _masked("access.log", f"{KLOG}GET /debug?{form} 404\n{KLOG}POST /run body={form}\n")
    decoded = out.replace("+", " ")
    assert secret not in decoded and encode(secret) not in out
    assert "&x=1 404" in out and out.count(MARKER) >= 2


def test_a_benign_query_string_with_plus_signs_is_unchanged() -> None:
    text = (
        f"{KLOG}GET /search?q=password+reset+policy&limit=10 200\n"
        f"{KLOG}GET /api?labelSelector=app+in+(gpu,cpu)&watch=true 200\n"
    )
    assert _masked("access.log", text) == text


@pytest.mark.parametrize(
    "line",
    [
        "bot: {t}",
        "BOT={t}",
        '{{"notify": {{"chat": "-100123", "bot": "{t}"}}}}',
        "POST https://api.example.org/bot{t}/sendMessage 200",
    ],
)
def test_a_telegram_bot_token_under_a_neutral_key_is_masked(line: str) -> None:
    token = "AAH" + "x9Zq4" * 6 + "_-"  # AA and 33 more
    text = line.format(t=f"6123456789:{token}") + "\n"
    out = _masked("alertmanager.log", text)
    assert token not in out and "6123456789:" in out


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<server><id>nexus</id><password>Zx9mavenPw</password></server>", "<id>nexus</id>"),
        ('<cfg:Password enc="none">Zx9dotnetPw</cfg:Password>', '<cfg:Password enc="none">'),
        ("CREATE ROLE ops WITH LOGIN PASSWORD 'Zx9rolePw';", "CREATE ROLE ops WITH LOGIN"),
        ("CREATE USER 'ops'@'%' IDENTIFIED BY 'Zx9mysqlPw';", "CREATE USER 'ops'@'%'"),
        ("ALTER USER app IDENTIFIED BY Zx9oraclePw;", "ALTER USER app"),
        ("SET PASSWORD FOR 'ops'@'%' = 'Zx9setPw';", "SET PASSWORD FOR"),
        ("db1.internal:5432:app:ops:Zx9pgpassPw", "db1.internal:5432:app:ops:"),
        ('{"output": "*:*:*:postgres:Zx9pgpassPw"}', '{"output": "*:*:*:postgres:'),
        ("kubectl create secret generic dsn --from-literal=url=Zx9dsn -n app", "-n app"),
        ('proxy_set_header Authorization "Basic Zx9basicCredentials";', "proxy_set_header"),
        ("define('DB_PASSWORD', 'Zx9phpPw');", "define('DB_PASSWORD', '"),
        ('os.environ.setdefault("API_TOKEN", "Zx9envTok")', "setdefault"),
        ("aws configure set aws_session_token Zx9sessionTok --profile gpu", "--profile gpu"),
        (f"{JOURNAL}export SERVICE_TOKEN: 'Zx9exportTok'", "export SERVICE_TOKEN"),
        (f"{KLOG}export SERVICE_TOKEN\t'Zx9exportTok'", "export SERVICE_TOKEN"),
        ("declare -x DB_PASSWORD: Zx9declarePw", "declare -x DB_PASSWORD"),
    ],
)
def test_secrets_in_config_files_sql_and_commands_are_masked(text: str, kept: str) -> None:
    out = _masked("node/files.log", text + "\n")
    assert "Zx9" not in out and kept in out


@pytest.mark.parametrize(
    "text",
    [
        "<passwordPolicy>strict</passwordPolicy>",
        "<tokenFile>/var/run/secrets/eks.amazonaws.com/token</tokenFile>",
        "kubectl create configmap tuning --from-literal=mode=fast",
        "define('WP_DEBUG', 'false');",
        "aws configure set region us-west-2",
        "proxy_set_header Authorization $http_authorization;",
        "10:20:30:40:50 *:*:*",
    ],
)
def test_settings_beside_those_shapes_are_left_alone(text: str) -> None:
    assert _masked("node/files.log", text + "\n") == text + "\n"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("echo Zx9sudoPw | sudo -S systemctl restart kubelet", "| sudo -S systemctl restart"),
        (
            "echo 'Zx9regPw' | docker login -u ops --password-stdin reg.io",
            "--password-stdin reg.io",
        ),
        ("echo Zx9rootPw | passwd --stdin root", "passwd --stdin root"),
        ('1764900000.1 [0 10.0.1.2:51234] "AUTH" "ops" "Zx9redisPw"', '"AUTH" "ops" "'),
        ("127.0.0.1:6379> AUTH default Zx9redisPw", "127.0.0.1:6379> AUTH default "),
        ('%any : PSK "Zx9ipsecPsk"', "%any : PSK"),
        ("> X-Api-Key: Zx9curlKey", "> X-Api-Key: "),
        ("< X-Auth-Token: Zx9curlTok", "< X-Auth-Token: "),
        ("aws ssm put-parameter --name /db/pw --value Zx9ssm --type SecureString", "SecureString"),
        ("snmpget -v2c -c Zx9community 10.0.1.2 sysUpTime.0", "10.0.1.2 sysUpTime.0"),
        ("java -jar jenkins-cli.jar -auth ops:Zx9jenkinsTok build x", "-auth ops:"),
        ("openssl enc -d -aes-256-cbc -k Zx9opensslPw -in model.enc", "-in model.enc"),
        ("mosquitto_pub -h mq -u ops -P Zx9mqttPw -t gpu/health -m ok", "-t gpu/health"),
    ],
)
def test_passwords_given_to_commands_on_stdin_or_as_arguments_are_masked(
    text: str, kept: str
) -> None:
    for line in (text, f"{JOURNAL}{text}", json.dumps({"level": "info", "msg": text})):
        out = _masked("node/commands.log", line + "\n")
        assert "Zx9" not in out and kept.replace('"', "") in out.replace('\\"', "").replace('"', "")


@pytest.mark.parametrize(
    "text",
    [
        "AUTH failed: WRONGPASS invalid username-password pair",
        "echo $REGISTRY_PASSWORD | docker login --password-stdin registry.internal",
        "echo 'vm.max_map_count=262144' | sudo tee /etc/sysctl.d/99-gpu.conf",
        "aws ssm put-parameter --name /app/mode --value fast --type String",
        "%any : RSA /etc/ipsec.d/private/node.pem",
        "snmpwalk -v3 -l authPriv -u monitor 10.0.1.2 ifTable",
    ],
)
def test_commands_without_a_password_are_left_alone(text: str) -> None:
    assert _masked("node/commands.log", text + "\n") == text + "\n"


@pytest.mark.deep
@pytest.mark.parametrize("unit", ["?a=", "&a=b", " a=b%", "secret --from-literal=a="])
def test_many_query_parameters_before_one_plus_cost_linear_time(unit: str) -> None:
    """A `+` at the end of a line of parameters once made each parameter read to the line's
    end. Four times the input may cost about four times the CPU, never sixteen (the margin
    is wide: 10x, plus 50 ms for timer noise)."""
    small = (unit * (48 * 1024 // len(unit)) + "+").encode()
    large = (unit * (192 * 1024 // len(unit)) + "+").encode()
    t_small, t_large = mask_cpu_seconds(small, "access.log"), mask_cpu_seconds(large, "access.log")
    assert t_large <= 10 * t_small + 0.05, (unit, t_small, t_large)


def test_base64_runs_are_found_fast_exactly_where_the_pattern_finds_them() -> None:
    import random

    from mignurse.collect import encodings

    rng = random.Random(25)
    alphabet = 'Aa9+/_-=  .:\n"' + "QWxhZGRpbjpvcGVuIHNlc2FtZQ"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        if rng.random() < 0.1:  # the slow path, for text that is not ASCII
            text += "é"
        if rng.random() < 0.5:
            run = "QWxhZGRpbjpvcGVuIHNlc2FtZQ" * rng.randint(1, 3)
            text += "x=" + run + "=" * rng.randint(0, 3)
        expected = [m.span() for m in encodings._BASE64.finditer(text)]
        assert list(encodings.base64_runs(text)) == expected, text
