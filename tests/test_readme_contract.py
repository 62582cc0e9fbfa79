"""The documented contract (finding ids, the JSON shape, the keys, the examples) is what
mignurse does: scripts are written against README.md and docs/commands.md."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mignurse.cli import main
from mignurse.diagnose.rules import MODULES

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
COMMANDS = ROOT / "docs" / "commands.md"
# every page a reader may copy a command from
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
SNAPSHOT = Path(__file__).parent / "corpus" / "incidents" / "karpenter-dcgm-repair-loop" / "full"


def _section(title: str) -> str:
    text = COMMANDS.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start : end if end >= 0 else len(text)]


def test_the_finding_table_lists_exactly_the_ids_the_rules_raise() -> None:
    section = _section("## `mignurse diagnose`")
    table = section[section.index("Finding ids") :]
    listed = re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(MODULES.values())


def test_the_json_example_has_the_keys_diagnose_prints(capsys: pytest.CaptureFixture[str]) -> None:
    section = _section("## `mignurse diagnose`")
    example = section[
        section.index("```json") + len("```json") : section.index(
            "```", section.index("```json") + 7
        )
    ]
    documented = json.loads(example.replace("…", ""))
    code = main(["diagnose", "--from", str(SNAPSHOT), "-o", "json"])
    assert code == 2
    printed = json.loads(capsys.readouterr().out)
    assert set(documented) == set(printed)
    assert set(documented["findings"][0]) == set(printed["findings"][0])
    assert set(documented["findings"][0]["evidence"][0]) == set(
        printed["findings"][0]["evidence"][0]
    )


def _json_example(text: str) -> dict[str, object]:
    start = text.index("```json") + len("```json")
    return json.loads(text[start : text.index("```", start)].replace("…", ""))


def test_the_readmes_diagnose_json_is_the_one_the_reference_documents() -> None:
    """The front door's copy of the `diagnose -o json` example cannot drift from the
    reference's, which the test above holds to what diagnose prints."""
    readme = README.read_text()
    front = _json_example(readme[readme.index("## Formats for scripts") :])
    assert front == _json_example(_section("## `mignurse diagnose`"))


def test_the_key_table_lists_every_key_the_help_screen_lists() -> None:
    """docs/commands.md's key table and `?` (tui/screens/help.py) name the same keys, each
    where it works."""
    from mignurse.tui.screens.help import KEYS

    section = _section("## The terminal app")
    table = section[section.index("| key | does | where |") :]
    rows = re.findall(r"^\| (.+?) \| .+ \| (.+?) \|$", table, re.MULTILINE)
    documented = {(keys.replace("`", ""), where.replace("`", "")) for keys, where in rows}

    missing = [
        (keys, place)
        for keys, _what, place in KEYS
        if not any(keys == k and place.split(",")[0] in w for k, w in documented)
    ]
    assert not missing, f"in `?` but not in the key table: {missing}"


# -- the documents' scenario examples, run on the simulator ---------------------------------
#
# Every command README.md or docs/ shows against a shipped scenario runs here, as a reader
# would type it: a block that starts `mignurse sim serve --scenario S --kubeconfig-out K`
# serves S (on a manual clock; several `--scenario` and the failing contexts as `sim serve`
# serves them), its `--kubeconfig K` and `export KUBECONFIG=K` point at it,
# and each command must end as shown (exit 0; a `mignurse: error` line is exit 2; `diagnose`
# by its worst finding) and print every line shown beneath it: the same words, digits, run
# ids and user@host aside, a node's short name matching its full one. The scenario table's
# commands run on their scenario too, `N` standing for the node its worst finding names.

SERVE = re.compile(r"mignurse sim serve --scenario (\S+) (?:.*?)--kubeconfig-out (\S+)")
TERMINAL_ONLY = ("names without their .compute.internal domain",)  # a TTY's footer


def _blocks() -> list[str]:
    return [
        block
        for page in PAGES
        for block in re.findall(
            r"^```(?:console|sh)\n(.*?)^```", page.read_text(), re.MULTILINE | re.DOTALL
        )
    ]


def _examples() -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(scenario, [(command, lines shown beneath it)]) from each `sim serve` in a block to
    the block's end or its next `sim serve`."""
    found: list[tuple[str, list[tuple[str, list[str]]]]] = []
    for block in _blocks():
        steps: list[tuple[str, list[str]]] | None = None
        for line in block.splitlines():
            command = line[2:] if line.startswith("$ ") else ""
            if not command and re.match(r"(mignurse|export|kubectl) ", line):
                command = line  # a sh block: commands only
            serve = SERVE.search(command)
            if serve:
                steps = []
                found.append((serve.group(1), steps))
            if steps is None:
                continue  # a block that serves no scenario: not an example of one
            if command:
                steps.append((command.split("  #")[0].strip(), []))
            elif steps:
                steps[-1][1].append(line)
    return [
        (scenario, [step for step in steps if not step[0].startswith("kubectl")])
        for scenario, steps in found
    ]


