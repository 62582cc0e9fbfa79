"""YAML read with the line of every mapping, key and sequence item, so a validation error can
name the line to fix. It lives outside sim/ so that any file format can use it."""

from __future__ import annotations

from typing import Any

import yaml


class LDict(dict[str, Any]):
    line: int = 0
    key_lines: dict[str, int]


class LList(list[Any]):
    line: int = 0
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LDict:
    loader.flatten_mapping(node)
    result = LDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            key = str(key)
        if key in result:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LList:
    result = LList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_lined(text: str) -> Any:
    """The document with mappings as `LDict` and sequences as `LList`; a duplicate key is a
    `yaml.constructor.ConstructorError` at its line."""
    return yaml.load(text, Loader=_Loader)
