"""Garbled, truncated or empty node files never raise: every parser answers with problems."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from hypothesis import given
from hypothesis import strategies as st

from mignurse.evidence import (
    JournalEntry,
    classify_unit_message,
    merge_smi,
    parse_cgroup_fs,
    parse_cloud_init_files,
    parse_cloud_init_status,
    parse_container_log,
    parse_journal,
    parse_mig_lci,
    parse_mig_lgi,
    parse_nvml_json,
    parse_os_release,
    parse_smi_list,
    parse_smi_xml,
    systemd_unit_actions,
    xid_errors,
)
from mignurse.model import PROBE_OK, MigState

from .smi_samples import h100_lci, h100_lgi, h100_list, h100_xml, l40s_xml

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).parents[1] / "corpus"
REFERENCE = datetime(2026, 12, 8, tzinfo=UTC)


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _corpus(name: str) -> str:
    return (CORPUS / name).read_text(encoding="utf-8")


def _journal(text: str) -> Any:
    return parse_journal(text, "j", reference=REFERENCE)


# Every journal shape of the corpus: journalctl's text and JSON formats, syslog files, dmesg.
JOURNAL_SHAPES = sorted(p.name for p in (CORPUS / "journal").iterdir() if p.suffix != ".source")


_MERGED = merge_smi(
    parse_smi_xml(h100_xml(gpus=2)), parse_smi_list(h100_list(gpus=2)), parse_mig_lgi(h100_lgi(2))
)

# Each parser with real input it must read cleanly.
VALID: dict[str, tuple[Callable[[str], Any], str]] = {
    "journal-kubelet": (lambda t: parse_journal(t, "journal:kubelet"), _fixture("kubelet.log")),
    "journal-kernel": (lambda t: parse_journal(t, "journal:kernel"), _fixture("kernel.log")),
    "journal-containerd": (lambda t: parse_journal(t, "j"), _fixture("containerd.log")),
    "cloud-init": (parse_cloud_init_status, _fixture("cloud-init-status-degraded.json")),
    "cloud-init-error": (parse_cloud_init_status, _fixture("cloud-init-status-error.json")),
    "cgroup": (parse_cgroup_fs, "cgroup2fs\n"),
    "os-release": (parse_os_release, _fixture("os-release-al2023")),
    "os-release-br": (parse_os_release, _fixture("os-release-bottlerocket")),
    "smi-list": (parse_smi_list, h100_list(gpus=2)),
    "mig-lgi": (parse_mig_lgi, h100_lgi(gpus=2)),
    "mig-lci": (parse_mig_lci, h100_lci(gpus=2)),
    "smi-xml": (parse_smi_xml, h100_xml(gpus=2)),
    "smi-xml-l40s": (parse_smi_xml, l40s_xml()),
    "nvml": (parse_nvml_json, json.dumps(_MERGED.to_json(), indent=2)),
    "journal-short-al2": (_journal, _corpus("journal/kubelet-short-al2.log")),
    "journal-json": (_journal, _corpus("journal/kernel-json-al2.jsonl")),
    "journal-json-pretty": (_journal, _corpus("journal/kernel-json-pretty.json")),
    "journal-short-full": (_journal, _corpus("journal/kubelet-short-full.log")),
    "journal-short-unix": (_journal, _corpus("journal/kernel-short-unix.log")),
    "syslog-messages": (_journal, _corpus("journal/messages-al2")),
    "dmesg-ctime": (_journal, _corpus("journal/dmesg-T.txt")),
    "container-log": (lambda t: parse_container_log(t, "j"), _corpus("journal/nma-cri.log")),
    "container-log-docker": (
        lambda t: parse_container_log(t, "j", "c"),
        _corpus("journal/nma-docker-json.log"),
    ),
    "cloud-init-22.2.2": (
        parse_cloud_init_status,
        _corpus("cloud-init/status-long-22.2.2-done.txt"),
    ),
    "cloud-init-26.2": (parse_cloud_init_status, _corpus("cloud-init/status-long-26.2-error.txt")),
    "cloud-init-files": (
        lambda t: parse_cloud_init_files(t, None),
        _corpus("cloud-init/run-status-26.2-running.json"),
    ),
    "mig-lci-r450": (parse_mig_lci, _corpus("nvidia-smi/mig-lci-r450-no-placement.txt")),
}
NAMES = sorted(VALID)


def _complaints(result: Any) -> bool:
    """Whether a parser's answer admits that something was wrong."""
    if isinstance(result, MigState):
        return result.status != PROBE_OK
    return bool(result.problems)


def test_valid_inputs_read_cleanly() -> None:
    for name in NAMES:
        parse, text = VALID[name]
        assert not _complaints(parse(text)), name


# Arbitrary text, including control characters, NULs, lone \r and Unicode line separators.
any_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400
) | st.sampled_from(["", "\n", "\r\n", "\x00", "\u2028", "\ufeff", "{", "<", "|", "-- --"])
decoded_bytes = st.binary(max_size=400).flatmap(
    lambda b: st.sampled_from(
        [b.decode("utf-8", errors="replace"), b.decode("latin-1"), b.decode("utf-16", "ignore")]
    )
)


@given(name=st.sampled_from(NAMES), text=any_text | decoded_bytes)
def test_arbitrary_text_never_raises(name: str, text: str) -> None:
    parse, _valid = VALID[name]
    result = parse(text)
    if not text.strip():
        assert _complaints(result), name


