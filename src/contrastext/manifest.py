"""manifest.json: what a job ran with (config, versions, seed, inputs) and what it produced (counts, timings)."""

from __future__ import annotations

import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from contrastext import storage
from contrastext.storage import file_checksum  # noqa: F401 -- where the jobs import it from

Location = str | Path  # a local path or a filesystem URI such as s3://bucket/runs/x

_PACKAGES = ("contrastext", "torch", "transformers", "ray", "numpy", "pyarrow", "sentence-transformers")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions




def write_json_atomic(location: Location, content: Any) -> Location:
    """Write JSON (local path or URI) so a reader never sees half a file; returns ``location``."""
    storage.write_bytes(location, json.dumps(content, indent=2, default=str, sort_keys=False).encode("utf-8"))
    return location


def in_run_dir(run_dir: Location, name: str) -> Location:
    return run_dir / name if isinstance(run_dir, Path) else storage.join(run_dir, name)


def write_manifest(run_dir: Location, *, job: str, config: BaseModel, counts: dict[str, Any],
                   timings: dict[str, float], inputs: dict[str, str] | None = None,
                   extra: dict[str, Any] | None = None) -> Location:
    seed = getattr(getattr(config, "train", None), "seed", getattr(config, "seed", None))
    manifest = {
        "job": job,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": config.model_dump(mode="json"),
        "seed": seed,
        "versions": package_versions(),
        "inputs": inputs or {},
        "counts": counts,
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        **(extra or {}),
    }
    return write_json_atomic(in_run_dir(run_dir, "manifest.json"), manifest)
