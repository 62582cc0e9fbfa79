"""The multi-pattern engine (Hyperscan) only says where the rules may match: a file is masked
byte for byte the same with it and without it (a platform with no wheel, Python `re` alone),
and a missing wheel is one warning line, never a crash."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mignurse.collect import encodings, redact, scanner
from mignurse.collect.redact import MARKER, mask_secrets

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_redaction import journal
from hostile.secrets_corpus import (
    HOSTILE_PATTERNS,
    RENDERINGS,
    LookAlike,
    Secret,
    file_name,
    hostile_text,
    look_alikes,
    real_evidence_files,
    secrets,
)

ENGINE = pytest.mark.skipif(
    scanner.engine_name() != "Hyperscan", reason="no Hyperscan wheel on this platform"
)
QUICK_RENDERINGS = ("text", "json-line", "journal", "nul", "url-encoded", "invalid-utf8")


def _raw(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


Masked = tuple[bytes, dict[str, int]]


def _both(name: str, data: bytes) -> tuple[Masked, Masked]:
    with_engine = mask_secrets(name, data)
    with scanner.engine_disabled():
        without = mask_secrets(name, data)
    return with_engine, without


def _samples(renderings: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    for rendering in renderings:
        render = RENDERINGS[rendering]
        cases: list[Secret | LookAlike] = [*secrets(), *look_alikes()]
        for case in cases:
            yield file_name(rendering), _raw(render(case))


@ENGINE
@pytest.mark.deep
def test_every_secret_and_look_alike_is_masked_the_same_with_the_engine_and_without() -> None:
    for name, data in _samples(QUICK_RENDERINGS):
        with_engine, without = _both(name, data)
        assert with_engine == without, (name, data[:200])


@ENGINE
@pytest.mark.deep
def test_every_rendering_of_the_corpus_is_masked_the_same_with_the_engine_and_without() -> None:
    rest = tuple(r for r in RENDERINGS if r not in QUICK_RENDERINGS)
    for name, data in _samples(rest):
        with_engine, without = _both(name, data)
        assert with_engine == without, (name, data[:200])
    for path in real_evidence_files():
        with_engine, without = _both(path.name, path.read_bytes())
        assert with_engine == without, path


@ENGINE
@pytest.mark.deep
def test_a_large_journal_with_credentials_nuls_and_utf8_is_masked_the_same_both_ways() -> None:
    text = journal(1.5)
    lines = text.splitlines(keepends=True)
    # a NUL-torn record, a Kelvin sign (lower-cased to "k"), other UTF-8, a CRI partial line
    lines[10] = "Nov 29 03:00:01 host app[1]: password=\x00hunter2-secret\n"
    lines[20] = "Nov 29 03:00:02 host app[1]: \u212aey: AKIAIOSFODNN7EXAMPLE °C ✓\n"
    lines[30] = "2026-11-29T03:00:03.1Z stdout P token=abcdefghijklmn\n"
    lines[31] = "2026-11-29T03:00:03.2Z stdout F opqrstuvwxyz0123\n"
    lines[40] = f'kubelet[2]: I1129 round_trippers.go:473] Authorization="Bearer {"Ab1" * 20}"\n'
    lines[50] = "sudo[9]: ec2-user : COMMAND=/usr/bin/docker login -u AWS -p Pa55w0rdX host\n"
    for variant in (
        "".join(lines),
        "".join(lines[:10] + lines[11:20] + lines[21:]),  # no NUL, still UTF-8
        "".join(lines[:10] + lines[11:]),  # the Kelvin sign: the words found by str.find
    ):
        data = variant.encode()
        (masked, counts), without = _both("kubelet.log", data)
        assert (masked, counts) == without
        assert counts["bearer-token"] >= 1 and counts["registry-login"] >= 1


@ENGINE
@pytest.mark.parametrize("pattern", sorted(HOSTILE_PATTERNS))
def test_hostile_patterns_are_masked_the_same_both_ways(pattern: str) -> None:
    data = hostile_text(pattern, 64 * 1024)
    with_engine, without = _both("kubelet.log", data)
    assert with_engine == without


@ENGINE
@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "token ",
                "Token: ",
                "TOKEN=",
                "\u212a",
                "é",
                "\x00",
                "\x1c",
                "\n",
                "%41",
                "&amp;",
                "?a=b+c",
                "://u:p@h",
                "-----BEGIN ",
                "secret",
                "x",
            ]
        ),
        max_size=40,
    )
)
def test_trigger_positions_are_those_str_find_gives(pieces: list[str]) -> None:
    text = "".join(pieces)
    with scanner.engine_disabled():
        reference = redact._Scan(text)
    scan = redact._Scan(text)
    for trigger in redact.TRIGGERS:
        assert scan.positions(trigger) == reference.positions(trigger), trigger


@ENGINE
def test_a_missing_wheel_is_one_warning_and_masks_through_python_re(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = journal(0.2).encode()
    expected = mask_secrets("kubelet.log", data)
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # `import hyperscan` fails
    monkeypatch.setattr(scanner, "_warned", [])
    with caplog.at_level(logging.WARNING, logger=scanner.__name__):
        loaded = scanner._load()
    assert loaded is None
    assert [r.getMessage().count("\n") for r in caplog.records] == [0]
    assert "without Hyperscan" in caplog.text
    monkeypatch.setattr(scanner, "_hyperscan", None)
    assert scanner.engine_name() == "Python str.find"
    assert mask_secrets("kubelet.log", data) == expected


def test_without_the_wheel_every_finder_answers_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scanner, "_hyperscan", None)
    assert scanner.engine_name() == "Python str.find"
    assert redact._WORDS.positions("a token") is None
    assert encodings._PERCENT_FINDER.last_characters("%41") is None
    assert encodings._engine_runs("x" + "QUJD" * 10) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                '{"a": ',
                "[1, ",
                '"x',
                '"',
                "\\u00e9",
                "\\ud83d",
                "-Infinity",
                "123",
                "}",
                "]",
                ", ",
                "\n",
                "true",
                "nul",
                "{",
                '{"k": "v"}',
                " ",
            ]
        ),
        max_size=30,
    )
)
def test_a_document_parsed_from_its_line_is_the_one_the_whole_text_holds(parts: list[str]) -> None:
    text = "".join(parts)
    for start, char in enumerate(text):
        if char not in "{[":
            continue
        line_end = text.find("\n", start)
        line_end = len(text) if line_end == -1 else line_end
        try:
            expected: object = json.JSONDecoder().raw_decode(text, start)
        except (ValueError, RecursionError):
            expected = "fails"
        try:
            got: object = encodings._decode_at(text, start, line_end)
        except (ValueError, RecursionError):
            got = "fails"
        assert got == expected, (text, start)


@ENGINE
def test_threads_that_mask_at_once_each_get_what_one_thread_gets() -> None:
    data = journal(0.3).encode() + b"Authorization: Bearer " + b"Zx9" * 10 + b"\n"
    expected = mask_secrets("kubelet.log", data)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: mask_secrets("kubelet.log", data), range(8)))
    assert results == [expected] * 8
    assert expected[1]["bearer-token"] == 1


_PIECES = st.sampled_from(
    ["tok", "en", "token", "://", "u:p@h", " -p ", "Bearer ", "kEy", "\n", "é", "\u212a", "x", ""]
)


def _edits(at: int, length: int, texts: list[str]) -> Any:
    """Up to 6 random edits: where (up to `at`), how long (up to `length`), what instead."""
    return st.lists(
        st.tuples(st.integers(0, at), st.integers(0, length), st.sampled_from(texts)),
        max_size=6,
    )


def _ordered(text: str, edits: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Random edits as the rules' masks are: in order, none overlapping, inside the text."""
    ordered: list[tuple[int, int, str]] = []
    for start, length, new in sorted(edits):
        start = min(start, len(text))
        if ordered and start < ordered[-1][1]:
            continue
        ordered.append((start, min(start + length, len(text)), new))
    return ordered


