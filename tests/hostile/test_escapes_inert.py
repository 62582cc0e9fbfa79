"""The funnel itself: every kind of character a terminal obeys or hides comes out visible, and
text that is only text (ASCII, accents, CJK, emoji) comes out byte for byte."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from rich.console import Console
from rich.text import Text

from mignurse.inert import inert, inert_markup
from mignurse.render import InertConsole, plain_table
from mignurse.tui.shown import inert_text

from .escapes import PAYLOAD, raw_escapes


@pytest.mark.parametrize(
    ("planted", "shown"),
    [
        ("\x1b]52;c;aGk=\x07", "\\x1b]52;c;aGk=\\x07"),  # OSC 52: the clipboard
        ("\x1b]8;;https://x.example/\x1b\\", "\\x1b]8;;https://x.example/\\x1b\\"),  # OSC 8
        ("\x1b[2J", "\\x1b[2J"),  # CSI
        ("\x1bP1$r\x1b\\", "\\x1bP1$r\\x1b\\"),  # DCS
        ("\x1b_a\x1b^b\x1bXc", "\\x1b_a\\x1b^b\\x1bXc"),  # APC, PM, SOS
        ("\x9b2J\x9d0;t\x9c\x90\x85", "\\x9b2J\\x9d0;t\\x9c\\x90\\x85"),  # C1 forms, NEL
        ("a\x00b\x07c\x08d\x7f", "a\\x00b\\x07c\\x08d\\x7f"),  # NUL, BEL, BS, DEL
        ("a\tb\nc\rd", "a\\tb\\nc\\rd"),  # tab, line feed, carriage return
        ("\u202a\u202b\u202c\u202d\u202e", "<U+202A><U+202B><U+202C><U+202D><U+202E>"),
        ("\u2066\u2067\u2068\u2069", "<U+2066><U+2067><U+2068><U+2069>"),  # isolates
        ("\u200e\u200f\u061c", "<U+200E><U+200F><U+061C>"),  # marks
        ("a\u200bb\u200cc\u200dd", "a<U+200B>b<U+200C>c<U+200D>d"),  # zero-width
        ("\u2060\u2061\u2064\ufeff\u00ad", "<U+2060><U+2061><U+2064><U+FEFF><U+00AD>"),
        ("\u2028\u2029", "<U+2028><U+2029>"),  # line and paragraph separators
        ("\ud800x\udcff", "<U+D800>x<U+DCFF>"),  # lone surrogates
        ("\U000e0001\U000e0041\U000e0100", "<U+E0001><U+E0041><U+E0100>"),  # tags
    ],
)
def test_each_kind_of_control_is_shown_visibly(planted: str, shown: str) -> None:
    assert inert(planted) == shown
    assert raw_escapes(inert(planted)) == []


def test_every_format_character_of_this_python_is_shown() -> None:
    """The table in inert.py is Unicode 14's Cf: a newer Python's new ones must be added."""
    every = "".join(
        chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"
    )
    assert raw_escapes(inert(every)) == []


@pytest.mark.parametrize(
    "text",
    [
        "ip-10-0-7-21.us-west-2.compute.internal",
        'Kubelet stopped posting node status. (kubelet.go:2855] "x" err=<nil> 100%',
        "Café, naïve, Ærøskøbing, Ελληνικά, русский",
        "日本語のノード名 · 한국어 · 中文 · ﾃｽﾄ",
        "emoji 🚀 🔥 👍🏽 ❤️ 👩\u200d🔧 👨\u200d👩\u200d👧 🏳️\u200d🌈 🇯🇵",
        "a subdivision flag 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
        "C:\\path\\x1b is text, not ESC",
        "non\u00a0breaking\u3000space",
        "",
    ],
)
def test_text_that_is_only_text_is_left_byte_for_byte(text: str) -> None:
    assert inert(text) == text
    assert inert(text, lines=True) == text
    assert inert_markup(text) == text


def test_a_page_keeps_its_line_feeds_and_nothing_else() -> None:
    journal = "line one\nline\ttwo\r\n\x1b[2Jthree\n"
    assert inert(journal, lines=True) == "line one\nline\\ttwo\\r\n\\x1b[2Jthree\n"
    assert inert(journal, lines=True, tabs=True) == "line one\nline\ttwo\\r\n\\x1b[2Jthree\n"


def test_the_visible_form_holds_no_control_and_is_left_alone_the_second_time() -> None:
    once = inert(PAYLOAD)
    assert once.isprintable()
    assert inert(once) == once


def test_markup_in_a_name_is_shown_not_obeyed() -> None:
    name = "[link=https://evil.example/]node[/link][/][bold]x"
    console = Console(width=200, force_terminal=True, color_system="truecolor", highlight=False)
    with console.capture() as captured:
        console.print(inert_markup(name))
    assert captured.get() == name + "\n"


def test_a_rich_console_shows_what_a_renderable_still_holds() -> None:
    """The net under the faces: a Text built from raw cluster text, and a hyperlink style."""
    console = InertConsole(width=300, force_terminal=True, color_system="truecolor")
    with console.capture() as captured:
        console.print(Text("node " + PAYLOAD, style="bold link https://evil.example/"))
    written = captured.get()
    assert raw_escapes(written, terminal=True) == []
    assert "\x1b]8;" not in written


def test_a_styled_text_keeps_its_styles_on_the_same_words() -> None:
    text = Text.assemble(("NotReady", "bold red"), " \x1b]0;t\x1b\\ ", ("Ready", "green"))
    shown = inert_text(text, lines=False)
    assert shown.plain == "NotReady \\x1b]0;t\\x1b\\ Ready"
    styled = {shown.plain[s.start : s.end]: str(s.style) for s in shown.spans}
    assert styled == {"NotReady": "bold red", "Ready": "green"}


def test_a_plain_table_keeps_its_columns_with_a_tab_and_a_line_feed_in_a_cell() -> None:
    import io

    out = io.StringIO()
    plain_table(("NAME", "LABEL"), [("a\tb", "x\ny"), ("c", "d")], out)
    lines = out.getvalue().splitlines()
    assert lines == ["NAME   LABEL", "a\\tb   x\\ny", "c      d"]


def test_a_go_stack_trace_in_the_pager_is_indented_with_spaces_and_its_escapes_are_shown() -> None:
    from mignurse.tui.screens.pager import Page

    trace = Text("\tgithub.com/NVIDIA/k8s-device-plugin/cmd/main.go:88 +0x1b\x1b[2J")
    page = Page("journal", [trace])
    (line,) = page.lines
    assert line.plain == "        github.com/NVIDIA/k8s-device-plugin/cmd/main.go:88 +0x1b\\x1b[2J"
    assert trace.plain.startswith("\t")  # the page's own copy was changed, not the caller's
