"""manifest.json: what a job ran with (config, versions, seed, inputs) and what it produced (counts, timings)."""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

_PACKAGES = ("contrastext", "torch", "transformers", "ray", "numpy", "pyarrow", "sentence-transformers")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def file_checksum(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def write_json_atomic(path: Path, content: Any) -> Path:
    """Write JSON to a temporary name, then rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(content, indent=2, default=str, sort_keys=False))
    tmp.replace(path)
    return path


def write_manifest(run_dir: Path, *, job: str, config: BaseModel, counts: dict[str, Any],
                   timings: dict[str, float], inputs: dict[str, str] | None = None,
                   extra: dict[str, Any] | None = None) -> Path:
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
    return write_json_atomic(run_dir / "manifest.json", manifest)
