"""The bundle reader (`BundleFiles`) at its limits, as `diagnose --from` and `open` meet them:
a tarball or a folder exactly at a cap is read, one past it is refused in one line; headers,
names, sizes and times no real tar writer produces are refused or passed over, never a
traceback. The caps are lowered through their environment variables (mignurse.untrusted)
so the archives stay small."""

from __future__ import annotations

import io
import json
import os
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mignurse.diagnose.sources import load_offline
from mignurse.diagnose.sources.files import BundleFiles
from mignurse.diagnose.sources.gathered import SourceError
from mignurse.untrusted import FILE_BYTES

NODES = json.dumps({"apiVersion": "v1", "kind": "List", "items": []}).encode()
PACKED = int(datetime(2026, 11, 29, 3, 14, 7, tzinfo=UTC).timestamp())


def member(name: str, data: bytes = b"", **fields: object) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), PACKED
    for key, value in fields.items():
        setattr(info, key, value)
    return info, data


def tarball(path: Path, *members: tuple[tarfile.TarInfo, bytes]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def refused(path: Path) -> str:
    with pytest.raises(SourceError) as caught:
        BundleFiles(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- extended headers ------------------------------------------------------------------------------


def pax_member(header_bytes: int) -> tuple[tarfile.TarInfo, bytes]:
    """nodes.json behind a pax header of exactly `header_bytes` ("65536 comment=xxx…\\n")."""
    info, data = member("bundle/nodes.json", NODES)
    digits = len(str(header_bytes))
    info.pax_headers = {"comment": "x" * (header_bytes - digits - len(" comment=\n"))}
    return info, data


def test_a_pax_header_of_64_kib_is_read(tmp_path: Path) -> None:
    files = BundleFiles(tarball(tmp_path / "b.tar.gz", pax_member(64 * 2**10)))
    assert files.data("nodes.json") == NODES


def test_a_pax_header_past_64_kib_is_refused(tmp_path: Path) -> None:
    message = refused(tarball(tmp_path / "b.tar.gz", pax_member(64 * 2**10 + 1)))
    assert message.endswith("is refused: an extended tar header of 65537 bytes")


# -- names and sizes no bundle has -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["/etc/kubernetes/kubelet.conf", "bundle/../../root/.ssh/x"])
def test_a_member_pointing_outside_the_archive_is_refused(tmp_path: Path, name: str) -> None:
    archive = tarball(tmp_path / "b.tar.gz", member("bundle/nodes.json", NODES), member(name))
    assert "points outside the archive" in refused(archive)


def test_a_member_with_a_negative_size_is_a_damaged_bundle(tmp_path: Path) -> None:
    raw = bytearray(512)
    raw[:10] = b"nodes.json"
    raw[100:108] = b"0000644\0"
    raw[124:136] = b"\xff" * 12  # base-256: -1
    raw[136:148] = b"00000000000\0"
    raw[156:157] = b"0"
    raw[257:263] = b"ustar\0"
    raw[148:156] = b" " * 8
    raw[148:156] = f"{sum(raw):06o}\0 ".encode()
    archive = tmp_path / "b.tar"
    archive.write_bytes(bytes(raw) + bytes(1024))
    assert refused(archive).endswith("is a damaged bundle: nodes.json has a negative size")


@pytest.mark.parametrize("mtime", [datetime(9000, 1, 1, tzinfo=UTC).timestamp(), 1e13])
def test_a_member_time_past_the_year_9000_is_passed_over(tmp_path: Path, mtime: float) -> None:
    archive = tarball(
        tmp_path / "node.tar.gz",
        member("./kubelet/kubelet.log", b""),
        member("./system/instance-id.txt", b"i-0c4f9e21b7a83d5e6\n", mtime=mtime),
    )
    assert BundleFiles(archive).newest_mtime == datetime.fromtimestamp(PACKED, UTC)


# -- damaged, or no bundle at all ------------------------------------------------------------------


def test_a_damaged_gzip_is_named_damaged(tmp_path: Path) -> None:
    junk = tmp_path / "bundle.tar.gz"
    junk.write_bytes(b"\x1f\x8b\x08\x00" + b"\xa5" * 600)
    assert "is a damaged bundle" in refused(junk)


def test_a_download_cut_inside_its_first_file_is_a_damaged_bundle(tmp_path: Path) -> None:
    whole = tarball(tmp_path / "whole.tar.gz", member("bundle/nodes.json", os.urandom(40_000)))
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole.read_bytes()[:2_000])
    assert "is a damaged bundle" in refused(cut)


def test_a_text_file_is_no_bundle(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("kubelet restarted at 03:01\n" * 40)
    assert refused(notes).endswith("is neither a snapshot directory nor a .tar.gz bundle")


def test_a_fifo_is_no_bundle_and_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "bundle.tar.gz"
    os.mkfifo(fifo)
    assert refused(fifo).endswith("is neither a snapshot directory nor a .tar.gz bundle")


# -- counts and sizes, exactly at the cap and one past it -----------------------------------------


def snapshot_members(count: int) -> list[tuple[tarfile.TarInfo, bytes]]:
    return [
        member("bundle/nodes.json", NODES),
        *(member(f"bundle/notes/{i}.txt", b"") for i in range(count - 1)),
    ]


def test_a_tarball_of_exactly_the_entry_cap_is_read_and_one_more_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_FILES", "20")
    at_cap = BundleFiles(tarball(tmp_path / "20.tar.gz", *snapshot_members(20)))
    assert len(at_cap.names) == 20
    message = refused(tarball(tmp_path / "21.tar.gz", *snapshot_members(21)))
    assert "holds 21 entries or more" in message and "MIGNURSE_MAX_BUNDLE_FILES" in message


def test_a_tarball_unpacking_to_exactly_the_byte_cap_is_read_and_one_more_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_BYTES", "8K")
    filler = 8 * 2**10 - len(NODES)
    at_cap = tarball(
        tmp_path / "at.tar.gz",
        member("bundle/nodes.json", NODES),
        member("bundle/notes.txt", b"n" * filler),
    )
    assert BundleFiles(at_cap).data("nodes.json") == NODES
    past = tarball(
        tmp_path / "past.tar.gz",
        member("bundle/nodes.json", NODES),
        member("bundle/notes.txt", b"n" * (filler + 1)),
    )
    message = refused(past)
    assert "unpacks to 8.0 KiB or more (at bundle/notes.txt)" in message
    assert "MIGNURSE_MAX_BUNDLE_BYTES" in message


def test_extended_headers_count_to_what_a_tarball_unpacks_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the members alone fit; with the 4 KiB pax header they read into memory, they do not
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_BYTES", "8K")
    archive = tarball(
        tmp_path / "b.tar.gz",
        pax_member(4 * 2**10),
        member("bundle/notes.txt", b"n" * (6 * 2**10)),
    )
    assert "unpacks to" in refused(archive)


def test_a_hostile_size_on_a_fifo_entry_is_not_counted_and_the_fifo_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_BYTES", "1M")
    archive = tarball(
        tmp_path / "b.tar.gz",
        member("bundle/", type=tarfile.DIRTYPE),
        member("bundle/nodes/", type=tarfile.DIRTYPE),
        member("bundle/nodes.json", NODES),
        member("bundle/pipe", type=tarfile.FIFOTYPE, size=5 * 2**20),
        member("bundle/events.json", b'{"items": []}'),
    )
    files = BundleFiles(archive)
    assert files.data("events.json") == b'{"items": []}'
    assert files.problems == [
        "b.tar.gz: skipped 1 entries that are not regular files (mignurse reads only files "
        "from an archive): bundle/pipe (a FIFO)"
    ]


@pytest.mark.parametrize(
    "passed_over",
    [
        "bundle/nodes/ip-10-0-41-87/core.4242",  # not a file mignurse reads
        "bundle/attachments/ip-10-0-41-87/kubelet.log",  # named like one, in no node folder
        "bundle/nodes/README",  # directly under nodes/
    ],
)
def test_a_large_file_mignurse_does_not_read_is_passed_over_not_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, passed_over: str
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "4K")
    archive = tarball(
        tmp_path / "b.tar.gz",
        member(passed_over, b"x" * 10_000),
        member("bundle/nodes/ip-10-0-41-87/kubelet.log", b"k" * 4096),  # exactly the cap
        member("bundle/nodes.json", NODES),
    )
    files = BundleFiles(archive)
    assert files.data("nodes.json") == NODES
    assert files.data("nodes/ip-10-0-41-87/kubelet.log") == b"k" * 4096
    assert files.problems == [] and files.cut == {}


def test_a_file_past_the_cap_is_cut_and_reading_stops_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "4K")
    archive = tarball(
        tmp_path / "b.tar.gz",
        member("bundle/nodes.json", NODES),
        member("bundle/nodes/ip-10-0-41-87/kubelet.log", b"k" * 4097),
        member("bundle/events.json", b'{"items": []}'),
    )
    files = BundleFiles(archive)
    assert files.data("nodes/ip-10-0-41-87/kubelet.log") == b"k" * 4096
    assert files.data("events.json") is None  # going on would unpack the rest
    assert files.problems == files.cut_notes()  # a stop, not an archive that ends early
    assert files.cut_notes() == [
        "bundle/nodes/ip-10-0-41-87/kubelet.log was cut at 4 KiB: it is 4.0 KiB, and only its "
        "first "
        "4 KiB were read (the rest of b.tar.gz was not read); MIGNURSE_MAX_FILE_BYTES=16K "
        "raises the limit"
    ]


