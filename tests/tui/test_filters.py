"""The `/` filter syntax."""

from __future__ import annotations

import pytest

from mignurse.tui.filters import FilterError, parse


def test_regex_and_inverse() -> None:
    rows = ["ip-10-0-1-2.ec2.internal", "ip-10-0-3-9.ec2.internal"]
    f = parse("10-0-3")
    assert f is not None and [r for r in rows if f.matches(r)] == rows[1:]
    inv = parse("!10-0-3")
    assert inv is not None and [r for r in rows if inv.matches(r)] == rows[:1]
    assert parse("  ") is None
    assert parse("IP-10") is not None and parse("IP-10").matches(rows[0])  # type: ignore[union-attr]


def test_label_selector() -> None:
    labels = {"nvidia.com/mig.config": "all-1g.10gb", "karpenter.sh/capacity-type": "spot"}
    assert parse("-l nvidia.com/mig.config=all-1g.10gb").matches("n", labels)  # type: ignore[union-attr]
    assert not parse("-l karpenter.sh/capacity-type!=spot").matches("n", labels)  # type: ignore[union-attr]
    assert parse("-l karpenter.sh/capacity-type, !eks.amazonaws.com/nodegroup").matches("n", labels)  # type: ignore[union-attr]
    assert not parse("-l eks.amazonaws.com/nodegroup").matches("n", labels)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[unclosed", "not a regular expression"),
        ("!", "needs a pattern"),
        ("-l", "needs a label"),
        ("-l a b=c", "not a label key"),
    ],
)
def test_bad_filters_say_why(text: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse(text)
