"""The `mignurse` command: argument parsing and the command-line faces, one module per
command (or family of commands), each adding its own sub-parser.

Every failure a user can cause or meet (bad flags, a wrong context, a dead API server,
RBAC) ends as one line on stderr and a non-zero exit code, never a traceback; `--debug`
shows the traceback for bug reports. That handling is here, in `_main`, for every command.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from mignurse import __version__
from mignurse.cli.common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    SubCommands,
    app_options,
    connection_options,
    global_options,
)
from mignurse.inert import inert, inert_name


def _module(name: str) -> Any:
    """A command's module (`mignurse.cli.NAME`), loaded when its command is parsed or run:
    `mignurse nodes` loads neither the app's, the collector's nor the runbooks' modules."""
    return importlib.import_module(f"mignurse.cli.{name}")


# Each adds the sub-parsers of its commands in this order, the order `mignurse --help` lists
# them.
_PARSERS: tuple[tuple[tuple[str, ...], Callable[[Any], None]], ...] = (
    (("nodes",), lambda sub: _module("nodes").add_parser(sub)),
    (("diagnose",), lambda sub: _module("diagnose").add_parser(sub)),
    (("inventory",), lambda sub: _module("inventory").add_parser(sub)),
    (("radar",), lambda sub: _module("radar").add_parser(sub)),
    (("watch",), lambda sub: _module("watch").add_parser(sub)),
    (("collect",), lambda sub: _module("collect").add_parser(sub)),
    (("probe",), lambda sub: _module("probe").add_parser(sub)),
    (("userdata",), lambda sub: _module("userdata").add_parser(sub)),
    (("open", "demo"), lambda sub: _module("app").add_parsers(sub)),
    (("sim",), lambda sub: _module("sim").add_parser(sub)),
    (("runbooks",), lambda sub: _module("runbooks").add_parser(sub)),
    (("run",), lambda sub: _module("run_runbook").add_parser(sub)),
    (("runs",), lambda sub: _module("runs").add_parser(sub)),
    (("unlock",), lambda sub: _module("unlock").add_parser(sub)),
)
RUNBOOK_COMMANDS = ("runbooks", "run", "runs", "unlock")

# The top level's own flags, spelled out whole: what may come before a command's name.
_TOP_FLAGS = ("--debug", "--read-only", "--light", "--all-contexts")
_TOP_VALUED = ("--kubeconfig", "--context", "--auto-collect", "--profile", "--region")


