"""manifest.json writing: content, atomic write, checksums."""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata

from contrastext.config import FitJobConfig, OutputConfig, load_config
from contrastext.manifest import file_checksum, package_versions, write_json_atomic, write_manifest


def test_write_manifest_records_config_seed_versions_counts_and_timings(tmp_path):
    config = load_config(FitJobConfig, overrides=["train.seed=123", "train.batch_size=8"])
    run_dir = tmp_path / "runs" / "exp"  # does not exist yet: write_manifest creates it
    path = write_manifest(run_dir, job="pair_fit", config=config,
                          counts={"train_pairs": 90, "eval_pairs": 10},
                          timings={"train": 1.23456, "total": 2.0},
                          inputs={"pairs.jsonl": "sha256:abc"}, extra={"note": "hi"})
    assert path == run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest["job"] == "pair_fit"
    assert manifest["config"] == config.model_dump(mode="json")
    assert FitJobConfig.model_validate(manifest["config"]) == config
    assert manifest["seed"] == 123
    assert manifest["versions"]["python"] == sys.version.split()[0]
    assert "torch" in manifest["versions"]
    assert manifest["versions"]["torch"] == metadata.version("torch")
    assert manifest["counts"] == {"train_pairs": 90, "eval_pairs": 10}
    assert manifest["timings_s"] == {"train": 1.235, "total": 2.0}
    assert manifest["inputs"] == {"pairs.jsonl": "sha256:abc"}
    assert manifest["note"] == "hi"
    assert manifest["written_at"].endswith("Z")


def test_write_manifest_seed_of_a_config_without_train_section(tmp_path):
    manifest = json.loads(write_manifest(tmp_path, job="x", config=OutputConfig(), counts={},
                                         timings={}).read_text())
    assert manifest["seed"] is None
    assert manifest["inputs"] == {}
    assert manifest["config"] == {"storage_path": "runs", "name": "fit"}


def test_package_versions_skips_missing_packages():
    versions = package_versions()
    assert set(versions) >= {"python", "platform", "torch", "numpy"}
    assert all(isinstance(v, str) and v for v in versions.values())


def test_write_json_atomic_leaves_no_tmp_file_and_replaces(tmp_path):
    path = tmp_path / "sub" / "result.json"
    assert write_json_atomic(path, {"a": 1}) == path
    assert write_json_atomic(path, {"b": [1, 2], "when": tmp_path}) == path  # non-JSON values via str()
    assert json.loads(path.read_text()) == {"b": [1, 2], "when": str(tmp_path)}
    assert sorted(p.name for p in path.parent.iterdir()) == ["result.json"]
    assert not list(tmp_path.rglob("*.tmp"))


def test_file_checksum_is_sha256_of_the_bytes(tmp_path):
    path = tmp_path / "blob.bin"
    data = bytes(range(256)) * 5000  # ~1.2 MB: more than one 1 MiB chunk
    path.write_bytes(data)
    expected = hashlib.sha256(data).hexdigest()
    assert file_checksum(path) == f"sha256:{expected}"
    assert file_checksum(str(path), chunk_bytes=7) == f"sha256:{expected}"


def test_file_checksum_of_an_empty_file(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    assert file_checksum(path) == "sha256:" + hashlib.sha256(b"").hexdigest()
