"""The real-evidence corpus keeps its promise: every file says where its shape was seen."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"
META = {"README.md", "SOURCE"}


def _provenance(path: Path) -> str:
    """The first non-empty line of the file's own `.source`, else of the nearest SOURCE."""
    candidates = [path.with_name(path.name + ".source")]
    folder = path.parent
    while True:
        candidates.append(folder / "SOURCE")
        if folder == CORPUS:
            break
        folder = folder.parent
    for candidate in candidates:
        if candidate.is_file():
            lines = [ln.strip() for ln in candidate.read_text().splitlines() if ln.strip()]
            return lines[0] if lines else ""
    return ""


def _data_files() -> list[Path]:
    return sorted(
        p
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in META and not p.name.endswith(".source")
    )


def test_every_corpus_file_says_where_its_shape_was_seen() -> None:
    missing = [str(p.relative_to(CORPUS)) for p in _data_files() if not _provenance(p)]
    assert not missing, f"corpus files without a source line: {missing}"


def test_source_lines_name_an_upstream_or_a_page() -> None:
    # A repository with a tag or commit, or an address: "our simulator" is not a source.
    vague = []
    for path in _data_files():
        line = _provenance(path)
        if not ("@" in line or "://" in line):
            vague.append(f"{path.relative_to(CORPUS)}: {line}")
    assert not vague, f"source lines that name no upstream or page: {vague}"


def test_source_files_belong_to_a_data_file() -> None:
    orphans = [
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*.source")
        if not p.with_name(p.name.removesuffix(".source")).exists()
    ]
    assert not orphans, f".source files without their data file: {orphans}"
