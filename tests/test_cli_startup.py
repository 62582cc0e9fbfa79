"""What a command loads before it answers: an on-call engineer runs `mignurse nodes` beside
`kubectl get nodes`, and every library a read command imports without using it is start-up
time paid on each run. Each command runs in its own interpreter, as a user runs it, and the
modules it ended with are read back; a heavy import moved to a module's top is caught here.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from fromashell import mignurse_command

from mignurse.sim import SimCluster

# Runs one command as `mignurse` does, then writes the names of the modules it loaded.
WRAPPER = """
import json, sys
from mignurse.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as exc:  # --help and --version end here
    code = exc.code
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""

# What a one-shot read never needs: the app's terminal library, AWS's SDK, the kubernetes
# client's own package (its __init__ loads pydantic models and OAuth libraries), the
# runbook engine, the simulator.
NEVER_FOR_READS = (
    "textual",
    "boto3",
    "botocore",
    "kubernetes",
    "pydantic",
    "mignurse.tui",
    "mignurse.runner",
    "mignurse.sim",
)
# A piped node table is kubectl's plain text: no rich, no diagnosis, and no MIG state read on
# a node (the table reads the API's labels).
NEVER_FOR_THE_NODE_TABLE = (
    *NEVER_FOR_READS,
    "rich",
    "mignurse.diagnose",
    "mignurse.collect",
    "mignurse.model.mig",
)
# Help and the version read nothing: no connection, no kubeconfig; the parser finds the
# terminal's width without shutil (which brings bz2 and lzma).
NEVER_FOR_HELP = (
    *NEVER_FOR_THE_NODE_TABLE,
    "urllib3",
    "yaml",
    "orjson",
    "mignurse.cluster",
    "shutil",
)


@pytest.fixture(scope="module")
def kubeconfig(healthy: tuple[SimCluster, Path]) -> Path:
    return healthy[1]


def loaded_by(
    tmp_path: Path, *argv: str, ok: tuple[int, ...] = (0,)
) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules `mignurse ARGV` held when it ended (exit code in `ok`), and its run."""
    listing = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(listing), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in ok, done.stderr
    return set(json.loads(listing.read_text())), done


def among(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The packages of `names` that `modules` holds (a package or any module of it)."""
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize("output", ["table", "json", "wide"])
def test_the_node_table_loads_no_library_it_does_not_draw_with(
    kubeconfig: Path, tmp_path: Path, output: str
) -> None:
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "nodes", "-o", output)
    assert "ip-10-0-" in done.stdout  # it really listed the nodes
    assert among(modules, NEVER_FOR_THE_NODE_TABLE) == []


# Every command's module but the one run: a read loads only its own face.
OTHER_COMMANDS = tuple(
    f"mignurse.cli.{name}"
    for name in ("app", "collect", "diagnose", "inventory", "nodes", "probe", "radar",
                 "run_runbook", "runbooks", "runs", "sim", "unlock", "userdata", "watch")
)  # fmt: skip


@pytest.mark.parametrize("command", ["nodes", "diagnose"])
def test_a_read_loads_no_other_command_s_module(
    kubeconfig: Path, tmp_path: Path, command: str
) -> None:
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), command)
    assert "ip-10-0-" in done.stdout or "repair-risk" in done.stdout
    assert among(modules, OTHER_COMMANDS) == [f"mignurse.cli.{command}"]


def test_a_piped_diagnosis_loads_neither_the_app_nor_aws_nor_rich(
    kubeconfig: Path, tmp_path: Path
) -> None:
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "diagnose")
    assert "repair-risk" in done.stdout  # it really diagnosed, and printed a finding
    assert among(modules, (*NEVER_FOR_READS, "rich")) == []


@pytest.mark.parametrize(
    "argv", [("--help",), ("--version",), ("watch", "--help"), ("collect", "--help")]
)
def test_help_and_the_version_load_nothing_that_reaches_a_cluster(
    tmp_path: Path, argv: tuple[str, ...]
) -> None:
    modules, done = loaded_by(tmp_path, *argv)
    assert done.stdout.startswith(("usage: mignurse", "mignurse "))
    assert among(modules, NEVER_FOR_HELP) == []


