"""Without the multi-pattern engine (a platform with no Hyperscan wheel), grep finds the lines
holding redaction triggers; the result must equal the pure-Python scan."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mignurse.collect import redact, scanner

from .test_redact import (
    CLOUD_INIT_OUTPUT,
    CONTAINERD,
    DOCKER_CONFIG,
    ENV_DUMP,
    JOURNAL_LINE,
    KUBEADM,
    KUBECONFIG,
    PEM_FILE,
)


@pytest.fixture(autouse=True)
def without_the_engine() -> Iterator[None]:
    with scanner.engine_disabled():
        yield


PLAIN = 'Nov 29 kubelet[2345]: I1129 "SyncLoop UPDATE" source="api" pods=["a/b"]\n'


@pytest.fixture
def grep_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "GREP_MIN_BYTES", 0)
    monkeypatch.setattr(redact, "_grep", [])


def _python_only(text: str) -> redact._Scan:
    saved = redact._grep[:]
    redact._grep[:] = [None]
    try:
        return redact._Scan(text)
    finally:
        redact._grep[:] = saved


@pytest.mark.usefixtures("grep_always")
def test_grep_is_found_and_passes_its_self_test() -> None:
    assert redact._usable_grep() is not None


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(
        st.one_of(
            st.sampled_from(redact.TRIGGERS).map(
                lambda t: "".join(c.upper() if i % 2 else c for i, c in enumerate(t))
            ),
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_:/ \n\t\r=\"'.", max_size=30),
        ),
        max_size=40,
    )
)
def test_grep_lines_give_the_same_trigger_positions_as_the_whole_text(pieces: list[str]) -> None:
    text = "".join(pieces)
    saved = redact.GREP_MIN_BYTES, redact._grep[:]
    redact.GREP_MIN_BYTES, redact._grep[:] = 0, []
    try:
        lines = redact.trigger_lines(text.encode())
        fast = redact._Scan(text, lines)
    finally:
        redact.GREP_MIN_BYTES, redact._grep[:] = saved
    assert lines is not None
    whole = _python_only(text)
    for trigger in redact.TRIGGERS:
        assert fast.positions(trigger) == whole.positions(trigger), trigger


def test_large_files_are_masked_the_same_with_and_without_grep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = [
        CLOUD_INIT_OUTPUT,
        KUBECONFIG,
        JOURNAL_LINE,
        CONTAINERD,
        DOCKER_CONFIG,
        ENV_DUMP,
        PEM_FILE,
        KUBEADM,
    ]
    rng = random.Random(7)
    lines = [PLAIN] * 20_000
    for at in rng.sample(range(len(lines)), 200):
        lines[at] = rng.choice(secrets)
    data = "".join(lines).encode()
    assert len(data) > redact.GREP_MIN_BYTES

    monkeypatch.setattr(redact, "_grep", [])
    with_grep = redact.mask_secrets("kubelet.log", data)
    assert redact._grep[0] is not None  # grep was really used
    monkeypatch.setattr(redact, "_grep", [None])
    without = redact.mask_secrets("kubelet.log", data)
    assert with_grep == without
    assert with_grep[1]["bearer-token"] >= 1 and b"wJalrXUtnFEMI" not in with_grep[0]


def test_a_clean_large_file_comes_back_as_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_grep", [])
    data = (PLAIN * 20_000).encode()
    clean, counts = redact.mask_secrets("kubelet.log", data)
    assert clean is data and counts == {}


def test_a_grep_that_answers_wrongly_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "grep"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho '0:whatever'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(redact, "_grep", [])
    data = (PLAIN * 20_000 + "API_KEY=abc123def456\n").encode()
    clean, counts = redact.mask_secrets("env.txt", data)
    assert redact._grep == [None]
    assert counts == {"secret-env": 1} and b"abc123def456" not in clean


def test_non_ascii_text_is_searched_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "GREP_MIN_BYTES", 0)
    assert redact.trigger_lines("GPU temp 45 °C, token: abc\n".encode()) is None
