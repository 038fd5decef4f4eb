"""Reading and writing job outputs at a local path or any pyarrow filesystem URI (``s3://``, ``gs://``, ``file://``)."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow.fs


def is_uri(location: str | Path) -> bool:
    return "://" in str(location)


def resolve(location: str | Path) -> tuple[pyarrow.fs.FileSystem, str]:
    """The filesystem holding ``location`` and the path within it (local paths made absolute)."""
    if is_uri(location):
        return pyarrow.fs.FileSystem.from_uri(str(location))
    return pyarrow.fs.LocalFileSystem(), str(Path(location).expanduser().resolve())


def join(location: str | Path, *parts: str) -> str:
    return "/".join([str(location).rstrip("/"), *parts])


def exists(location: str | Path) -> bool:
    fs, path = resolve(location)
    return fs.get_file_info(path).type != pyarrow.fs.FileType.NotFound


def read_bytes(location: str | Path) -> bytes:
    fs, path = resolve(location)
    with fs.open_input_stream(path) as f:
        return f.read()


def write_bytes(location: str | Path, data: bytes) -> str:
    """Write to a temporary name beside ``location``, then move it there: readers never see half a file."""
    fs, path = resolve(location)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = path + ".tmp"
    with fs.open_output_stream(tmp) as f:
        f.write(data)
    fs.move(tmp, path)
    return str(location)


def copy_tree(source: str | Path, destination: str | Path,
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
def local_copy(location: str | Path) -> Iterator[Path]:
    """A local folder with the contents of ``location``: the folder itself when it is local."""
    if not is_uri(location):
        yield Path(location)
        return
    with tempfile.TemporaryDirectory() as tmp:
        copy_tree(location, tmp)
        yield Path(tmp)