# -- a folder -------------------------------------------------------------------------------------


def snapshot_folder(root: Path, files: int = 1, folders: int = 0) -> Path:
    root.mkdir()
    (root / "nodes.json").write_bytes(NODES)
    for i in range(files - 1):
        (root / f"note-{i}.txt").write_text("")
    for i in range(folders):
        (root / f"dir-{i}").mkdir()
    return root


def test_a_folder_at_the_file_cap_is_read_and_one_more_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_FILES", "10")
    assert len(BundleFiles(snapshot_folder(tmp_path / "ten", files=10)).names) == 10
    assert "holds 11 files or more" in refused(snapshot_folder(tmp_path / "eleven", files=11))


def test_a_folder_at_the_folder_cap_is_read_and_one_more_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_FILES", "10")
    assert BundleFiles(snapshot_folder(tmp_path / "ten", folders=10)).names == ["nodes.json"]
    assert "holds 11 folders or more" in refused(snapshot_folder(tmp_path / "eleven", folders=11))


def test_a_folder_whose_files_add_up_to_exactly_the_byte_cap_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_BYTES", str(len(NODES)))
    files = BundleFiles(snapshot_folder(tmp_path / "snap"))
    assert files.data("nodes.json") == NODES


def test_a_fifo_in_a_folder_where_a_journal_belongs_is_named_not_opened(tmp_path: Path) -> None:
    root = snapshot_folder(tmp_path / "snap")
    (root / "nodes" / "ip-10-0-41-87").mkdir(parents=True)
    os.mkfifo(root / "nodes" / "ip-10-0-41-87" / "kubelet.log")
    gathered = load_offline(root)
    assert "nodes/ip-10-0-41-87/kubelet.log is not a regular file: not read" in gathered.notices


