"""A bundle appears under its name whole, or not at all: it is written under a temporary name
beside it and renamed once complete. A full disk is one line that says so and where, with
exit 2 and nothing half-written left in the folder; a collection that fails is removed."""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.collect import bundle as bundle_module
from mignurse.sim import SimCluster, load_scenario


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The healthy scenario on a still clock: one gpu-train node is a quick collection."""
    folder = tmp_path_factory.mktemp("sim")
    with SimCluster(load_scenario("healthy"), speed=0) as sim:
        yield sim.write_kubeconfig(folder / "config")


def _collect_argv(kubeconfig: Path, out: Path) -> list[str]:
    return ["--kubeconfig", str(kubeconfig), "collect", "--nodepool", "gpu-train", "-o", str(out)]


def _folder_holds_nothing_but(folder: Path, *names: str) -> None:
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)


def test_a_file_size_limit_mid_bundle_is_one_line_and_leaves_no_partial_bundle(
    kubeconfig: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bundles"
    out.mkdir()

    def small_disk() -> None:
        # What a full disk does to a write, without root: past RLIMIT_FSIZE, write() fails
        # with EFBIG (SIGXFSZ ignored, as setrlimit(2) describes).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, 32 * 1024))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBE", "MIGNURSE"))}
    # no bytecode written under the limit: CPython's cache writer ignores a short write and
    # would leave a module's cache cut at the limit for every later run to fail on
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "mignurse", *_collect_argv(kubeconfig, out / "b.tar.gz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=small_disk,  # the limit is the child's only
        check=False,
    )

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"mignurse: error: no space left on {out} (file too large for it) for b.tar.gz: free "
        "space or pass -o elsewhere; no partial bundle was left"
    )
    _folder_holds_nothing_but(out)


def test_a_full_disk_mid_bundle_says_so_and_removes_what_was_written(
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    written = {"bytes": 0}
    real_write = os.write

    def filling_disk(fd: int, data: bytes | memoryview) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path / ".b.tar.gz.")):
            if written["bytes"] > 16 * 1024:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written["bytes"] += len(data)
        return real_write(fd, data)

    monkeypatch.setattr(bundle_module.os, "write", filling_disk)
    code = main(_collect_argv(kubeconfig, tmp_path / "b.tar.gz"))

    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (
        f"mignurse: error: no space left on {tmp_path} for b.tar.gz: free space or pass -o "
        "elsewhere; no partial bundle was left"
    )
    assert written["bytes"] > 0  # the bundle was being written when the disk filled
    _folder_holds_nothing_but(tmp_path)


def test_a_bundle_is_written_beside_its_name_and_renamed_when_whole(
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: list[list[str]] = []
    real_replace = os.replace

    def watching(src: str | Path, dst: str | Path, **kwargs: object) -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        real_replace(src, dst, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(bundle_module.os, "replace", watching)
    assert main(_collect_argv(kubeconfig, tmp_path / "b.tar.gz")) == 0, capsys.readouterr().err

    [before] = seen
    assert "b.tar.gz" not in before and len(before) == 1 and before[0].startswith(".b.tar.gz.")
    _folder_holds_nothing_but(tmp_path, "b.tar.gz")
    with tarfile.open(tmp_path / "b.tar.gz") as whole:
        assert any(name.endswith("/SHA256SUMS") for name in whole.getnames())
    assert os.stat(tmp_path / "b.tar.gz").st_mode & 0o777 == 0o600


def test_a_failure_mid_collection_leaves_no_bundle(
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug while packing a node")

    monkeypatch.setattr(bundle_module.BundleWriter, "add_node_tar", broken)
    code = main(_collect_argv(kubeconfig, tmp_path / "b.tar.gz"))

    assert code == 3, capsys.readouterr().err  # a bug stays a bug, reported as one
    _folder_holds_nothing_but(tmp_path)


# -- a FIFO named by -o ----------------------------------------------------------------------


def test_a_fifo_nobody_reads_is_one_line_after_a_bounded_wait(
    kubeconfig: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Opening a FIFO with no reader blocks until one comes (fifo(7)), and no signal ended
    that wait: the collection hung, silent, and a runbook's collect step with it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(bundle_module, "FIFO_READER_SECONDS", 0.3)
    code = main(_collect_argv(kubeconfig, fifo))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (
        f"mignurse: error: no process reads the FIFO {fifo} (waited 0.3 s): start its reader "
        f"first (e.g. cat {fifo} > bundle.tar.gz), or pass -o a file"
    )


def _collecting_into_a_fifo(kubeconfig: Path, fifo: Path) -> subprocess.Popen[str]:
    """`collect -o FIFO` started, and past its first line: waiting for a reader."""
    os.mkfifo(fifo)
    collect = subprocess.Popen(
        [sys.executable, "-m", "mignurse", *_collect_argv(kubeconfig, fifo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert collect.stderr is not None
    assert f" into {fifo} (" in collect.stderr.readline()
    return collect


def test_a_fifo_whose_reader_comes_late_gets_the_whole_bundle(
    kubeconfig: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    collect = _collecting_into_a_fifo(kubeconfig, fifo)
    try:
        with open(fifo, "rb") as reader:
            (tmp_path / "b.tar.gz").write_bytes(reader.read())
        out, err = collect.communicate(timeout=120)
        assert collect.returncode == 0, err
    finally:
        collect.kill()
        collect.wait()
    # no size, and no `diagnose --from` a FIFO: what read it holds the bundle
    assert re.fullmatch(
        rf"bundle: written to {re.escape(str(fifo))}, 4/4 nodes collected in \S+ s\n", out
    )
    with tarfile.open(tmp_path / "b.tar.gz") as whole:
        assert any(name.endswith("/SHA256SUMS") for name in whole.getnames())


def test_ctrl_c_while_a_fifo_waits_for_its_reader_says_nothing_was_written(
    kubeconfig: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    collect = _collecting_into_a_fifo(kubeconfig, fifo)
    try:
        time.sleep(0.5)  # waiting for a reader by now
        collect.send_signal(signal.SIGINT)
        assert collect.wait(timeout=60) == 130
    finally:
        collect.kill()
        collect.wait()
    assert collect.stderr is not None
    assert collect.stderr.read().splitlines() == [f"interrupted: nothing was written to {fifo}"]