def named_command(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, when only whole top-level flags come before its name; else
    None (help, the version, an abbreviated or unknown flag, no command: the whole parser
    judges those)."""
    commands = {name for names, _add in _PARSERS for name in names}
    tokens = iter(argv)
    for token in tokens:
        if token in _TOP_FLAGS or (token.partition("=")[0] in _TOP_VALUED and "=" in token):
            continue
        if token in _TOP_VALUED:
            next(tokens, None)
            continue
        return token if token in commands else None
    return None


def _columns() -> int:
    """The width `shutil.get_terminal_size()` gives argparse (CPython 3.11 Lib/shutil.py):
    $COLUMNS when positive, else the terminal's on stdout, else 80. Computed here so that
    building a parser does not import shutil (and bz2 and lzma with it) on every command."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    """argparse's own help layout, its width found without shutil."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        super().__init__(
            prog, indent_increment, max_help_position, _columns() - 2 if width is None else width
        )


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser (and its sub-parsers') with `_Formatter` unless told otherwise, and
    no abbreviated options: argparse would take `collect --node N` for `--nodepool N`, and a
    word that names a node or a pool must mean what it says (kubectl takes none either)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._words: Sequence[str] = ()

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._words = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # An option argparse does not know, before the command's name, leaves its value to be
        # read as the command ("invalid choice: 'prod'"): name the option instead.
        if message.startswith("argument COMMAND: invalid choice"):
            words = iter(self._words)
            for word in words:
                if not word.startswith("-"):
                    break
                if word.partition("=")[0] not in self._option_string_actions:
                    message = f"unrecognized option {inert_name(word)}: give options whole"
                    break
                if word in _TOP_VALUED:
                    next(words, None)
        super().error(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `command`, the top level and that command's sub-parser only,
    which parses that command's words as the whole one does (a quarter of the start-up of
    `mignurse nodes` went to building the sub-parsers it never used)."""
    parser = _Parser(
        prog="mignurse",
        description="On-call companion for GPU nodes on Amazon EKS that will not stay up. "
        "Without a command: the terminal app on the current kube context.",
    )
    parser.add_argument("--version", action="version", version=f"mignurse {__version__}")
    app_options(parser)
    connection_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=SubCommands)
    for names, add in _PARSERS:
        if command is None or command in names:
            add(sub)
    for name, chosen in sub.choices.items():
        for parser_or_leaf in _with_sub_parsers(chosen):
            global_options(parser_or_leaf, name)
    return parser


def _with_sub_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and those of its own sub-commands (`sim serve`, `sim list`)."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for leaf in action.choices.values():
                yield from _with_sub_parsers(leaf)


def _handlers(
    parser: argparse.ArgumentParser,
) -> dict[str | None, Callable[[argparse.Namespace], int]]:
    """Each command's handler; its module loads as it runs. No command: the app."""
    return {
        None: lambda args: _module("app").cmd_app(args),
        "nodes": lambda args: _module("nodes").cmd_nodes(args),
        "diagnose": lambda args: _module("diagnose").cmd_diagnose(args),
        "inventory": lambda args: _module("inventory").cmd_inventory(args),
        "radar": lambda args: _module("radar").cmd_radar(args),
        "collect": lambda args: _module("collect").cmd_collect(args),
        "probe": lambda args: _module("probe").cmd_probe(args),
        "watch": lambda args: _module("watch").cmd_watch(args),
        "userdata": lambda args: _module("userdata").cmd_userdata(args),
        "open": lambda args: _module("app").cmd_open(args),
        "demo": lambda args: _module("app").cmd_demo(args),
        "sim": lambda args: _module("sim").cmd_sim(args, parser),
        "runbooks": lambda args: _module("runbooks").cmd_runbooks(args),
        "run": lambda args: _module("run_runbook").cmd_run(args),
        "runs": lambda args: _module("runs").cmd_runs(args),
        "unlock": lambda args: _module("unlock").cmd_unlock(args),
    }


# -- entry point ------------------------------------------------------------------------


class _QuietPipe:
    """stdout or stderr that a closed pipe (`| head`) silences instead of failing: the rest
    of the output goes nowhere and the command ends with its own exit code, as kubectl's
    does. The descriptor is pointed at /dev/null so the interpreter's last flush passes.

    What a command prints quotes the cluster, bundles and files, so every write is made
    inert (an escape or a bidi control is shown, not obeyed; line feeds and tabs stay): one
    place for every line of every command. Rich draws its own styles: it writes to `styled`,
    having made its text inert itself (`render.console_for`)."""

    def __init__(self, stream: Any, *, made_inert: bool = True) -> None:
        self._stream = stream
        self._closed = False
        self._made_inert = made_inert
        self.styled = _QuietPipe(stream, made_inert=False) if made_inert else self

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                shown = inert(text, lines=True, tabs=True) if self._made_inert else text
                self._stream.write(shown)
                return len(text)
            except BrokenPipeError:
                self._silence()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._silence()

    def _silence(self) -> None:
        self._closed = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # not a real descriptor (a test's capture): nothing is flushed at exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


APP_COMMANDS = (None, "open", "demo")  # the terminal app owns the terminal: left as it is
# Reads that answer and end. The cyclic garbage collector walking the tens of thousands of
# objects their imports make (modules, classes, compiled patterns), none of them garbage, was
# a sixth of the CPU of `mignurse nodes`: for them it runs rarely. (Like every command's, their
# process ends without the interpreter's teardown: `entry.end`.)
ONE_SHOT_COMMANDS = ("nodes", "diagnose", "radar", "inventory", "runs", "runbooks")
ONE_SHOT_GC_THRESHOLDS = (50_000, 20, 100)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(named_command(words))
    args = parser.parse_args(words)
    if args.command in APP_COMMANDS:
        return _main(args, parser)
    # argv is None only where this call is the process (the `mignurse` script, -m mignurse)
    if argv is None and args.command in ONE_SHOT_COMMANDS:
        gc.set_threshold(*ONE_SHOT_GC_THRESHOLDS)
    real = sys.stdout, sys.stderr
    quiet = sys.stdout, sys.stderr = _QuietPipe(sys.stdout), _QuietPipe(sys.stderr)
    try:
        code = _main(args, parser)
    finally:
        for stream in quiet:
            stream.flush()
        sys.stdout, sys.stderr = real
    return code


# The errors a user can fix, each where it is defined, shown as one line (exit 2 unless the
# error says otherwise). A command can only raise those of the modules it loaded, so they are
# looked up once one is raised rather than imported up front: importing the simulator and the
# collector for every command cost half a second of start-up.
_USER_ERRORS = (
    ("mignurse.cluster.client", "ClusterError"),
    ("mignurse.cli.common", "UserError"),
    ("mignurse.sim.scenario_fields", "ScenarioError"),
    ("mignurse.cluster.history", "HistoryError"),
    ("mignurse.diagnose.sources", "SourceError"),
    ("mignurse.collect.run", "CollectError"),
    ("mignurse.untrusted", "LimitError"),
    ("mignurse.collect.access", "AccessError"),
    ("mignurse.paths", "StateFileError"),
)
_RUNBOOK_ERRORS = (
    ("mignurse.runner.schema", "RunbookError"),
    ("mignurse.cli.runbooks", "RunCommandError"),
    ("mignurse.runner.outcome", "RunError"),
    ("mignurse.runner.lock", "LockError"),
    ("mignurse.runner.step", "StepFailed"),
)


def user_errors(command: str | None) -> tuple[type[Exception], ...]:
    """The user-error classes among the modules loaded so far (the runner's only for the
    runbook commands)."""
    wanted = _USER_ERRORS + (_RUNBOOK_ERRORS if command in RUNBOOK_COMMANDS else ())
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in wanted)
    return tuple(error for error in loaded if isinstance(error, type))


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    debug = bool(getattr(args, "debug", False)) or os.environ.get("MIGNURSE_DEBUG") == "1"
    handlers = _handlers(parser)
    handler = handlers.get(args.command, handlers[None])
    try:
        return handler(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        if isinstance(exc, user_errors(args.command)):
            print(f"mignurse: error: {inert(str(exc))}", file=sys.stderr)
            return int(getattr(exc, "exit_code", EXIT_USAGE))
        print(
            f"mignurse: internal error: {type(exc).__name__}: {inert(str(exc))} (run again "
            "with --debug for the traceback, and report it)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