def node_folder(root: Path, journal: bytes) -> Path:
    snapshot_folder(root)
    (root / "nodes" / "ip-10-0-41-87").mkdir(parents=True)
    (root / "nodes" / "ip-10-0-41-87" / "kubelet.log").write_bytes(journal)
    return root


def test_a_journal_of_exactly_the_file_cap_is_read_whole_and_one_past_it_is_cut_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_FILE_BYTES", "4K")
    whole = BundleFiles(node_folder(tmp_path / "at", b"k" * 4096))
    assert whole.data("nodes/ip-10-0-41-87/kubelet.log") == b"k" * 4096
    assert whole.problems == []
    past = BundleFiles(node_folder(tmp_path / "past", b"k" * 4097))
    for _reader in range(2):  # the journal and the timeline both read it
        assert past.data("nodes/ip-10-0-41-87/kubelet.log") == b"k" * 4096
    assert len(past.problems) == 1 and "kubelet.log was cut at 4 KiB" in past.problems[0]


def test_a_folder_whose_files_read_add_up_past_the_byte_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGNURSE_MAX_BUNDLE_BYTES", "8K")
    files = BundleFiles(node_folder(tmp_path / "snap", b"k" * (8 * 2**10)))
    files.data("nodes/ip-10-0-41-87/kubelet.log")
    with pytest.raises(SourceError, match=r"the files mignurse reads add up to 8\.0 KiB or more"):
        files.data("nodes.json")


def test_a_file_gone_from_the_folder_before_it_is_read_reads_as_absent_and_said(
    tmp_path: Path,
) -> None:
    # an extraction still running, or a clean-up under the reader's feet
    root = node_folder(tmp_path / "snap", b"")
    files = BundleFiles(root)
    (root / "nodes" / "ip-10-0-41-87" / "kubelet.log").unlink()
    assert files.data("nodes/ip-10-0-41-87/kubelet.log") is None
    assert files.problems == [
        "nodes/ip-10-0-41-87/kubelet.log could not be read: No such file or directory"
    ]


