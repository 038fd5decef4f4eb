"""Where data files are: the one rule every job follows for its data folder.

A relative data path (``documents.path``, ``pool.texts.path``, ``data.train_file``, …) lives under the data
folder, which is the first of:

1. the job's own setting (``data_dir``, or ``data.root`` of ``supcon_classify``), when given;
2. ``$CONTRASTEXT_DATA``, when set;
3. ``../shared/data`` beside the checkout (the repository root's parent folder), else beside the working
   directory, whichever exists; when neither does, the one beside the checkout (so errors name it).

An absolute path or a URI (``s3://…``) is used as given; a data folder may itself be a URI. Public sample
files (:mod:`contrastext.data.samples`) are looked for under every folder of :func:`data_roots` in turn.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "CONTRASTEXT_DATA"
_REPO_ROOT = Path(__file__).resolve().parents[3]

Location = Path | str  # a local path, or a URI as given


def _is_uri(location: str | os.PathLike[str]) -> bool:
    from contrastext.storage import is_uri

    return is_uri(location)


def _location(value: str | os.PathLike[str]) -> Location:
    return str(value) if _is_uri(value) else Path(value).expanduser()


def shared_data_dirs() -> list[Path]:
    """``../shared/data`` beside the checkout, then beside the working directory."""
    return [_REPO_ROOT.parent / "shared" / "data", Path.cwd().parent / "shared" / "data"]


def data_roots() -> list[Path]:
    """Every folder a data file may be in, in order: ``$CONTRASTEXT_DATA`` (when set), then the shared ones."""
    configured = os.environ.get(DATA_ENV)
    return ([Path(configured).expanduser()] if configured else []) + shared_data_dirs()


def data_root(configured: str | os.PathLike[str] | None = None) -> Location:
    """The data folder: ``configured`` when given, else ``$CONTRASTEXT_DATA``, else ``../shared/data``."""
    if configured:
        return _location(configured)
    if os.environ.get(DATA_ENV):
        return _location(os.environ[DATA_ENV])
    shared = shared_data_dirs()
    return next((folder for folder in shared if folder.is_dir()), shared[0])


def resolve_data_path(path: str | os.PathLike[str], data_dir: str | os.PathLike[str] | None = None, *,
                      what: str = "data file", setting: str = "data_dir") -> Location:
    """``path`` as given when absolute or a URI, else under :func:`data_root` (``data_dir``).

    A local file comes back as a Path, a file on a store (also one under a URI data folder) as its URI.
    Raises FileNotFoundError, naming the data folder and the job's ``setting`` for it, when nothing is there.
    """
    from contrastext import storage

    base: Location | None = None
    candidate: Location
    if _is_uri(path):
        candidate = str(path)
    elif Path(path).expanduser().is_absolute():
        candidate = Path(path).expanduser()
    else:
        base = data_root(data_dir)
        candidate = storage.join(base, str(path)) if isinstance(base, str) else base / path
    found = storage.exists(candidate) if isinstance(candidate, str) else candidate.exists()
    if not found:
        where = f" (data directory {base})" if base is not None else ""
        raise FileNotFoundError(
            f"{what} {candidate} not found{where}; set `{setting}` (or ${DATA_ENV}) to the folder that holds it, "
            f"or give its full path")
    return candidate
