"""YAML read with the line of every mapping, key, value and sequence item, so a validation
error can name the line to fix. It lives outside sim/ so that any file format can use it."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml


class LDict(dict[Any, Any]):
    """A mapping with `line`, and per key: the key's line, its value's line, and a scalar
    value as written (YAML 1.1 reads `off` as False; a message may want `off`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.line = 0
        self.key_lines: dict[Any, int] = {}
        self.value_lines: dict[Any, int] = {}
        self.scalars: dict[Any, str] = {}


class LList(list[Any]):
    """A sequence with `line`, the line of each item, and scalar items as written."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.line = 0
        self.item_lines: list[int] = []
        self.scalars: dict[int, str] = {}


class _Loader(yaml.SafeLoader):
    keep_keys = False


class _KeyKeepingLoader(_Loader):
    keep_keys = True


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LDict:
    loader.flatten_mapping(node)
    result = LDict()
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if loader.keep_keys:
            if not isinstance(key, Hashable):  # the words yaml.SafeLoader uses
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
        else:
            if not isinstance(key, str):
                key = str(key)
            if key in result:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
        result.value_lines[key] = value_node.start_mark.line + 1
        result.scalars.pop(key, None)  # a duplicate key: the last one wins, as in a dict
        if isinstance(value_node, yaml.ScalarNode):
            result.scalars[key] = str(value_node.value)
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LList:
    result = LList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    result.scalars = {
        i: str(child.value)
        for i, child in enumerate(node.value)
        if isinstance(child, yaml.ScalarNode)
    }
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_lined(text: str) -> Any:
    """The document with mappings as `LDict` (string keys) and sequences as `LList`; a
    duplicate key is a `yaml.constructor.ConstructorError` at its line."""
    return yaml.load(text, Loader=_Loader)


def construct_lined(root: yaml.Node, *, keep_keys: bool = False) -> Any:
    """`load_lined` for a node already composed (and checked, e.g. by
    mignurse.untrusted.compose_yaml). `keep_keys`: keys stay as YAML typed them and a
    duplicate key's last value wins, as yaml.safe_load does; an unhashable key is a
    `yaml.constructor.ConstructorError`."""
    loader = (_KeyKeepingLoader if keep_keys else _Loader)("")
    return loader.construct_document(root)
