"""Randomized differential checks of the multi-pattern engine: journals built from the rules'
own trigger words, the recall corpus's secrets, every escape a view decodes, log prefixes,
CRI partial lines, NUL bytes and non-ASCII text are masked byte for byte the same with the
engine and without it, and every place a rule's regex matches is one its prefilter reported."""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest

from mignurse.collect import encodings, scanner
from mignurse.collect.redact import ALL_RULES, TRIGGERS, mask_secrets
from mignurse.collect.secretrules import Rule

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hostile.secrets_corpus import look_alikes, secrets

ENGINE = pytest.mark.skipif(
    scanner.engine_name() != "Hyperscan", reason="no Hyperscan wheel on this platform"
)

SEED = 20261206
FILES = 24
LINES_PER_FILE = 120  # a few thousand lines in all

# every escape a view decodes, each applied to a whole piece of the line
ESCAPES: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    lambda s: json.dumps(s)[1:-1],  # \" \\ \n \t
    lambda s: json.dumps(s, ensure_ascii=True).replace("/", "\\/"),
    lambda s: "".join(f"\\u{ord(c):04x}" if c.isalpha() else c for c in s),  # \u0041KIA
    lambda s: json.dumps(json.dumps(s))[1:-1],  # escaped twice
    lambda s: urllib.parse.quote(s, safe=""),  # %XX
    lambda s: urllib.parse.quote_plus(s),  # a form value's +
    lambda s: s.replace("&", "&amp;").replace('"', "&quot;").replace("@", "&#64;"),
    lambda s: base64.b64encode(s.encode()).decode(),
    lambda s: base64.urlsafe_b64encode(s.encode()).decode().rstrip("="),
)

PREFIXES: tuple[str, ...] = (
    "",
    "Nov 29 03:14:15.926535 ip-10-0-37-142.us-west-2.compute.internal kubelet[2391]: ",
    "Nov 29 03:14:15.926535 ip-10-0-37-142.us-west-2.compute.internal kubelet[2391]: "
    "I1129 03:14:15.926535    2391 prober.go:107] ",
    "2026-11-29T03:14:15.926535Z stdout F ",
    "2026-11-29T03:14:15.926535Z stdout P ",
    "2026-11-29T03:14:15.926535Z stderr F ",
    "2026-11-29 03:14:15,926 - url_helper.py[DEBUG]: ",
    'containerd[1930]: time="2026-11-29T03:14:15.926Z" level=info msg=',
    "  ",
    "- ",
)

# shapes that make the views and the block rules work: keys that open a block, JSON around a
# value, a Secret's kind, probe output, PEM lines
FRAMES: tuple[str, ...] = (
    "{}",
    '"{}"',
    'msg="{}"',
    'output="Get \\"{}\\": dial tcp 10.0.7.7:8000: connect: connection refused"',
    '{{"message": "{}", "level": "info"}}',
    "password: {}",
    "password: |",
    "passwords:",
    "  - {}",
    "kind: Secret",
    "data:",
    "  token: {}",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "[{}]",
    "export API_TOKEN={}",
    "curl -u {} http://{}@10.0.0.1:8000/health",
    "key\t{}",
)

ODD_ASCII = ("\x00", "\x1c", "\x0b", "\x1f", "\r", "\\", '"', "%", "+", "&")
ODD = (*ODD_ASCII, "\u00e9", "\u212a", "\u00a0", "\udcff")


def _pieces() -> list[str]:
    cases = [case.text for case in secrets()] + [case.text for case in look_alikes()]
    lines = [line for text in cases for line in text.splitlines() if line.strip()]
    return lines + list(TRIGGERS)


def _line(rng: random.Random, pieces: list[str], odd: tuple[str, ...]) -> str:
    piece = rng.choice(pieces)
    if rng.random() < 0.5:
        piece = rng.choice(TRIGGERS) + rng.choice(("", " ", "=", ": ", '":"')) + piece
    piece = rng.choice(ESCAPES)(piece)
    frame = rng.choice(FRAMES)
    line = rng.choice(PREFIXES) + frame.replace("{}", piece, 1).replace("{}", "x")
    if rng.random() < 0.15:
        at = rng.randrange(len(line) + 1)
        line = line[:at] + rng.choice(odd) + line[at:]
    return line


@functools.cache
def _files() -> list[tuple[str, bytes]]:
    rng = random.Random(SEED)
    pieces = _pieces()
    files = []
    for n in range(FILES):
        # half the files ASCII (where every finder of the engine answers), half not
        odd = ODD_ASCII if n % 2 else ODD
        lines = [_line(rng, pieces, odd) for _ in range(LINES_PER_FILE)]
        text = "\n".join(lines) + rng.choice(("", "\n"))
        name = rng.choice(("journal/kubelet.log", "pods/app.log", "objects.json", "env.txt"))
        files.append((f"{n}-{name}", text.encode("utf-8", "surrogateescape")))
    return files


