"""The classifier registry on a local folder and on S3 (moto): versions, manifests, status, listing, removal."""

from __future__ import annotations

import json

import pytest

from contrastext import storage
from contrastext.serve.registry import ClassifierRegistry


@pytest.fixture(params=["local", "s3"])
def registry(request, tmp_path) -> ClassifierRegistry:
    if request.param == "local":
        return ClassifierRegistry(tmp_path / "registry")
    return ClassifierRegistry(request.getfixturevalue("s3_bucket") + "/registry")


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 32}))
    (folder / "sub" / "weights.bin").write_bytes(b"\0" * 1000)
    return folder


def test_versions_status_listing_and_removal(registry, model_folder, tmp_path):
    assert registry.names() == [] and registry.status("news") is None and registry.latest("news") is None
    registry.write_status("news", {"name": "news", "state": "queued"})
    assert registry.update_status("news", state="running", round=1) == {"name": "news", "state": "running",
                                                                        "round": 1}
    first = registry.publish("news", model_folder, {"labels": ["A", "B"], "rounds": 1})
    second = registry.publish("news", model_folder, {"labels": ["A", "B"], "rounds": 2})
    assert (first["version"], second["version"]) == (1, 2) and first["folder"] != second["folder"]
    assert registry.latest("news") == second and [m["version"] for m in registry.versions("news")] == [1, 2]
    assert second["labels"] == ["A", "B"] and second["name"] == "news" and second["created"]
    location = registry.model_location(second)
    assert storage.read_bytes(storage.join(location, "sub", "weights.bin")) == b"\0" * 1000
    with storage.local_copy(location) as local:
        assert json.loads((local / "config.json").read_text()) == {"hidden_size": 32}
    registry.write_status("other", {"name": "other", "state": "queued"})
    assert registry.names() == ["news", "other"]
    registry.delete("news")
    assert registry.names() == ["other"] and registry.status("news") is None and registry.versions("news") == []


def test_a_failed_copy_leaves_no_version(registry, tmp_path):
    with pytest.raises(Exception):
        registry.publish("news", tmp_path / "no-such-model", {"labels": ["A", "B"]})
    assert registry.versions("news") == [] and registry.latest("news") is None
