"""Checks a job runs before any work: every output location writable, every input URI there.

An unreachable bucket, missing credentials or a mistyped input then fail in the first second with one
error naming the location, not after an hour of encoding.
"""

from __future__ import annotations

from typing import Any, Iterator

from pydantic import BaseModel

from contrastext import storage
from contrastext.config import OutputConfig

STORAGE_SCHEMES = ("s3://", "gs://", "gcs://", "file://", "abfs://", "hdfs://")


def _walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, BaseModel):
        yield path, node
        for field in type(node).model_fields:
            yield from _walk(getattr(node, field), f"{path}.{field}" if path else field)
    elif isinstance(node, (list, tuple)):
        for i, item in enumerate(node):
            yield from _walk(item, f"{path}[{i}]")
    elif isinstance(node, dict):
        for key, item in node.items():
            yield from _walk(item, f"{path}.{key}")
    else:
        yield path, node


def output_locations(config: BaseModel) -> dict[str, str]:
    """Setting name → storage root, for every output block of the config."""
    return {f"{path}.storage_path" if path else "storage_path": node.storage_uri()
            for path, node in _walk(config) if isinstance(node, OutputConfig)}


def input_locations(config: BaseModel) -> dict[str, str]:
    """Setting name → URI, for every setting whose value is a storage URI and is not an output."""
    outputs = set(output_locations(config))
    return {path: value for path, value in _walk(config)
            if isinstance(value, str) and value.startswith(STORAGE_SCHEMES) and path not in outputs}


def check_locations(config: BaseModel) -> None:
    """Raise :class:`contrastext.storage.StorageError` or ``FileNotFoundError`` naming the first bad location."""
    for setting, location in output_locations(config).items():
        try:
            storage.check_writable(location)
        except storage.StorageError as error:
            raise storage.StorageError(f"{setting}: {error}") from error
    for setting, location in input_locations(config).items():
        storage.check_readable(location, what=setting)