@ENGINE
@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES, max_size=30),
    edits=_edits(200, 12, ["", MARKER, "en", "y"]),
)
def test_trigger_positions_after_masks_are_those_a_new_scan_gives(
    pieces: list[str], edits: list[tuple[int, int, str]]
) -> None:
    # a mask can make a trigger (to|ken → token), cut one, or sit inside one; the positions
    # carried over from before the masks must be those of scanning the masked text afresh
    text = "".join(pieces)
    masked, applied = redact._apply(text, _ordered(text, edits))
    carried = redact._Scan(text).after(masked, applied)
    fresh = redact._Scan(masked)
    for trigger in redact.TRIGGERS:
        assert carried.positions(trigger) == fresh.positions(trigger), (trigger, masked)


_LINE_PIECES = st.sampled_from(
    [
        "dG9rZW4gcGFzc3dvcmQgc2VjcmV0IGtleQ",
        "c2VjcmV0OiBodW50ZXIyCg==",
        "0123456789abcdef0123456789abcdef",
        " P ",
        "%41",
        "&amp;",
        "?a=b",
        "token",
        "://u:p@h",
        "\n",
        " ",
        "-",
        "x",
    ]
)


@ENGINE
@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_LINE_PIECES, max_size=30),
    edits=_edits(400, 40, ["", MARKER, "\n", "QUFB"]),
)
# a mask after the line break that ended the text: a base64 run's `$` before it is gone
@example(pieces=["dG9rZW4gcGFzc3dvcmQgc2VjcmV0IGtleQ", "\n"], edits=[(35, 0, MARKER)])
def test_what_the_engine_found_carried_over_masks_is_what_a_new_scan_finds(
    pieces: list[str], edits: list[tuple[int, int, str]]
) -> None:
    # every word and every finder's match (base64 runs, %XX, " P "), moved past the masks
    # and found again on the lines they touched, as one pass over the masked text finds them
    text = "".join(pieces)
    masked, applied = redact._apply(text, _ordered(text, edits))
    scanner.forget()
    scanner._survey(text)
    if not scanner.carry(text, masked, applied):
        assert not applied
        return
    carried = scanner._survey(masked)
    scanner.forget()
    fresh = scanner._survey("".join([masked[:1], masked[1:]]))  # another object: scanned afresh
    assert carried.words == {
        owner: {word: sorted(hits) for word, hits in words.items()}
        for owner, words in fresh.words.items()
    }, masked
    # (the engine reports a finder's matches in no set order; those who ask sort them)
    assert carried.ends == {owner: sorted(ends) for owner, ends in fresh.ends.items()}, masked
    assert carried.unsafe == fresh.unsafe


