"""Modules that moved to a new home: importing an old path fails with an error that names the new one."""

from __future__ import annotations

import importlib.abc
import sys

#: old module path → where it lives now (a package's submodules follow it: old.x → new.x)
MOVED = {
    "contrastext.selftrain": "contrastext.methods.wcsbert",
    "contrastext.uctopic.service": "contrastext.methods.uctopic.model",
    "contrastext.uctopic.job": "contrastext.pipelines.uctopic",
    "contrastext.uctopic": "contrastext.methods.uctopic",
    "contrastext.methods.uctopic.service": "contrastext.methods.uctopic.model",
    "contrastext.methods.uctopic.job": "contrastext.pipelines.uctopic",
    "contrastext.methods.shuffle_divide_epochs": "contrastext.methods.epochs",
    "contrastext.methods.negatives": "contrastext.methods.shuffle_divide.negatives",
    "contrastext.methods.classify_settings": "contrastext.methods.supcon.settings",
}


def new_home(name: str) -> str | None:
    """Where the module ``name`` lives now, or None when it did not move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Asked last, for a module nothing else found: a moved one raises ModuleNotFoundError naming its home."""

    def find_spec(self, fullname, path=None, target=None):
        home = new_home(fullname)
        if home is not None:
            # the import of an old package's module stops at the package: name where its modules went too
            members = [f"{old} to {new}" for old, new in MOVED.items() if old.startswith(fullname + ".")]
            also = f" ({'; '.join(members)})" if members else ""
            raise ModuleNotFoundError(f"{fullname} moved to {home}{also}: import it from there", name=fullname)
        return None


def install() -> None:
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