def test_the_past_runs_load_neither_the_app_nor_the_kubernetes_client(tmp_path: Path) -> None:
    modules, done = loaded_by(tmp_path, "runs")
    assert done.returncode == 0
    assert among(modules, ("textual", "kubernetes", "pydantic", "mignurse.tui")) == []


class _Recorder(BaseHTTPRequestHandler):
    """An API server that answers an empty node list and keeps each request's headers."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        body = json.dumps(
            {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []}
            if self.path.startswith("/api/v1/nodes")
            else {"kind": "Status", "code": 404}
        ).encode()
        self.send_response(200 if self.path.startswith("/api/v1/nodes") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


def test_a_user_with_a_name_and_password_is_sent_as_kubectl_sends_it(tmp_path: Path) -> None:
    """Basic authentication, as the kubernetes client and kubectl send a kubeconfig's
    username and password (client-go rest.Config Username/Password); no token, no
    kubernetes package loaded for it."""
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = tmp_path / "config"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "basic",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {"server": f"http://127.0.0.1:{server.server_port}/"},
                        }
                    ],
                    "contexts": [{"name": "basic", "context": {"cluster": "c", "user": "u"}}],
                    "users": [{"name": "u", "user": {"username": "oncall", "password": "pä55"}}],
                }
            )
        )
        modules, done = loaded_by(tmp_path, "--kubeconfig", str(config), "nodes")
    finally:
        server.shutdown()
        server.server_close()
    assert "No GPU nodes" in done.stderr
    expected = "Basic " + base64.b64encode("oncall:pä55".encode("latin-1")).decode()
    assert _Recorder.seen and all(h.get("authorization") == expected for h in _Recorder.seen)
    assert among(modules, ("kubernetes",)) == []


def _parsed(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result: object = sorted(vars(parser.parse_args(argv)).items(), key=str)
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ["nodes", "-o", "json"],
        ["--kubeconfig=k", "--context", "c", "diagnose", "--node", "x"],
        ["--debug", "--read-only", "runbooks", "-o", "json"],
        ["nodes", "-o", "bogus"],  # the sub-parser's own error
        ["nodes", "--bogus"],  # the top level's error, with its usage
        ["nodes", "--help"],
        ["sim", "serve", "--speed", "x"],
        ["--context", "nodes"],  # a context named like a command is no command
        ["--cont", "nodes", "diagnose"],  # an abbreviated flag: the whole parser judges
        ["bogus"],
    ],
)
def test_a_command_read_by_its_own_sub_parser_reads_as_the_whole_parser_reads_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mignurse.cli import build_parser, named_command

    monkeypatch.setenv("COLUMNS", "100")  # both draw their usage for the same terminal
    assert _parsed(build_parser(named_command(argv)), argv) == _parsed(build_parser(), argv)


# A one-shot read as the whole process: its collector as it ends, and where it ends (with
# os._exit once it has answered, not through the interpreter's exit).
GC_WRAPPER = """
import atexit, gc, json, os, sys

real_exit = os._exit

def ended_here(code):
    with open(os.environ["GC_OUT"], "w") as out:
        json.dump({"threshold": gc.get_threshold(), "code": code}, out)
    real_exit(code)