# A client that logs a JSON body quotes it with its own escapes: Go's encoding/json writes
# `\u003c`-style escapes for <, > and & and `json.dumps` with ensure_ascii writes `\uXXXX` for
# every non-ASCII letter (docs.python.org/3/library/json.html#json.dumps); a JavaScript or
# PHP encoder writes `\/` for every slash (php.net/manual/en/function.json-encode.php,
# JSON_UNESCAPED_SLASHES). The word a rule waits for is then only in the unescaped string.
SPELLED_WITH_ESCAPES = (
    (
        'I1129 03:12:01.000001    2391 prober.go:107] "Probe failed" output="\\u0041KIA'
        'IOSFODNN7EXAMPLE"\n',
        "AKIAIOSFODNN7EXAMPLE"[4:],
    ),
    (
        'Nov 29 03:12:01.000001 ip-10-0-1-2 app[81]: {"registry":"https:\\/\\/deploy:'
        'Sup3r-S3cret@artifacts.corp.example.com\\/v2"}\n',
        "Sup3r-S3cret",
    ),
)


@pytest.mark.parametrize(("line", "secret"), SPELLED_WITH_ESCAPES)
@pytest.mark.parametrize("engine", ["hyperscan", "python"])
def test_a_secret_whose_trigger_word_is_spelled_with_json_escapes_is_masked(
    monkeypatch: pytest.MonkeyPatch, line: str, secret: str, engine: str
) -> None:
    if engine == "python":
        monkeypatch.setattr(scanner, "_hyperscan", None)
    elif scanner.engine_name() == "Python str.find":
        pytest.skip("no Hyperscan wheel on this machine")
    masked, counts = mask_secrets("kubelet.log", line.encode())
    assert secret.encode() not in masked, masked
    assert counts


_FINDERS = (
    encodings._BASE64_FINDER,
    encodings._PERCENT_FINDER,
    encodings._URL_FINDER,
    encodings._ENTITY_FINDER,
    encodings._PARTIAL_TAG,
    encodings._WORD_ESCAPE_FINDER,
)


@ENGINE
@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.one_of(_LINE_PIECES, st.just("\x1c"), st.just("a+b=c")), max_size=30),
    edits=_edits(400, 40, ["", MARKER, "\n", "QUFB"]),
    asked=st.sampled_from(_FINDERS),
)
def test_what_is_asked_first_and_carried_over_masks_answers_as_one_scan_of_all(
    pieces: list[str], edits: list[tuple[int, int, str]], asked: scanner.Finder
) -> None:
    # each database is scanned over a text when one of its patterns is first asked about,
    # and masks carry what was scanned only: asked in any order, before or after the masks,
    # every answer is that of one scan of everything (a finder's None where \x1c-\x1f is)
    text = "".join(pieces)
    masked, applied = redact._apply(text, _ordered(text, edits))
    scanner.forget()
    redact._WORDS.positions(text)
    asked.last_characters(text)
    scanner.carry(text, masked, applied)
    words = redact._WORDS.positions(masked)
    answers = {id(finder): finder.last_characters(masked) for finder in _FINDERS}
    scanner.forget()
    fresh = scanner._survey("".join([masked[:1], masked[1:]]))  # another object: scanned afresh
    assert words == {word: sorted(hits) for word, hits in fresh.words[id(redact._WORDS)].items()}
    for finder in _FINDERS:
        expected = None if fresh.unsafe else sorted(fresh.ends[id(finder)])
        got = answers[id(finder)]
        assert (got if got is None else sorted(got)) == expected, (finder.sources, masked)


