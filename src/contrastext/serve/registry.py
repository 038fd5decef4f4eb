"""The registry of classifiers trained over HTTP, on a local folder or a URI (``contrastext.storage``):

    <root>/<name>/status.json                    the training's state, rounds and times (rewritten as it runs)
    <root>/<name>/versions/<version>/model/      the model, sentence-transformers format
    <root>/<name>/versions/<version>/manifest.json   labels, aliases, template, base model, rounds, metrics, created
    <root>/_audit/<time>-<id>.json               one per training started or classifier deleted: who, what, when

A version exists once its manifest does: the model files are copied first and the manifest written last,
so a reader never finds half a model under a manifest. Every replica and every restart of the app reads
the same files.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow.fs

from contrastext import storage

log = logging.getLogger(__name__)
STATUS = "status.json"
AUDIT = "_audit"  # not a classifier name: those start with a letter or digit
MANIFEST = "manifest.json"
ACTIVE_STATES = ("queued", "running")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ClassifierRegistry:
    def __init__(self, root: storage.Location):
        self.root = str(root).rstrip("/")

    def folder(self, name: str) -> str:
        return storage.join(self.root, name)

    # ------------------------------------------------------------ status of a training
    def status(self, name: str) -> dict[str, Any] | None:
        try:
            return storage.read_json(storage.join(self.folder(name), STATUS))
        except FileNotFoundError:
            return None

    def write_status(self, name: str, status: dict[str, Any]) -> None:
        storage.write_json(storage.join(self.folder(name), STATUS), status)

    def update_status(self, name: str, **changes: Any) -> dict[str, Any]:
        status = {**(self.status(name) or {"name": name}), **changes}
        self.write_status(name, status)
        return status

    def names(self) -> list[str]:
        fs, path = storage.resolve(self.root)
        infos = fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True))
        return sorted(info.base_name for info in infos
                      if info.type == pyarrow.fs.FileType.Directory and info.base_name != AUDIT)

    def delete(self, name: str) -> None:
        storage.delete(self.folder(name))

    # ------------------------------------------------------------ audit
    def audit(self, action: str, name: str, who: str, **details: Any) -> dict[str, Any]:
        """Record ``action`` on classifier ``name`` by token ``who`` (its name, never the token): one file per
        event (object storage has no append), and the same as a log line."""
        event = {"time": now(), "action": action, "classifier": name, "token": who, **details}
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%f")
        storage.write_json(storage.join(self.root, AUDIT, f"{stamp}-{uuid.uuid4().hex[:8]}.json"), event)
        log.info("audit: %s %s by %s %s", action, name, who, details or "")
        return event

    def audit_events(self) -> list[dict[str, Any]]:
        """Every audit event, oldest first."""
        paths = sorted(storage.list_files(storage.join(self.root, AUDIT), suffix=".json"))
        return [storage.read_json(path) for path in paths]

    # ------------------------------------------------------------ versions
    def publish(self, name: str, model_folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        """Copy a finished local model folder in as the next version; returns its manifest."""
        versions = self.versions(name)
        number = (versions[-1]["version"] + 1) if versions else 1
        # a unique folder per version: replicas cache models by folder, and a name may be deleted and reused
        version_dir = f"{number:04d}-{uuid.uuid4().hex[:8]}"
        location = storage.join(self.folder(name), "versions", version_dir)
        manifest = {**manifest, "name": name, "version": number, "folder": f"versions/{version_dir}",
                    "created": now()}
        try:
            storage.copy_tree(model_folder, storage.join(location, "model"))
            storage.write_json(storage.join(location, MANIFEST), manifest)
        except BaseException:
            storage.delete(location)
            raise
        return manifest

    def versions(self, name: str) -> list[dict[str, Any]]:
        manifests = [storage.read_json(path) for path in
                     storage.list_files(storage.join(self.folder(name), "versions"), suffix=MANIFEST, recursive=True)]
        return sorted(manifests, key=lambda m: m["version"])

    def latest(self, name: str) -> dict[str, Any] | None:
        versions = self.versions(name)
        return versions[-1] if versions else None

    def model_location(self, manifest: dict[str, Any]) -> str:
        return storage.join(self.folder(manifest["name"]), manifest["folder"], "model")