def test_only_folders_under_nodes_are_nodes(tmp_path: Path) -> None:
    root = node_folder(tmp_path / "snap", b"")
    (root / "cluster" / "raw").mkdir(parents=True)
    (root / "cluster" / "raw" / "events.json").write_text("{}")
    assert BundleFiles(root).node_dirs() == ["ip-10-0-41-87"]


def test_closing_a_bundle_lets_go_of_the_files_it_held(tmp_path: Path) -> None:
    files = BundleFiles(tarball(tmp_path / "b.tar.gz", member("bundle/nodes.json", NODES)))
    assert files.data("nodes.json") == NODES
    files.close()
    assert files.data("nodes.json") is None


def test_a_file_beside_the_top_folder_keeps_every_name_whole(tmp_path: Path) -> None:
    # `tar czf case.tar.gz notes.txt mignurse-bundle-x/`: no single top folder to drop
    archive = tarball(
        tmp_path / "case.tar.gz",
        member("notes.txt", b"node died at 03:01\n"),
        member("mignurse-bundle-x/nodes.json", NODES),
    )
    files = BundleFiles(archive)
    assert files.top == ""
    assert files.names == ["mignurse-bundle-x/nodes.json", "notes.txt"]
    assert files.data("mignurse-bundle-x/nodes.json") == NODES


def test_a_journal_swapped_for_a_fifo_after_listing_is_refused_not_waited_on(
    tmp_path: Path,
) -> None:
    root = node_folder(tmp_path / "snap", b"")
    files = BundleFiles(root)
    journal = root / "nodes" / "ip-10-0-41-87" / "kubelet.log"
    journal.unlink()
    os.mkfifo(journal)
    with pytest.raises(SourceError, match=r"kubelet\.log is not a regular file"):
        files.data("nodes/ip-10-0-41-87/kubelet.log")


def test_reading_a_folder_leaves_no_file_open(tmp_path: Path) -> None:
    files = BundleFiles(node_folder(tmp_path / "snap", b"k" * 100))
    before = len(os.listdir("/proc/self/fd"))
    for _read in range(5):
        assert files.data("nodes/ip-10-0-41-87/kubelet.log") == b"k" * 100
    assert len(os.listdir("/proc/self/fd")) == before


@pytest.mark.parametrize(
    ("cap", "advice"),
    [
        (4 * 2**10, "16K"),
        (256 * 2**10, "1M"),
        (64 * 2**20, "256M"),
        (256 * 2**20, "1G"),
        (1000, "4000"),
        (2 * 2**30, "4G"),  # four times over, but not past the largest value it takes
        (4 * 2**30, ""),  # the largest already: nothing to raise it to
    ],
)
def test_a_cut_advises_four_times_the_cap_as_the_variable_takes_it(cap: int, advice: str) -> None:
    assert FILE_BYTES.more_than(cap) == (f"MIGNURSE_MAX_FILE_BYTES={advice}" if advice else "")


def test_of_many_links_skipped_those_where_mignurse_reads_a_file_are_named_first(
    tmp_path: Path,
) -> None:
    links = [
        member(f"bundle/lib/libnvidia-{i}.so", type=tarfile.SYMTYPE, linkname="/usr/lib/x")
        for i in range(6)
    ]
    journal = member(
        "bundle/nodes/ip-10-0-41-87/kubelet.log", type=tarfile.SYMTYPE, linkname="/var/log/x"
    )
    archive = tarball(tmp_path / "b.tar.gz", member("bundle/nodes.json", NODES), *links, journal)
    [note] = BundleFiles(archive).problems
    assert note.startswith(
        "b.tar.gz: skipped 7 entries that are not regular files (mignurse reads only files from "
        "an archive): bundle/nodes/ip-10-0-41-87/kubelet.log (a symlink to '/var/log/x'), "
        "bundle/lib/libnvidia-0.so (a symlink to '/usr/lib/x'), "
    )
    assert note.endswith("libnvidia-3.so (a symlink to '/usr/lib/x') and 2 more")


def test_a_hard_link_skipped_is_named_with_what_it_links_to(tmp_path: Path) -> None:
    archive = tarball(
        tmp_path / "b.tar.gz",
        member("bundle/nodes.json", NODES),
        member(
            "bundle/nodes/ip-10-0-41-87/kubelet.log",
            type=tarfile.LNKTYPE,
            linkname="bundle/nodes.json",
        ),
    )
    assert BundleFiles(archive).problems == [
        "b.tar.gz: skipped 1 entries that are not regular files (mignurse reads only files "
        "from an archive): bundle/nodes/ip-10-0-41-87/kubelet.log (a hard link to "
        "'bundle/nodes.json')"
    ]