@ENGINE
def test_a_finder_first_asked_about_a_text_holding_a_file_separator_answers_none() -> None:
    # the words' database does not say whether the text holds \x1c-\x1f: a finder's answer
    # waits for the check of its own
    scanner.forget()
    text = "token %41 &amp; \x1c"
    assert redact._WORDS.positions(text) is not None
    assert encodings._PERCENT_FINDER.last_characters(text) is None
    assert encodings._PARTIAL_TAG.last_characters(text) is None
    scanner.forget()
    assert encodings._ENTITY_FINDER.last_characters(text) is None


def test_literal_finders_share_the_words_database_and_the_others_have_their_own() -> None:
    assert scanner._is_literal(" P ") and scanner._is_literal(r"\\[u/]")
    assert not scanner._is_literal(r"%[0-9A-Fa-f]{2}")
    assert not scanner._is_literal("[^a]")  # a negated class: most of the alphabet
    assert not scanner._is_literal(r"ab|cd") and not scanner._is_literal(r"\d")


def _block_lines(rng: random.Random) -> str:
    """A text of 300 to 600 lines, some of them opening a block in each of the ways
    `_with_context` knows (a PEM BEGIN, a YAML key with a block, an INI section, a kind:
    Secret, a record whose message opens one), with \r before some line breaks."""
    pieces = [
        "-----BEGIN ",
        "key:",
        " |",
        " >-",
        "\r",
        "[sec]",
        "kind: Secret",
        "Set the following 'random' passwords",
        'msg="',
        '"msg": "',
        'a: |\\n"',
        '[x]\\r\\n"',
        '\\"',
        "token",
        "x",
        " ",
        ":",
        '"',
    ]
    lines = [
        "".join(rng.choice(pieces) for _ in range(rng.randrange(8)))
        for _ in range(rng.randrange(300, 600))
    ]
    return "\n".join(lines) + rng.choice(["", "\n", "\r"])


@ENGINE
@pytest.mark.parametrize("seed", range(20))
def test_the_lines_the_engine_says_open_no_block_are_those_python_finds_open_none(
    seed: int,
) -> None:
    # the engine reads only the lines asked about, joined: the lines around each are those
    # the searches of every line find, asked once or again about other lines of the text
    rng = random.Random(seed)
    text = _block_lines(rng)
    lines = encodings.lines_at(text, range(len(text)))
    for wanted in (lambda s, e: True, lambda s, e: s % 3 != 0):
        asked = [line for line in lines if rng.random() < 0.8]
        again = [line for line in lines if rng.random() < 0.5]
        encodings.forget()
        fast = [encodings._with_context(text, asked, wanted)]
        fast.append(encodings._with_context(text, again, wanted))
        with scanner.engine_disabled():
            encodings.forget()
            slow = [encodings._with_context(text, asked, wanted)]
            slow.append(encodings._with_context(text, again, wanted))
        assert fast == slow


def test_only_a_regex_anchored_at_every_line_start_is_tried_once_per_line() -> None:
    assert redact._at_line_start(re.compile(r"(?m)^[ \t]*key\t"))
    assert not redact._at_line_start(re.compile(r"(?m)^key|value"))  # `^` in one branch
    assert not redact._at_line_start(re.compile(r"^key"))  # the text's start only
    assert not redact._at_line_start(re.compile(r"(?m)key^"))
    assert not redact._at_line_start(re.compile(r"(?m)\Akey"))


@ENGINE
def test_the_scans_of_a_decoded_file_read_its_own_bytes_not_a_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = b"I1129 kubelet: token=abc\nDB_PASSWORD=hunter2\n" * 50
    read: list[bytes] = []
    real_scan = scanner._scan
    monkeypatch.setattr(
        scanner,
        "_scan",
        lambda database, text, on_match: (read.append(text), real_scan(database, text, on_match)),
    )
    masked, counts = mask_secrets("kubelet.log", data)
    assert MARKER.encode() in masked and b"hunter2" not in masked and counts
    assert read and read[0] is data  # the first text scanned is the file as it came
    # and the answer kept for it is let go with it
    assert getattr(scanner._state, "known", None) is None and scanner._state.last is None
