"""The real Wikipedia dump samples: found beside the project, or fetched once into a cache folder.

Where a sample is looked for, in order:

1. ``$CONTRASTEXT_DATA/wikipedia/<name>``;
2. ``../shared/data/wikipedia/<name>`` relative to the repository root, then to the working directory;
3. the cache folder (``$CONTRASTEXT_CACHE``, else ``$XDG_CACHE_HOME/contrastext``, else ``~/.cache/contrastext``),
   under ``wikipedia/``.

If none has it, :func:`find_dump_sample` (with ``fetch=True``) runs ``python -m pip download --no-deps
gensim==4.3.3`` (the dumps ship as test data inside that wheel) and extracts the file into the cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

DEFAULT_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TABLE_SAMPLE = "enwiki-table-markup.xml.bz2"
SAMPLE_PACKAGE = "gensim==4.3.3"
_MEMBER_DIR = "gensim/test/test_data/"
_REPO_ROOT = Path(__file__).resolve().parents[3]


class SampleNotFoundError(FileNotFoundError):
    """The sample is nowhere local and could not be fetched; the message says where it was looked for."""


def cache_dir() -> Path:
    if os.environ.get("CONTRASTEXT_CACHE"):
        return Path(os.environ["CONTRASTEXT_CACHE"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "contrastext"


def candidate_paths(name: str = DEFAULT_SAMPLE, cache: Path | None = None) -> list[Path]:
    places = []
    if os.environ.get("CONTRASTEXT_DATA"):
        places.append(Path(os.environ["CONTRASTEXT_DATA"]).expanduser() / "wikipedia" / name)
    places.append(_REPO_ROOT.parent / "shared" / "data" / "wikipedia" / name)
    places.append(Path.cwd().parent / "shared" / "data" / "wikipedia" / name)
    places.append((cache or cache_dir()) / "wikipedia" / name)
    return places


def fetch_sample(name: str = DEFAULT_SAMPLE, cache: Path | None = None, timeout_s: float = 600) -> Path:
    """Download the gensim wheel with pip and extract ``name`` into ``<cache>/wikipedia/``."""
    target = (cache or cache_dir()) / "wikipedia" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-q", "-d", tmp, SAMPLE_PACKAGE]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise SampleNotFoundError(f"could not fetch {SAMPLE_PACKAGE} with pip (exit {done.returncode}): "
                                      f"{done.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = _MEMBER_DIR + name
            if member not in wheel.namelist():
                raise SampleNotFoundError(f"{wheels[0].name} holds no {member}")
            partial = target.with_name(target.name + ".part")
            with wheel.open(member) as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.replace(target)
    return target


def find_dump_sample(name: str = DEFAULT_SAMPLE, *, fetch: bool = True, cache: Path | None = None) -> Path:
    """The path of a real dump sample (see the module docstring for where it is looked for)."""
    places = candidate_paths(name, cache)
    for place in places:
        if place.is_file():
            return place
    if not fetch:
        raise SampleNotFoundError(f"{name} not found; looked at: " + ", ".join(map(str, places)))
    return fetch_sample(name, cache)