@ENGINE
@pytest.mark.parametrize("index", range(FILES))
def test_a_random_journal_is_masked_the_same_with_the_engine_and_without(index: int) -> None:
    name, data = _files()[index]
    with_engine = mask_secrets(name.split("-", 1)[1], data)
    with scanner.engine_disabled():
        without = mask_secrets(name.split("-", 1)[1], data)
    assert with_engine == without, name


def _ascii_texts() -> list[str]:
    texts = [data.decode("utf-8", "surrogateescape") for _, data in _files()]
    return [text for text in texts if text.isascii()] + [
        "\n".join(t for t in text.splitlines() if t.isascii()) for text in texts
    ]


def _assert_prefilter_reports_every_match(regex: re.Pattern[str], texts: list[str]) -> None:
    prefilter = scanner.Prefilter(regex)
    for text in texts:
        ends = prefilter.ends(text)
        if ends is None:  # a regex the engine cannot read: every place is tried
            continue
        reported = set(ends)
        matched = {m.end() for m in regex.finditer(text) if m.end() > m.start()}
        line_start = 0
        for line in text.split("\n"):  # as a LINE rule runs: the string cut at the line's end
            end = line_start + len(line)
            found = regex.finditer(text, line_start, end)
            matched |= {m.end() for m in found if m.end() > m.start()}
            line_start = end + 1
        assert matched <= reported, sorted(matched - reported)[:5]


@ENGINE
@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.name)
def test_every_match_of_a_rule_ends_where_its_prefilter_reported_one(rule: Rule) -> None:
    _assert_prefilter_reports_every_match(rule.regex, _ascii_texts()[:2])


@ENGINE
@pytest.mark.slow
@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda rule: rule.name)
def test_every_match_of_a_rule_in_every_random_journal_ends_where_its_prefilter_reported_one(
    rule: Rule, request: pytest.FixtureRequest
) -> None:
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("every rule over every journal: with -m slow")
    _assert_prefilter_reports_every_match(rule.regex, _ascii_texts())


@ENGINE
def test_yaml_keys_found_from_the_prefilter_are_those_found_line_by_line() -> None:
    for text in [*_ascii_texts(), "password: |\n  x\npasswords:\n- a\n"]:
        fast = [m.span() for m in encodings._at_line_starts(encodings._YAML_KEY, text)]
        with scanner.engine_disabled():
            slow = [m.span() for m in encodings._at_line_starts(encodings._YAML_KEY, text)]
        assert fast == slow
        assert slow == [m.span() for m in encodings._YAML_KEY.finditer(text)]


@ENGINE
def test_the_random_journals_joined_are_masked_the_same_with_the_engine_and_without() -> None:
    # over 256 lines: the paths taken for many trigger lines at once
    data = b"\n".join(data for _, data in _files() if data.isascii())
    with_engine = mask_secrets("journal/kubelet.log", data)
    with scanner.engine_disabled():
        without = mask_secrets("journal/kubelet.log", data)
    assert with_engine == without


@ENGINE
def test_the_lines_around_a_block_opener_or_a_secret_kind_are_those_found_line_by_line() -> None:
    joined = "\n".join(_ascii_texts())
    extra = "\r\n".join(("kind: Secret\r", "password: |\r\r", "[db]", "x", "-----BEGIN X-----"))
    # log records a line each whose message opens a block (journal JSON, json-file, logfmt)
    records = "\n".join(
        (
            '{"MESSAGE": "chpasswd:", "_PID": "1201"}',
            '{"log":"  list: |\\n","stream":"stdout"}',
            "msg=\"Set the following 'random' passwords\" unit=x",
            '{"msg":"a \\"q\\" b:  \\r\\n"}',
            '{"MESSAGE":"foo\\:"}',
            '{"log":"[db]\\n"}',
            '{"MESSAGE":"no opener","note":"x:"}',
            "root:pw",
        )
    )
    for text in (
        joined,
        joined + "\n" + extra * 60,
        extra * 80 + "\r",
        joined + "\n" + (records + "\n") * 40,
    ):
        every = encodings.lines_at(text, [m.start() for m in re.finditer("(?m)^", text)])
        some = every[::3]
        for lines in (every, some):
            fast = encodings._with_context(text, lines)
            encodings.forget()
            with scanner.engine_disabled():
                slow = encodings._with_context(text, lines)
            assert fast == slow
