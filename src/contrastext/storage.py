"""One storage layer for every job: a local path or a URI (``s3://``, ``gs://``, ``file://``), on ``pyarrow.fs``.

Every input and output of the jobs goes through here, so a run folder on a bucket behaves as one on disk:
files appear whole (written under a temporary name, then moved), folders list the same way, and a
missing bucket or credentials is one clear :class:`StorageError` naming the URI.

S3 settings come from the standard AWS environment: credentials (``AWS_ACCESS_KEY_ID``, …, a profile or
the node's role), ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, and ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for S3-compatible stores (MinIO, Ceph, a test server): pyarrow reads the
credentials itself but not the endpoint variables, so they are applied here.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

import pyarrow.fs

Location = str | Path  # a local path or a URI
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# what workers on other nodes need to reach the same store the driver does (credentials stay per node)
FORWARDED_VARIABLES = (*ENDPOINT_VARIABLES, "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")
_TMP_SUFFIX = ".tmp-"


class StorageError(OSError):
    """A location that cannot be used; the message names it and says why."""


def is_uri(location: Location) -> bool:
    return "://" in str(location)


def on_local_disk(location: Location) -> bool:
    """A plain path or a ``file://`` URI: readable in place, nothing to download."""
    return not is_uri(location) or str(location).startswith("file://")


def s3_filesystem(region: str | None = None) -> pyarrow.fs.S3FileSystem:
    """An S3 filesystem configured from the AWS environment, the endpoint variables included."""
    options: dict[str, Any] = {"connect_timeout": 10, "request_timeout": 60}
    endpoint = next((os.environ[v] for v in ENDPOINT_VARIABLES if os.environ.get(v)), None)
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
        options["scheme"] = parsed.scheme or "https"
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    return pyarrow.fs.S3FileSystem(**options)


def resolve(location: Location) -> tuple[pyarrow.fs.FileSystem, str]:
    """The filesystem holding ``location`` and the path within it (local paths made absolute)."""
    text = str(location)
    if text.startswith("s3://"):
        parsed = urlparse(text)
        return s3_filesystem(), (parsed.netloc + parsed.path).rstrip("/")
    if is_uri(text):
        return pyarrow.fs.FileSystem.from_uri(text)
    return pyarrow.fs.LocalFileSystem(), str(Path(text).expanduser().resolve())


def join(location: Location, *parts: str) -> str:
    return "/".join([str(location).rstrip("/"), *(p.strip("/") for p in parts)])


def name(location: Location) -> str:
    return str(location).rstrip("/").rsplit("/", 1)[-1]


def parent(location: Location) -> str:
    return str(location).rstrip("/").rsplit("/", 1)[0]


def _info(location: Location) -> pyarrow.fs.FileInfo:
    fs, path = resolve(location)
    try:
        return fs.get_file_info(path)
    except OSError as error:
        raise StorageError(f"{location}: {error}") from error


def file_size(location: Location) -> int:
    return int(_info(location).size or 0)


def exists(location: Location) -> bool:
    return _info(location).type != pyarrow.fs.FileType.NotFound


def is_file(location: Location) -> bool:
    return _info(location).type == pyarrow.fs.FileType.File


def is_dir(location: Location) -> bool:
    return _info(location).type == pyarrow.fs.FileType.Directory


def list_files(location: Location, suffix: str = "", recursive: bool = False) -> list[str]:
    """Files under a folder (sorted locations, in the folder's own form), without temporary leftovers."""
    fs, path = resolve(location)
    try:
        infos = fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True, recursive=recursive))
    except OSError as error:
        raise StorageError(f"{location}: {error}") from error
    base = str(location).rstrip("/")
    out = []
    for info in infos:
        if info.type != pyarrow.fs.FileType.File or _TMP_SUFFIX in info.base_name:
            continue
        if info.base_name.endswith(suffix):
            out.append(join(base, info.path[len(path):].lstrip("/")))
    return sorted(out)


_GLOB_CHARACTERS = "*?["


