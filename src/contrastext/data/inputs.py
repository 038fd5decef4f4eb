"""Input files that worker tasks read, wherever the tasks run.

A URI is read where it is. A file on the driver's disk is not visible to tasks on other nodes, so a small
one (the dump sample, a page table made by hand) is shipped through Ray's object store and written to the
reading node's scratch space; a large local path must be on a folder every node mounts (or, better, a URI).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from contrastext import storage

log = logging.getLogger(__name__)
SHIP_LIMIT_BYTES = 256 << 20
_materialized: dict[str, str] = {}  # per worker process: shipped file → its local copy


def ship_local_files(paths: list[str], limit_bytes: int = SHIP_LIMIT_BYTES) -> dict[str, Any]:
    """``{path: ObjectRef of its bytes}`` for local files, up to ``limit_bytes`` in all; URIs are left alone.

    The limit is on the total, not per file: the driver puts every shipped byte into the object store, so
    a corpus split into many small local files would otherwise pass through the driver whole.
    """
    import ray

    shipped: dict[str, Any] = {}
    budget = limit_bytes
    for path in dict.fromkeys(paths):
        if storage.is_uri(path):
            continue
        size = Path(path).stat().st_size
        if size > budget:
            log.info("%s (%d MiB) is read in place: it must be on a folder every node mounts", path, size >> 20)
            continue
        shipped[path] = ray.put(Path(path).read_bytes())
        budget -= size
    return shipped


def materialize(path: str, shipped: dict[str, Any] | None) -> str:
    """Where this process can read ``path``: a node-local copy of a shipped file, else the path itself."""
    if not shipped or path not in shipped:
        return path
    if path not in _materialized:
        import ray

        local = storage.scratch_dir("input-") / Path(path).name
        local.write_bytes(ray.get(shipped[path]))
        _materialized[path] = str(local)
    return _materialized[path]
