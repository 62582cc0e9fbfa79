"""A package's names loaded from their modules on first use (PEP 562 module `__getattr__`), so
importing the package for one name does not import every module behind the others."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def name_loader(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """The package's `__getattr__`: `homes` maps each name to the submodule that defines it;
    a name once loaded is kept in the package's `namespace`, so it is looked up only once."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return load