def _visible(relative: str) -> bool:
    """Not hidden and not a marker or work file (``.x``, ``_SUCCESS``, ``_units/``) at any depth."""
    return not any(part.startswith((".", "_")) for part in relative.split("/"))


def folder_of(location: Location) -> str:
    """The folder a path or URI is in (``.`` for a bare name)."""
    text = str(location).rstrip("/")
    return parent(text) if "/" in text else "."


def glob_base(pattern: str) -> str:
    """The folder a glob's matches are listed from: the part before its first wildcard, up to a ``/``."""
    static = pattern[: min(pattern.index(c) for c in _GLOB_CHARACTERS if c in pattern)]
    if static.endswith("/"):
        return static.rstrip("/") or "/"
    return folder_of(static) if static else "."


def _glob_regex(pattern: str):
    """A glob as a regular expression: ``*`` and ``?`` stay within one folder, ``**/`` spans any depth
    (``glob.translate`` does this from Python 3.13 on)."""
    import fnmatch
    import re

    pieces = []
    for i, part in enumerate(re.split(r"(\*\*/|\*|\?)", pattern)):
        if i % 2:
            pieces.append({"**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}[part])
        elif part:
            pieces.append(fnmatch.translate(part)[4:-3])  # '(?s:' … ')\\Z' stripped: brackets kept
    return re.compile("".join(pieces), re.S)


def expand(pattern: Location) -> list[str]:
    """The files ``pattern`` names, sorted: a file; a folder's visible files at any depth; a glob
    (``docs/*.jsonl``, ``s3://b/docs/**/*.parquet``); or a URI or path prefix (``s3://b/docs/part-``).
    A pattern that matches nothing is a FileNotFoundError naming it."""
    text = str(pattern)
    if not any(c in text for c in _GLOB_CHARACTERS):
        if is_file(text):
            return [text]
        if is_dir(text):
            base = text.rstrip("/")
            found = [f for f in list_files(base, recursive=True) if _visible(f[len(base):].lstrip("/"))]
        else:  # a prefix: the parent's files whose path below it starts with the prefix's last part
            base, start = folder_of(text), name(text)
            found = [f for f in list_files(base, recursive=True) if f[len(base):].lstrip("/").startswith(start)
                     and _visible(f[len(base):].lstrip("/"))]
    else:
        base = glob_base(text)
        matches = _glob_regex(text if base != "." or text.startswith("./") else f"./{text}").fullmatch
        found = [f for f in list_files(base, recursive=True) if matches(f) and _visible(f[len(base):].lstrip("/"))]
    if not found:
        raise FileNotFoundError(f"{text}: no file matches")
    if not text.startswith("./"):  # a bare relative pattern's matches, as the pattern names them
        found = [f[2:] if f.startswith("./") else f for f in found]
    return sorted(found)


def read_bytes(location: Location) -> bytes:
    fs, path = resolve(location)
    try:
        with fs.open_input_stream(path) as f:
            return f.read()
    except FileNotFoundError:
        raise
    except OSError as error:
        if "not found" in str(error).lower() or "no such file" in str(error).lower():
            raise FileNotFoundError(f"{location} does not exist") from error
        raise StorageError(f"{location}: {error}") from error


def read_text(location: Location) -> str:
    return read_bytes(location).decode("utf-8")


def read_json(location: Location) -> Any:
    return json.loads(read_bytes(location))


def _temporary(path: str) -> str:
    return f"{path}{_TMP_SUFFIX}{uuid.uuid4().hex[:8]}"


def write_bytes(location: Location, data: bytes) -> str:
    """Write to a temporary name beside ``location``, then move it there: readers never see half a file."""
    fs, path = resolve(location)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = _temporary(path)
    with fs.open_output_stream(tmp) as f:
        f.write(data)
    fs.move(tmp, path)
    return str(location)


def write_text(location: Location, text: str) -> str:
    return write_bytes(location, text.encode("utf-8"))


def write_json(location: Location, content: Any) -> str:
    return write_bytes(location, json.dumps(content, indent=2, default=str).encode("utf-8"))


def upload_file(local: Location, location: Location) -> str:
    """Copy a finished local file to ``location`` under a temporary name, then move it into place."""
    fs, path = resolve(location)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = _temporary(path)
    pyarrow.fs.copy_files(str(Path(local).resolve()), tmp, source_filesystem=pyarrow.fs.LocalFileSystem(),
                          destination_filesystem=fs)
    fs.move(tmp, path)
    return str(location)


def download_file(location: Location, local: Location) -> Path:
    fs, path = resolve(location)
    local = Path(local)
    local.parent.mkdir(parents=True, exist_ok=True)
    pyarrow.fs.copy_files(path, str(local.resolve()), source_filesystem=fs,
                          destination_filesystem=pyarrow.fs.LocalFileSystem())
    return local


@contextmanager
def local_file(location: Location) -> Iterator[Path]:
    """A local path holding the file at ``location``: the file itself when local, else a temporary copy."""
    if on_local_disk(location):
        yield Path(resolve(location)[1])
        return
    with tempfile.TemporaryDirectory(prefix="contrastext-") as tmp:
        yield download_file(location, Path(tmp) / name(location))


def delete(location: Location) -> None:
    """Remove a file or a folder; nothing happens when it is not there."""
    fs, path = resolve(location)
    info = fs.get_file_info(path)
    if info.type == pyarrow.fs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type == pyarrow.fs.FileType.File:
        fs.delete_file(path)


def copy_tree(source: Location, destination: Location,
              source_filesystem: pyarrow.fs.FileSystem | None = None) -> str:
    """Copy a folder, replacing whatever ``destination`` held."""
    if source_filesystem is None:
        source_filesystem, source = resolve(source)
    dest_fs, dest = resolve(destination)
    if dest_fs.get_file_info(dest).type != pyarrow.fs.FileType.NotFound:
        dest_fs.delete_dir(dest)
    dest_fs.create_dir(dest, recursive=True)
    pyarrow.fs.copy_files(str(source), dest, source_filesystem=source_filesystem, destination_filesystem=dest_fs)
    return str(destination)


@contextmanager
def local_copy(location: Location) -> Iterator[Path]:
    """A local folder with the contents of ``location``: the folder itself when it is local."""
    if on_local_disk(location):
        yield Path(resolve(location)[1])
        return
    with tempfile.TemporaryDirectory(prefix="contrastext-") as tmp:
        copy_tree(location, tmp)
        yield Path(tmp)


def scratch_dir(prefix: str = "contrastext-") -> Path:
    """Node-local scratch space (``$CONTRASTEXT_SCRATCH`` or the system's temporary folder)."""
    base = os.environ.get("CONTRASTEXT_SCRATCH")
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def file_checksum(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """``sha256:<hex>`` of a local file, read a chunk at a time."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def check_writable(location: Location) -> None:
    """Fail now, naming ``location``, when it cannot be written (no bucket, no credentials, no endpoint).

    A small probe object is written and removed; on a local path the folder is created.
    """
    try:
        fs, path = resolve(location)
    except (OSError, ValueError) as error:
        raise StorageError(f"{location}: not a usable location ({error})") from error
    if isinstance(fs, pyarrow.fs.S3FileSystem):
        bucket = path.split("/", 1)[0]
        try:
            bucket_info = fs.get_file_info(bucket)
        except OSError as error:
            raise StorageError(f"{location}: the store cannot be reached or refused the credentials "
                               f"({_first_line(error)}); check AWS_ENDPOINT_URL and the AWS credentials") from error
        if bucket_info.type == pyarrow.fs.FileType.NotFound:
            raise StorageError(f"{location}: bucket {bucket!r} does not exist")
    probe = join(path, f".write-check{_TMP_SUFFIX}{uuid.uuid4().hex[:8]}")
    try:
        fs.create_dir(path, recursive=True)
        with fs.open_output_stream(probe) as f:
            f.write(b"ok")
        fs.delete_file(probe)
    except OSError as error:
        hint = "; check the AWS credentials" if "ACCESS_DENIED" in str(error).upper() else ""
        raise StorageError(f"{location}: cannot write there ({_first_line(error)}){hint}") from error


def check_readable(location: Location, what: str = "input") -> None:
    """Fail now, naming ``location``, when it does not exist or cannot be reached (a glob or prefix that
    ``expand`` reads is there when it matches a file)."""
    try:
        found = exists(location)
        if not found and not str(location).endswith("/"):
            try:
                found = bool(expand(location))
            except FileNotFoundError:
                found = False
    except (OSError, ValueError) as error:
        raise StorageError(f"{what} {location} cannot be reached ({_first_line(error)})") from error
    if not found:
        raise FileNotFoundError(f"{what} {location} does not exist")


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def remove_local(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------------- file objects, parquet
def open_input(location: Location):
    """A seekable binary file at ``location`` (pyarrow's NativeFile: read, seek, tell)."""
    fs, path = resolve(location)
    try:
        return fs.open_input_file(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{location} does not exist") from None
    except OSError as error:
        if "not found" in str(error).lower() or "no such file" in str(error).lower():
            raise FileNotFoundError(f"{location} does not exist") from error
        raise StorageError(f"{location}: {error}") from error


def list_temporary(location: Location) -> list[str]:
    """Files a killed writer left under temporary names in a folder (not recursive)."""
    fs, path = resolve(location)
    infos = fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True))
    return sorted(join(location, i.base_name) for i in infos
                  if i.type == pyarrow.fs.FileType.File and _TMP_SUFFIX in i.base_name)


def parquet_file(location: Location):
    import pyarrow.parquet as pq

    fs, path = resolve(location)
    return pq.ParquetFile(path, filesystem=fs)


def read_parquet(locations: Location | list[Location], columns: list[str] | None = None):
    """One table from a parquet file or several (all on one filesystem)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items = [locations] if isinstance(locations, (str, Path)) else list(locations)
    tables = []
    for location in items:
        fs, path = resolve(location)
        tables.append(pq.read_table(path, filesystem=fs, columns=columns))
    return pa.concat_tables(tables) if len(tables) != 1 else tables[0]


def parquet_dataset(locations: Location | list[Location], columns: list[str] | None = None):
    """A Ray Dataset of parquet files (local paths or URIs, all on one filesystem), read by Ray's workers:
    nothing of it passes through the calling process."""
    import ray.data

    items = [locations] if isinstance(locations, (str, Path)) else list(locations)
    filesystem, _ = resolve(items[0])
    # reading is I/O: a read task holds a tenth of a CPU, so it runs beside training workers that hold
    # every CPU of their node (with a whole CPU each it would wait for them, and they for it)
    dataset = ray.data.read_parquet([resolve(item)[1] for item in items], filesystem=filesystem, num_cpus=0.1)
    return dataset.select_columns(columns) if columns else dataset


def write_parquet(table, location: Location, **kwargs) -> str:
    """Write a parquet file under a temporary name, then move it into place."""
    import pyarrow.parquet as pq

    fs, path = resolve(location)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = _temporary(path)
    pq.write_table(table, tmp, filesystem=fs, **kwargs)
    fs.move(tmp, path)
    return str(location)


def file_signature(location: Location) -> str:
    """How a run records an input file: sha256 for a local file, size and modification time for a URI
    (hashing a corpus-sized object would pull it through the driver)."""
    if on_local_disk(location):
        return file_checksum(resolve(location)[1])
    info = _info(location)
    return f"size:{info.size}" + (f",mtime:{info.mtime.isoformat()}" if info.mtime else "")


def write_npy(location: Location, array) -> str:
    """A numpy array as a ``.npy`` file (written whole)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array)
    return write_bytes(location, buffer.getvalue())


def read_npy(location: Location):
    import io

    import numpy as np

    return np.load(io.BytesIO(read_bytes(location)))