os._exit = ended_here
from mignurse.entry import run
sys.argv = ["mignurse", *sys.argv[2:]]
run()
print("run returned", file=sys.stderr)
sys.exit(99)
"""


def test_a_one_shot_read_collects_rarely_and_ends_where_it_answered(
    kubeconfig: Path, tmp_path: Path
) -> None:
    from mignurse.cli import ONE_SHOT_GC_THRESHOLDS

    out = tmp_path / "gc.json"
    done = subprocess.run(
        [sys.executable, "-c", GC_WRAPPER, "-", "--kubeconfig", str(kubeconfig), "nodes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "GC_OUT": str(out)},
    )
    assert done.returncode == 0, done.stderr
    assert "ip-10-0-" in done.stdout  # the whole table written before the end
    assert done.stdout.endswith("\n")
    ended = json.loads(out.read_text())
    assert tuple(ended["threshold"]) == ONE_SHOT_GC_THRESHOLDS
    assert ended["code"] == 0


@pytest.mark.parametrize("command", [["nodes"], ["diagnose"], ["nodes", "-o", "json"]])
def test_a_read_that_ends_where_it_answered_leaves_no_file_of_its_kubeconfig(
    kubeconfig: Path, tmp_path: Path, command: list[str]
) -> None:
    """The certificate data of a kubeconfig (its CA here; a client's key the same way) is
    written to private temporary files for the TLS library, removed as the process ends."""
    assert "certificate-authority-data" in kubeconfig.read_text()  # so a file is written
    folder = tmp_path / "tmp"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TMPDIR": str(folder)},
    )
    assert done.returncode == 0, done.stderr
    assert list(folder.iterdir()) == []


def test_a_read_run_inside_another_program_leaves_its_collector_alone(
    kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tests (and any program that calls `main` with its words) keep their collector."""
    import gc

    from mignurse.cli import main

    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    assert main(["--kubeconfig", str(kubeconfig), "nodes"]) == 0
    assert "ip-10-0-" in capsys.readouterr().out
    assert gc.get_threshold() == threshold
    # nothing frozen (a freeze moves every live object: thousands); what an earlier test in
    # this process froze may still be freed meanwhile, one by one
    assert gc.get_freeze_count() <= frozen


@pytest.mark.parametrize(
    ("proxy_env", "reached"),
    [
        ({"HTTPS_PROXY": "http://127.0.0.1:{closed}", "NO_PROXY": "127.0.0.1"}, True),
        ({"https_proxy": "http://127.0.0.1:{closed}", "no_proxy": ".internal,127.0.0.0/8"}, True),
        ({"HTTPS_PROXY": "http://127.0.0.1:{closed}", "NO_PROXY": "10.0.0.1"}, False),
        ({"HTTP_PROXY": "http://127.0.0.1:{closed}"}, True),  # http's proxy, not https's
    ],
)
def test_the_environment_s_proxy_is_taken_or_passed_by_as_the_kubernetes_client_chooses(
    kubeconfig: Path, proxy_env: dict[str, str], reached: bool
) -> None:
    """HTTPS_PROXY for an https server unless NO_PROXY names its host or network, as the
    kubernetes client (kubernetes-client/python v37.0.3 kubernetes/client/rest.py
    `should_bypass_proxies`) and Go's http.ProxyFromEnvironment choose. The proxy here
    listens nowhere: a request sent through it fails in one line naming it."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    env = {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in ("https_proxy", "http_proxy", "all_proxy", "no_proxy")
    }
    env.update({k: v.format(closed=closed) for k, v in proxy_env.items()})
    done = subprocess.run(
        [sys.executable, "-m", "mignurse", "--kubeconfig", str(kubeconfig), "nodes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    if reached:
        assert done.returncode == 0, done.stderr
        assert "ip-10-0-" in done.stdout
    else:
        assert done.returncode != 0
        assert f"through proxy http://127.0.0.1:{closed}" in done.stderr


NASTY = [
    "plain",
    "tab\there",
    "line\nfeed",
    "\x1b]52;c;cGF5bG9hZA==\x07",
    "\u202egnp.exe",
    "漢字 é",
    "👩\u200d🔧 and 🏳️\u200d🌈",
    "[bold]markup[/]",
    "cr\rover",
    "\x9b31m",
    "zero\u200bwidth",
    "",
]


@pytest.mark.parametrize("nasty", NASTY)
def test_a_piped_finding_reads_as_rich_wrote_it(
    nasty: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, findings are written without rich; what is written is what rich wrote there
    (no style on a pipe), byte for byte, whatever the cluster put in the text."""
    from datetime import UTC, datetime, timedelta

    from mignurse import render
    from mignurse.diagnose.findings import Evidence, Finding

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    now = datetime(2026, 12, 6, 4, 0, tzinfo=UTC)
    evidence = tuple(
        Evidence(time=None if i % 3 == 0 else now - timedelta(minutes=i), source=nasty, text=nasty)
        for i in range(12)
    )
    findings = [
        Finding(
            "node-repair-loop", "critical", nasty, (nasty, "b"), nasty, evidence, (nasty,), now
        ),
        Finding("repair-risk", "info", "", (), nasty),
    ]
    plain, drawn = io.StringIO(), io.StringIO()
    render.print_findings(findings, now + timedelta(seconds=75), out=plain, as_of="collection")
    monkeypatch.setattr(render, "_forced_terminal", lambda: True)  # rich draws it, unstyled
    render.print_findings(findings, now + timedelta(seconds=75), out=drawn, as_of="collection")
    assert plain.getvalue() == drawn.getvalue()
    assert "\x1b" not in plain.getvalue() and "\u202e" not in plain.getvalue()


def test_a_kubeconfig_that_skips_tls_verification_prints_no_warning_as_kubectl_prints_none(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """`insecure-skip-tls-verify: true` is the user's choice in the kubeconfig: the nodes
    come back with nothing on stderr (urllib3's InsecureRequestWarning is a path and a long
    line), while an unverified request to another host still warns."""
    config = yaml.safe_load(kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"].pop("certificate-authority-data", None)
        entry["cluster"].pop("certificate-authority", None)
        entry["cluster"]["insecure-skip-tls-verify"] = True
    skipping = tmp_path / "config"
    skipping.write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, "-W", "default", "-m", "mignurse", "--kubeconfig", str(skipping), "nodes"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "ip-10-0-" in done.stdout
    assert done.stderr == ""

    import warnings

    import urllib3

    from mignurse.cluster.transport import Configuration, RestClient

    configuration = Configuration()
    configuration.host = config["clusters"][0]["cluster"]["server"]
    configuration.verify_ssl = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        RestClient(configuration)
        for host in ("127.0.0.1", "10.0.0.9"):
            warnings.warn(
                f"Unverified HTTPS request is being made to host '{host}'. Adding certificate "
                "verification is strongly advised.",
                urllib3.exceptions.InsecureRequestWarning,
                stacklevel=1,
            )
    assert [str(w.message).split("'")[1] for w in caught] == ["10.0.0.9"]


# Listing the runbooks reads their YAML and the steps' table of harms: none of the steps it
# would run (and through them the cluster client and urllib3), the diagnosis (its finding ids
# are a table too), the node model, the collector, node access or AWS's SDK loads; piped, the
# list of plain words is written without rich.
NEVER_FOR_THE_RUNBOOK_LIST = (
    "rich",
    "textual",
    "boto3",
    "botocore",
    "kubernetes",
    "urllib3",
    "mignurse.tui",
    "mignurse.sim",
    "mignurse.collect",
    "mignurse.cluster",
    "mignurse.diagnose",
    "mignurse.model",
    "mignurse.gpu",
    "mignurse.evidence",
    "mignurse.fleetview",
    "mignurse.nodeaccess",
    "mignurse.runner.core",
    "mignurse.runner.plan",
    "mignurse.runner.lock",
    "shutil",
)


@pytest.mark.parametrize("output", ["table", "json"])
def test_the_runbook_list_loads_no_step_cluster_client_diagnosis_or_aws_sdk(
    tmp_path: Path, output: str
) -> None:
    modules, done = loaded_by(tmp_path, "runbooks", "-o", output)
    assert "pause-node-repair" in done.stdout and "reapply-mig-no-hooks" in done.stdout
    assert '"high"' in done.stdout if output == "json" else " high " in done.stdout
    assert among(modules, NEVER_FOR_THE_RUNBOOK_LIST) == []
    assert [m for m in modules if m.startswith("mignurse.runner.steps.")] == []


def test_a_live_diagnosis_loads_none_of_the_offline_readers(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """A bundle's readers (the bounded tar reader, each node's files) serve `--from` only."""
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "diagnose")
    assert "repair-risk" in done.stdout
    offline = (
        "mignurse.diagnose.sources.offline",
        "mignurse.diagnose.sources.files",
        "mignurse.diagnose.sources.node_files",
        "tarfile",
    )
    assert among(modules, offline) == []


def test_a_live_diagnosis_loads_no_parser_for_files_only_a_bundle_holds(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """A live read has the cluster's objects, not a node's files: the rules that read a
    node's journal and GPU health ran, and none of the evidence parsers loaded (the
    journal's, GPU health's, nvidia-smi's, cloud-init's, the container logs'), nor the XML
    library and the foreign bundles' reader: they wait for `--from`."""
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "diagnose")
    assert "repair-risk" in done.stdout
    rules = ("mignurse.diagnose.rules.mig_hook", "mignurse.diagnose.rules.hardware")
    assert among(modules, rules) == sorted(rules)  # the rules that read journals did load
    bundle_only = (
        "mignurse.evidence.journal",
        "mignurse.evidence.gpu_health",
        "mignurse.evidence.nvsmi",
        "mignurse.evidence.nvml_json",
        "mignurse.evidence.cloudinit",
        "mignurse.evidence.containerlog",
        "mignurse.diagnose.foreign_bundles",
        "xml.etree",
        "xml.parsers",
    )
    assert among(modules, bundle_only) == []


def test_every_evidence_parser_is_still_reached_through_the_package() -> None:
    """The package loads each parser on first use; every name it lists is the parser's own
    object, and a name it does not have is still missing."""
    import importlib

    import mignurse.evidence as evidence

    for name in evidence.__all__:
        home = importlib.import_module(f"mignurse.evidence.{evidence._HOMES[name]}")
        assert getattr(evidence, name) is getattr(home, name), name
    assert not hasattr(evidence, "parse_everything")


def test_a_live_diagnosis_loads_neither_the_history_writer_nor_its_watcher(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """The rules read lifecycles; the recorder that writes them, and the watcher it follows,
    serve `watch` and the app."""
    modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "diagnose")
    assert "repair-risk" in done.stdout
    writer = ("mignurse.cluster.history.recorder", "mignurse.cluster.watcher")
    assert among(modules, writer) == []


def test_a_live_diagnosis_without_a_history_file_loads_no_sqlite_and_no_statistics(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """With no `mignurse watch` history on disk there is nothing for SQLite to open, and the
    medians of replacement lifetimes are taken only where a pool has replacements."""
    modules, done = loaded_by(
        tmp_path, "--kubeconfig", str(kubeconfig), "diagnose", "--state-dir", str(tmp_path)
    )
    assert "repair-risk" in done.stdout
    from mignurse.paths import HISTORY_FILENAME

    assert not (tmp_path / HISTORY_FILENAME).exists()
    unused = ("sqlite3", "mignurse.cluster.history.store", "statistics")
    assert among(modules, unused) == []


def test_the_diagnosis_engine_loads_no_sqlite_until_a_history_file_is_read() -> None:
    """Lifecycles and flips are plain records; the store that reads them off disk loads when
    a history is opened."""
    probe = "import json, sys, mignurse.diagnose.engine; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    modules = set(json.loads(done.stdout))
    assert "mignurse.diagnose.rules.repair_loop" in modules  # the rules did register
    store = ("sqlite3", "mignurse.cluster.history.store", "mignurse.cluster.history.recorder")
    assert among(modules, store) == []


def test_the_past_runs_piped_load_no_rich_runner_plan_or_node_access(tmp_path: Path) -> None:
    from mignurse.runner.audit import Audit

    audit = Audit()
    audit.write("started", "r-7f3a", runbook="cordon", target="ip-10-0-1-5", context="prod")
    audit.write("finished", "r-7f3a", outcome="verified")
    modules, done = loaded_by(tmp_path, "runs")
    assert "r-7f3a" in done.stdout and "cordon" in done.stdout and "verified" in done.stdout
    # The audit log is JSON lines: no YAML reader either (only a YAML input loads it).
    unused = ("rich", "mignurse.runner.outcome", "mignurse.runner.plan", "mignurse.collect", "yaml")
    assert among(modules, unused) == []


@pytest.mark.parametrize("columns", ["", "0", "x", "37", "200"])
def _sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


@pytest.mark.parametrize("columns", ["", "0", "x", "37", "200"])
def test_help_is_as_wide_as_argparse_makes_it_without_the_parsers_own_formatter(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    """The width found without shutil is shutil's: $COLUMNS when a positive number, else
    the terminal's, else 80."""
    from mignurse.cli import build_parser

    monkeypatch.setenv("COLUMNS", columns)
    ours = build_parser("nodes")
    plain = build_parser("nodes")
    for parser in (plain, *_sub_parsers(plain).values()):
        monkeypatch.setattr(parser, "formatter_class", argparse.HelpFormatter)
    assert ours.format_help() == plain.format_help()
    assert ours.format_help().startswith("usage: mignurse")
    assert _sub_parsers(ours)["nodes"].format_help() == _sub_parsers(plain)["nodes"].format_help()


# Runs `mignurse diagnose` noting, when its live read is begun, whether the rules had loaded.
BEGUN_WRAPPER = """
import json, sys
import mignurse.cli.diagnose as face
from mignurse.cli import build_parser

begun = face.read_clusters_begun
seen = []

def noting(*args, **kwargs):
    seen.append("mignurse.diagnose.engine" in sys.modules)
    return begun(*args, **kwargs)

face.read_clusters_begun = noting
face.cmd_diagnose(build_parser("diagnose").parse_args(sys.argv[2:]))
with open(sys.argv[1], "w") as out:
    json.dump({"seen": seen, "rules": "mignurse.diagnose.engine" in sys.modules}, out)
"""


def test_a_live_diagnosis_begins_its_read_before_it_loads_the_rules(
    kubeconfig: Path, tmp_path: Path
) -> None:
    """The rules load while the API server answers, not before the first request."""
    noted = tmp_path / "noted.json"
    done = subprocess.run(
        [sys.executable, "-c", BEGUN_WRAPPER, str(noted), "--kubeconfig", str(kubeconfig),
         "diagnose"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert "repair-risk" in done.stdout, done.stderr
    assert json.loads(noted.read_text()) == {"seen": [False], "rules": True}


def test_a_live_diagnosis_asks_only_for_what_the_rules_read(
    healthy: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    """Events about Pods (no rule reads them) stay on the server; Karpenter's lists are
    asked for without its discovery first; each GPU plugin selector is asked once."""
    sim, kubeconfig = healthy
    already = len(sim.requests)
    _modules, done = loaded_by(tmp_path, "--kubeconfig", str(kubeconfig), "diagnose")
    assert "repair-risk" in done.stdout
    asked = sim.requests[already:]
    events = [r for r in asked if r["path"] == "/api/v1/events"]
    assert events and all(r["query"].get("fieldSelector") == "involvedObject.kind!=Pod"
                          for r in events)  # fmt: skip
    paths = [r["path"] for r in asked]
    assert "/apis/karpenter.sh/v1" not in paths
    assert "/apis/karpenter.sh/v1/nodeclaims" in paths
    from mignurse.cluster.dra import DEVICE_PLUGIN_SELECTORS, DRA_PLUGIN_SELECTORS

    selectors = [r["query"].get("labelSelector") for r in asked if r["path"] == "/api/v1/pods"]
    assert sorted(selectors) == sorted((*DRA_PLUGIN_SELECTORS, *DEVICE_PLUGIN_SELECTORS))


# A Ctrl-C that lands while `mignurse` still loads: raised by the import of a module every
# command needs, as the signal handler raises it wherever the main thread is.
INTERRUPTED_WHILE_LOADING = """
import sys

module = sys.argv[1]

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == module:
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["mignurse", *sys.argv[2:]]
from mignurse.entry import run
run()
"""


@pytest.mark.parametrize("module", ["argparse", "mignurse.cli.nodes", "urllib3"])
def test_a_ctrl_c_while_the_command_loads_ends_it_with_130_and_no_traceback(
    module: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "config"  # never read: the interrupt comes first
    argv = [sys.executable, "-c", INTERRUPTED_WHILE_LOADING, module]
    argv += ["--kubeconfig", str(kubeconfig), "nodes"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "", done.stderr


# A command that has answered and then waits at exit, as the interpreter waits for a worker
# thread or an exit handler: the Ctrl-C that comes then.
INTERRUPTED_AT_EXIT = """
import atexit, sys, threading, time

import mignurse.cli
from mignurse.cluster import kubeconfig

def answered() -> int:
    kubeconfig._data_file("a2V5")  # a client key written out, as a kubeconfig's data is
    print("answered", flush=True)
    if sys.argv[2] == "thread":  # a worker thread the interpreter joins at exit
        threading.Thread(target=time.sleep, args=(60,)).start()
    else:
        atexit.register(time.sleep, 60)
    return int(sys.argv[1])

mignurse.cli.main = answered
from mignurse.entry import run
run()
"""


@pytest.mark.parametrize("waits_on", ["thread", "exit handler"])
@pytest.mark.parametrize("code", [0, 2])
def test_a_ctrl_c_after_the_command_answered_ends_it_at_once_with_its_own_code(
    code: int, waits_on: str, tmp_path: Path
) -> None:
    import signal
    import time

    folder = tmp_path / "tmp"
    folder.mkdir()
    run = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_AT_EXIT, str(code), waits_on],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(folder)},
    )
    try:
        assert run.stdout is not None and run.stdout.readline() == "answered\n"
        time.sleep(0.5)  # in the exit's wait
        run.send_signal(signal.SIGINT)
        assert run.wait(timeout=30) == code  # not 130, not killed by the signal (-2)
    finally:
        run.kill()
        run.wait()
    # and nothing said: no "Exception ignored in …" KeyboardInterrupt from the exit's work
    assert run.stderr is not None and run.stderr.read() == ""
    assert list(folder.iterdir()) == []  # the key's file removed all the same


# A command that has answered, and an object of it that the interpreter's teardown would
# free: freeing it sends the Ctrl-C, where a second Ctrl-C pressed as a collection ends came.
INTERRUPTED_IN_TEARDOWN = """
import os, signal, sys, time

import mignurse.cli

class Freed:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)

held = Freed()

def answered() -> int:
    print("answered", flush=True)
    return int(sys.argv[1])

mignurse.cli.main = answered
from mignurse.entry import run
run()
"""


@pytest.mark.parametrize("code", [0, 130])
def test_a_ctrl_c_as_the_interpreter_would_tear_down_leaves_the_command_s_code(
    code: int,
) -> None:
    """The teardown runs with the signal handlers already gone: there the Ctrl-C killed the
    process (-2) after everything was written. It ends before any of that."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_TEARDOWN, str(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (code, "answered\n", "")


@pytest.mark.parametrize(
    ("signum", "code"), [(2, 130), (15, 143), (1, 129)], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_a_read_ended_by_a_signal_while_it_waits_leaves_no_file_of_its_kubeconfig(
    failing_fleet: tuple[object, Path], tmp_path: Path, signum: int, code: int
) -> None:
    """`kill` (or a closed terminal, or Ctrl-C) while `nodes` waits on a server that never
    answers: it ends as Ctrl-C ends it, 128 + the signal, no traceback, and the files its
    kubeconfig's certificate data was written to are gone, where SIGTERM and SIGHUP ended
    the process on the spot and left them."""
    import signal
    import time

    _, kubeconfig = failing_fleet
    folder = tmp_path / "tmp"
    folder.mkdir()
    argv = ["--kubeconfig", str(kubeconfig), "--context", "prod-ap", "nodes"]
    run = subprocess.Popen(
        mignurse_command(*argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(folder)},
    )
    try:
        deadline = time.monotonic() + 60
        while not list(folder.iterdir()):  # its data written: it is connecting by now
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # waiting on the server
        run.send_signal(signal.Signals(signum))
        assert run.wait(timeout=60) == code
    finally:
        run.kill()
        run.wait()
    assert run.stderr is not None and "Traceback" not in run.stderr.read()
    assert list(folder.iterdir()) == []
