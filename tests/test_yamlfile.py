"""YAML with lines: both ways of reading give each key, value and item its line; only
`keep_keys` keeps YAML-typed and duplicate keys, as runbook loading needs."""

from __future__ import annotations

import pytest
import yaml

from mignurse.untrusted import compose_yaml
from mignurse.yamlfile import LDict, LList, construct_lined, load_lined

TEXT = "a:\n  b: off\n  c:\n    - 1\n    - {d: x}\n"


def test_lines_of_keys_values_and_items_and_scalars_as_written() -> None:
    root = compose_yaml(TEXT)
    assert root is not None
    for doc in (load_lined(TEXT), construct_lined(root)):
        inner = doc["a"]
        assert isinstance(inner, LDict) and inner.line == 2
        assert inner.key_lines == {"b": 2, "c": 3} and inner.value_lines == {"b": 2, "c": 4}
        assert inner["b"] is False and inner.scalars == {"b": "off"}
        items = inner["c"]
        assert isinstance(items, LList) and items.item_lines == [4, 5]
        assert items.scalars == {0: "1"} and items[1].line == 5


def test_keep_keys_keeps_typed_and_duplicate_keys_as_safe_load_does() -> None:
    text = "1: x\nk: first\nk: off\n"
    root = compose_yaml(text)
    assert root is not None
    doc = construct_lined(root, keep_keys=True)
    assert doc == yaml.safe_load(text) == {1: "x", "k": False}
    assert doc.key_lines == {1: 1, "k": 3} and doc.scalars == {1: "x", "k": "off"}
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'k'"):
        load_lined(text)


def test_an_unhashable_key_is_refused_in_yaml_s_words() -> None:
    root = compose_yaml("? [1]\n: x\n")
    assert root is not None
    with pytest.raises(yaml.constructor.ConstructorError, match="found unhashable key"):
        construct_lined(root, keep_keys=True)
