"""Names a package exports but imports on first use (PEP 562): its ``__init__`` stays cheap,
so that ``mibyan --help`` does not pay for the SDKs or the server libraries."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name of ``homes`` from its module."""
    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(homes[name])
        # A name whose home module bears it is that module (``pipeline.replay`` has always been
        # the module, ``replay.replay`` its function), at every look-up.
        return module if homes[name].endswith(f".{name}") else getattr(module, name)
    return __getattr__
