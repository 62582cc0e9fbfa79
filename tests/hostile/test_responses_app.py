"""The app, built as `mignurse --kubeconfig KC` builds it, on an API server that answers
badly: it starts where the answers can be read at all, shows a Retry-After wait counting
down in its status line, and `q` quits at once in the middle of that wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Static
from tui.test_node_screen import static_text, until

from mignurse.cli import build_parser
from mignurse.cli.app import live_app
from mignurse.tui.app import MigNurseApp

from .inputs import NODE, mignurse, node_object, one_line_error
from .test_responses import (
    Answer,
    Handler,
    Hostile,
    body,
    kube_list,
    retry_after,
    send,
    serve,
)

__all__ = ["serve"]  # the fixture, used here by name


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


def app_on(kubeconfig: Path) -> MigNurseApp:
    app = live_app(build_parser().parse_args(["--kubeconfig", str(kubeconfig)]))
    assert isinstance(app, MigNurseApp)
    return app


def status_line(app: MigNurseApp) -> str:
    return static_text(app.query_one("#status", Static))


async def test_the_app_starts_on_a_server_whose_date_is_in_year_9999(
    serve: Callable[[Hostile], Path],
) -> None:
    kubeconfig = serve(
        Hostile(nodes=body(kube_list([node_object()])), date="Fri, 31 Dec 9999 23:59:59 GMT")
    )
    app = app_on(kubeconfig)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(lambda: "1 GPU nodes" in status_line(app))
        assert app.is_running
        assert abs(app.source.now().year - time.gmtime().tm_year) <= 1
        await pilot.press("enter")  # the pool's nodes, the node's age worked out
        await until(lambda: NODE in app._rows)
        await pilot.press("q")


async def test_a_retry_after_counts_down_in_the_status_line_and_q_quits_at_once(
    serve: Callable[[Hostile], Path],
) -> None:
    """The start-up check's one-node page comes; every later list asks for 9 s, ten times
    over (90 s if sat out): the status line counts down, and `q` ends the app mid-wait."""

    def nodes(handler: Handler) -> None:
        if handler.query().get("limit") == "1":
            send(handler, 200, kube_list([node_object()]))
        else:
            retry_after("9")(handler)

    kubeconfig = serve(Hostile(nodes=nodes))
    app = app_on(kubeconfig)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(
            lambda: "API server busy (429 Too Many Requests): retrying in" in status_line(app)
        )
        await pilot.press("q")
        asked = time.monotonic()
    assert time.monotonic() - asked < 30, "quitting waited for the Retry-After"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (retry_after("3600"), "asked to retry after 3,600 s (429 Too Many Requests)"),
        (body(b'{"kind":"NodeList","metadata":{},"items":[null]}'), "item 1 is a JSON null"),
        (body(b"<html><title>Gateway</title>", status=502), "an HTML page titled 'Gateway'"),
    ],
    ids=["retry-after-an-hour", "null-item", "html-502"],
)
def test_the_app_on_a_bad_first_answer_is_one_line_before_any_screen(
    serve: Callable[[Hostile], Path], answer: Answer, said: str
) -> None:
    result = mignurse("--kubeconfig", str(serve(Hostile(nodes=answer))), timeout=120)
    assert said in one_line_error(result)