@given(name=st.sampled_from(NAMES), text=any_text | decoded_bytes)
def test_junk_is_reported(name: str, text: str) -> None:
    # A first line no format allows: every parser must say it could not read it.
    parse, _valid = VALID[name]
    assert _complaints(parse("junk: " + text))


@given(name=st.sampled_from(NAMES), data=st.data())
def test_truncations_never_raise(name: str, data: st.DataObject) -> None:
    parse, text = VALID[name]
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    result = parse(text[:cut])
    if isinstance(result, MigState) and text[:cut].strip() != text.strip():
        # A cut XML or JSON document must never pass for a complete, healthy probe.
        assert result.status != PROBE_OK


@given(name=st.sampled_from(NAMES), data=st.data(), junk=any_text | decoded_bytes)
def test_spliced_junk_never_raises(name: str, data: st.DataObject, junk: str) -> None:
    parse, text = VALID[name]
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    drop = data.draw(st.integers(min_value=0, max_value=40))
    parse(text[:at] + junk + text[at + drop :])


@given(xml=any_text, listing=any_text, lgi=any_text)
def test_merge_of_garbage_never_raises(xml: str, listing: str, lgi: str) -> None:
    merge_smi(parse_smi_xml(xml), parse_smi_list(listing), parse_mig_lgi(lgi))
    merge_smi(parse_smi_xml(h100_xml(gpus=1)), parse_smi_list(listing), parse_mig_lgi(lgi))


@given(messages=st.lists(any_text, max_size=20), unit=st.sampled_from(["kubelet", "x.y", "a|b"]))
def test_journal_helpers_never_raise(messages: list[str], unit: str) -> None:
    when = datetime(2026, 11, 29, tzinfo=UTC)
    entries = [
        JournalEntry(when, "h", ident, 1, message, 0, i, "j")
        for i, message in enumerate(messages)
        for ident in ("systemd", "kernel")
    ]
    systemd_unit_actions(entries, unit)
    xid_errors(entries)
    for message in messages:
        classify_unit_message(message, unit, descriptions=[message[:10]])


# Characters XML 1.0 allows (no C0 controls, surrogates or noncharacters).
_XML_CHARS = st.characters(exclude_categories=("Cc", "Cs", "Cn"))
_FIELD_TEXT = st.text(_XML_CHARS, max_size=12) | st.sampled_from(
    ["N/A", "None", "7", "9984 MiB", "²", "-1"]
)


@given(values=st.lists(_FIELD_TEXT, min_size=9, max_size=9))
def test_odd_values_inside_well_formed_xml(values: list[str]) -> None:
    v = [escape(x, {"'": "&apos;"}) for x in values]
    text = (
        f"<nvidia_smi_log><driver_version>{v[0]}</driver_version><attached_gpus>{v[1]}"
        f"</attached_gpus><gpu id='{v[2]}'><product_name>{v[3]}</product_name><mig_mode>"
        f"<current_mig>{v[4]}</current_mig><pending_mig>{v[5]}</pending_mig></mig_mode>"
        f"<mig_devices><mig_device><index>{v[6]}</index><gpu_instance_id>{v[7]}"
        f"</gpu_instance_id><fb_memory_usage><total>{v[8]}</total></fb_memory_usage>"
        "</mig_device></mig_devices></gpu></nvidia_smi_log>"
    )
    state = parse_smi_xml(text)
    assert len(state.gpus) == 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(data=st.data())
def test_odd_values_inside_nvml_and_cloud_init_json(data: st.DataObject) -> None:
    doc = json.loads(json.dumps(_MERGED.to_json()))
    gpu, device = doc["gpus"][0], doc["gpus"][0]["devices"][0]
    for holder in (doc, gpu, gpu["migMode"], device):
        key = data.draw(st.sampled_from(sorted(holder)))
        holder[key] = data.draw(_JSON)
    parse_nvml_json(json.dumps(doc))
    status = json.loads(_fixture("cloud-init-status-degraded.json"))
    for key in data.draw(st.lists(st.sampled_from(sorted(status)), max_size=4)):
        status[key] = data.draw(_JSON)
    parse_cloud_init_status(json.dumps(status))


_REFERENCES = st.datetimes(timezones=st.just(UTC)) | st.sampled_from(
    [datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC), None]
)


@given(shape=st.sampled_from(JOURNAL_SHAPES), data=st.data(), junk=any_text | decoded_bytes)
def test_parse_journal_never_raises_in_any_format(
    shape: str, data: st.DataObject, junk: str
) -> None:
    # Cut, spliced and re-dated text of every journal shape: entries or problems, never a raise.
    text = _corpus(f"journal/{shape}")
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    drop = data.draw(st.integers(min_value=0, max_value=200))
    reference = data.draw(_REFERENCES)
    for variant in (text[:at], text[:at] + junk + text[at + drop :], junk + "\n" + text):
        parsed = parse_journal(variant, "j", reference=reference)
        assert parsed.entries or parsed.problems or parsed.no_entries or not variant.strip()
        parse_container_log(variant, "j")


@given(text=any_text | decoded_bytes, reference=_REFERENCES)
def test_parse_journal_never_raises_on_arbitrary_text(
    text: str, reference: datetime | None
) -> None:
    parse_journal(text, "j", reference=reference)