def _words(line: str) -> list[str]:
    """A line's words as compared: digits, run ids and user@host made alike, a node's domain
    dropped, anything cut short with "…" left out."""
    words = []
    for word in line.replace(".compute.internal", "").split():
        word = re.sub(r"\.[a-z]{2}-[a-z]+-\d$", "", word)  # ip-10-0-1-2.us-west-2
        if "…" in word:
            continue
        if re.fullmatch(r"[0-9a-f]{8}:?", word) and re.search(r"\d", word):
            word = "RUN"
        word = re.sub(r"\S+@\S+", "WHO@HOST", word)
        words.append(re.sub(r"\d", "9", word))
    return words


def _shows(shown: str, printed: list[str]) -> bool:
    want = _words(shown)
    return not want or any(all(w in _words(line) for w in want) for line in printed)


def _expected_exit(command: list[str], shown: list[str]) -> int:
    if shown and shown[0].startswith("mignurse: error"):
        return 2
    if "diagnose" in command:
        severities = {line.split()[0] for line in shown if line.strip()}
        return 2 if "CRITICAL" in severities else 1 if "WARNING" in severities else 0
    if "radar" in command:  # 1: a node is due for repair
        return 0 if shown[0].startswith("No GPU node is due") else 1
    return 0


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    """`mignurse ARGV` as typed; the app's commands are built, not run (no terminal here)."""
    from mignurse.cli import build_parser
    from mignurse.cli.app import bundle_app

    capsys.readouterr()
    if argv[:1] == ["open"]:
        bundle_app(build_parser().parse_args(argv))
        return 0, []
    code = main(argv)
    out = capsys.readouterr()
    return code, (out.out + out.err).splitlines()


@pytest.mark.parametrize(
    "scenario, steps",
    _examples(),
    ids=[f"{s}-{i}" for i, (s, _steps) in enumerate(_examples())],
)
def test_the_readme_scenario_examples_run_as_shown(
    scenario: str,
    steps: list[tuple[str, list[str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shlex

    monkeypatch.chdir(tmp_path)
    (serve_command, _), *rest = steps
    serve = SERVE.search(serve_command)
    assert serve is not None
    path = tmp_path / Path(serve.group(2)).name
    with _served(serve_command, path):
        kubeconfigs = {serve.group(2): str(path)}
        for command, shown in rest:
            for given, written in kubeconfigs.items():
                command = command.replace(given, written)
            if command.startswith("export KUBECONFIG="):
                monkeypatch.setenv("KUBECONFIG", command.split("=", 1)[1])
                continue
            argv = [w for w in shlex.split(command.replace("< /dev/null", ""))[1:] if w != "&"]
            code, printed = _run(argv, capsys)
            shown = [line for line in shown if line.strip() and not line.startswith(TERMINAL_ONLY)]
            assert code == _expected_exit(argv, shown), (command, printed)
            missing = [line for line in shown if not _shows(line, printed)]
            assert not missing, f"`{command}` printed:\n" + "\n".join(printed)


@contextlib.contextmanager
def _served(command: str, kubeconfig: Path) -> Iterator[None]:
    """What a `sim serve` line serves, on a manual clock, its kubeconfig at `kubeconfig`:
    one scenario as `SimCluster` serves it, several (and failing contexts) as `sim serve`
    serves them, in one `SimFleet`."""
    import shlex

    from mignurse.cli import build_parser
    from mignurse.sim import SimCluster, load_scenario
    from mignurse.sim.fleet import serve_fleet

    args = build_parser("sim").parse_args([w for w in shlex.split(command)[1:] if w != "&"])
    failing = [
        (kind, name) for kind in ("unreachable", "expired", "forbidden", "hung")
        for name in getattr(args, kind)
    ]  # fmt: skip
    if len(args.scenario) == 1 and not failing:
        with SimCluster(load_scenario(args.scenario[0]), speed=0) as sim:
            sim.write_kubeconfig(kubeconfig)
            yield
        return
    fleet = serve_fleet(kubeconfig, [load_scenario(n) for n in args.scenario], failing, speed=0)
    try:
        yield
    finally:
        fleet.stop()


def _scenario_rows() -> list[tuple[str, str]]:
    text = "\n".join(page.read_text() for page in PAGES)
    section = text.split("| scenario | what it shows |", 1)[1].split("\n\n", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+) \|$", section, re.MULTILINE)
    return [
        (name, command)
        for name, text in rows
        for command in re.findall(r"`(mignurse [^`]+)`", text)
    ]


@pytest.mark.parametrize("scenario, command", _scenario_rows())
def test_the_scenario_tables_commands_work_on_their_scenario(
    scenario: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shlex

    from mignurse.sim import SimCluster, load_scenario

    monkeypatch.chdir(tmp_path)
    with SimCluster(load_scenario(scenario), speed=0) as sim:
        monkeypatch.setenv("KUBECONFIG", str(sim.write_kubeconfig(tmp_path / "kc")))
        code, printed = _run(["diagnose", "-o", "json"], capsys)
        worst = json.loads("\n".join(printed))["findings"][0]["nodes"][0]
        argv = [worst if w == "N" else w for w in shlex.split(command)[1:]]
        code, printed = _run(argv, capsys)
        assert code == 0, (command, printed)
