"""What a first-time user meets on the command line: flags that do not apply are refused in
one line (or left out of the help), a blank context name is refused, the same bundle given
twice is opened once, the inventory's JSON names each cluster as `nodes` and `diagnose` do,
and listings are laid out for files as for terminals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mignurse.cli import build_parser, main
from mignurse.cli.app import bundle_app
from mignurse.session import BundleSource, FleetSource
from mignurse.sim import SimCluster, list_scenarios, load_scenario
from mignurse.tui.app import MigNurseApp
from mignurse.tui.panels import cluster_lines

INCIDENTS = Path(__file__).parent / "corpus" / "incidents"
LOOP = INCIDENTS / "karpenter-dcgm-repair-loop" / "full"
MNG = INCIDENTS / "mng-dcgm-repair-loop" / "karpenter-in-cluster"


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mignurse: error: "), err
    return err[0]


# -- open ------------------------------------------------------------------------------


def test_the_same_bundle_twice_is_opened_once() -> None:
    spelled_again = LOOP.parent / ".." / LOOP.parent.name / LOOP.name
    app = bundle_app(build_parser().parse_args(["open", str(LOOP), str(spelled_again)]))
    assert isinstance(app, MigNurseApp) and isinstance(app.source, BundleSource)


def test_a_bundle_given_twice_beside_another_is_one_cluster_of_two() -> None:
    app = bundle_app(build_parser().parse_args(["open", str(LOOP), str(MNG), str(LOOP)]))
    assert isinstance(app, MigNurseApp) and isinstance(app.source, FleetSource)
    assert [m.source.path for m in app.source.members] == [LOOP, MNG]
    # each opened bundle's line reads as a connected cluster's: name, state, what it is
    for line in cluster_lines(app.source, 200).plain.splitlines():
        assert "  opened  bundle as of " in line, line


def test_open_refuses_auto_collect_and_does_not_offer_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["open", str(LOOP), "--auto-collect", "."]) == 2
    assert "no node to collect" in one_error_line(capsys)
    assert main(["--auto-collect", ".", "open", str(LOOP)]) == 2
    assert "no node to collect" in one_error_line(capsys)
    with pytest.raises(SystemExit):
        main(["open", "--help"])
    assert "--auto-collect" not in capsys.readouterr().out


def test_open_reads_no_kubeconfig_and_refuses_a_context_selection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["open", "--help"])
    shown = capsys.readouterr().out
    assert "--kubeconfig" not in shown and "--context" not in shown, shown
    assert main(["--context", "prod", "open", str(LOOP)]) == 2
    assert "leave out --context" in one_error_line(capsys)


# -- the app's flags on every command ----------------------------------------------------

APP_FLAGS = ("--read-only", "--auto-collect", "--light", "--profile", "--region")


def test_each_command_lists_only_the_app_flags_it_uses_and_accepts_them_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    listed: dict[str, set[str]] = {}
    for name, command in commands.items():
        shown = command.format_help()
        listed[name] = {flag for flag in APP_FLAGS if f"  {flag}" in shown}
        # accepted, whatever the help says: a global flag may come after the command's name
        taken = {a.option_strings[0] for a in command._actions if a.option_strings}
        assert set(APP_FLAGS) <= taken | {"--auto-collect"} and "--read-only" in taken, name
    assert listed["sim"] == listed["nodes"] == listed["runbooks"] == set()
    assert listed["open"] == {"--light"}
    assert listed["demo"] == set(APP_FLAGS)
    assert listed["run"] == {"--read-only", "--profile", "--region"}
    assert listed["collect"] == listed["diagnose"] == {"--profile", "--region"}
    run_help = " ".join(commands["run"].format_help().split())
    assert "the app offers" not in run_help
    assert "only --dry-run runs" in run_help


# -- demo ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, words",
    [
        (["demo", "--clusters", "1"], "--clusters 1 is out of range: give 2 to 8"),
        (["demo", "--context", "foo"], "demo runs its own simulated clusters"),
        (["--context", "foo", "demo"], "leave out --context"),
        (["demo", "--all-contexts"], "leave out --all-contexts"),
        (["demo", "--clusters", "3", "--scenario", "dcgm-repair-loop"], "leave out --scenario"),
    ],
)
def test_demo_refuses_what_it_would_ignore(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert words in one_error_line(capsys)


def test_an_unknown_scenario_is_named_without_a_line_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for argv in (
        ["demo", "--scenario", "nosuch"],
        ["sim", "serve", "--scenario", "nosuch", "--kubeconfig-out", str(tmp_path / "k")],
    ):
        assert main(argv) == 2
        line = one_error_line(capsys)
        assert line.startswith("mignurse: error: nosuch: no such scenario"), line
        assert ":0" not in line and "healthy" in line  # the known ones are still named


# -- sim -------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--unreachable", "--expired", "--forbidden", "--hung"])
@pytest.mark.parametrize("name", ["", "  "])
def test_sim_serve_refuses_a_blank_context_name(
    flag: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "fleet.yaml"
    argv = ["sim", "serve", "--scenario", "healthy", flag, name, "--kubeconfig-out", str(out)]
    assert main(argv) == 2
    assert f"{flag} {name!r}" in one_error_line(capsys)
    assert not out.exists()


def test_sim_does_not_offer_a_context_selection_and_refuses_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["sim", "--help"], ["sim", "serve", "--help"], ["sim", "list", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        shown = capsys.readouterr().out
        assert "--context" not in shown and "--all-contexts" not in shown, argv
    assert main(["sim", "list", "--context", "prod"]) == 2
    assert "leave out --context" in one_error_line(capsys)
    assert main(["--all-contexts", "sim", "list"]) == 2
    assert "leave out --all-contexts" in one_error_line(capsys)


def test_sim_list_pads_every_name_to_the_longest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    known = list_scenarios()
    width = max(len(name) for name, _ in known)
    assert len(lines) == len(known)
    for line, (name, description) in zip(lines, known, strict=True):
        assert line.startswith(name + " " * (width - len(name) + 2)), line
        assert line[width + 2 :] == description


# -- runbooks --------------------------------------------------------------------------


def test_runbooks_piped_have_no_trailing_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbooks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("NAME") and "cordon-and-collect" in out
    assert [line for line in out.splitlines() if line != line.rstrip()] == []


# -- inventory JSON --------------------------------------------------------------------


def test_inventory_json_names_the_context_and_the_kubeconfig_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    scenario = load_scenario("dcgm-repair-loop")
    with SimCluster(scenario, speed=0) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "config")
        assert main(["--kubeconfig", str(kubeconfig), "inventory", "-o", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (record,) = document["clusters"]
    named = {"context": scenario.context_name, "cluster": scenario.cluster_name}
    assert scenario.context_name != scenario.cluster_name  # the test tells them apart
    assert {k: record[k] for k in named} == named
    (shared,) = [s for s in document["sharedCombinations"] if s["pool"] == "gpu-inference"]
    assert {k: shared[k] for k in named} == named
    assert all({k: h[k] for k in named} == named for h in shared["alsoRunningIn"])
    where = [h for d in document["differences"] for v in d["values"] for h in v["where"]]
    assert where and all({k: h[k] for k in named} == named for h in where)


def test_inventory_json_of_bundles_names_their_context_and_no_cluster_entry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "gone.tar.gz"
    assert main(["inventory", "--from", str(LOOP), "--from", str(missing), "-o", "json"]) == 2
    document = json.loads(capsys.readouterr().out)
    good, failed = document["clusters"]
    assert good["context"] and good["cluster"] is None and "pools" in good
    assert failed["context"] == "gone.tar.gz" and failed["cluster"] is None and failed["error"]
