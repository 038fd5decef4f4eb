"""Package names that load their module on first use (so that importing a package imports no torch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, homes: Mapping[str, str], namespace: dict[str, Any],
                    public: list[str], fallback: str | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``homes`` maps each lazy name to the module defining it;
    a name is imported on first use and kept in the package's ``namespace``. ``fallback``: a module whose
    public names the package also gives (a method package, for the names of the module it replaced)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None and fallback is not None and not name.startswith("_"):
            if hasattr(importlib.import_module(fallback), name):
                home = fallback
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__
