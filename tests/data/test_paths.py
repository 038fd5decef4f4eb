"""The one rule for the data folder (contrastext.data.paths) and that every job follows it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from contrastext.data import paths
from contrastext.data.paths import DATA_ENV, data_root, data_roots, resolve_data_path

SRC = Path(__file__).resolve().parents[2] / "src" / "contrastext"


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout at tmp/repo and a working directory at tmp/elsewhere/work, no $CONTRASTEXT_DATA."""
    repo, work = tmp_path / "repo", tmp_path / "elsewhere" / "work"
    repo.mkdir()
    work.mkdir(parents=True)
    monkeypatch.setattr(paths, "_REPO_ROOT", repo)
    monkeypatch.chdir(work)
    monkeypatch.delenv(DATA_ENV, raising=False)
    return tmp_path / "shared" / "data", tmp_path / "elsewhere" / "shared" / "data"


def test_the_setting_comes_first(checkout, monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_root(str(tmp_path / "mine")) == tmp_path / "mine"
    assert data_root("~/data") == Path.home() / "data"
    assert data_root("s3://bucket/data") == "s3://bucket/data"


def test_then_the_environment(checkout, monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_root(None) == data_root("") == tmp_path / "env"
    monkeypatch.setenv(DATA_ENV, "s3://bucket/data")
    assert data_root() == "s3://bucket/data"


def test_then_shared_data_beside_the_checkout_else_beside_the_working_directory(checkout):
    beside_checkout, beside_work = checkout
    assert data_root() == beside_checkout  # neither exists: the checkout's, so an error names it
    beside_work.mkdir(parents=True)
    assert data_root() == beside_work
    beside_checkout.mkdir(parents=True)
    assert data_root() == beside_checkout


def test_data_roots_list_every_place_in_order(checkout, monkeypatch, tmp_path):
    beside_checkout, beside_work = checkout
    assert data_roots() == [beside_checkout, beside_work]
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_roots() == [tmp_path / "env", beside_checkout, beside_work]


def test_samples_are_looked_for_in_the_data_roots_then_the_cache(checkout, monkeypatch, tmp_path):
    from contrastext.data.samples import candidate_paths

    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    places = candidate_paths("f.bz2", cache=tmp_path / "cache", folder="wikipedia")
    assert places == [*(root / "wikipedia" / "f.bz2" for root in data_roots()), tmp_path / "cache" / "wikipedia" / "f.bz2"]


def test_resolve_a_relative_path_under_the_data_folder(checkout, monkeypatch, tmp_path):
    (tmp_path / "mine" / "set").mkdir(parents=True)
    (tmp_path / "mine" / "set" / "d.jsonl").write_text("{}\n")
    assert resolve_data_path("set/d.jsonl", str(tmp_path / "mine")) == tmp_path / "mine" / "set" / "d.jsonl"
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "mine"))
    assert resolve_data_path("set/d.jsonl") == tmp_path / "mine" / "set" / "d.jsonl"
    beside_checkout, _ = checkout
    monkeypatch.delenv(DATA_ENV)
    with pytest.raises(FileNotFoundError, match=f"data directory {beside_checkout}.*set `data_dir`"):
        resolve_data_path("set/d.jsonl")


def test_resolve_an_absolute_path_or_a_uri_as_given(tmp_path):
    (tmp_path / "d.jsonl").write_text("{}\n")
    assert resolve_data_path(str(tmp_path / "d.jsonl"), "/elsewhere") == tmp_path / "d.jsonl"
    uri = f"file://{tmp_path}/d.jsonl"
    assert resolve_data_path(uri, "/elsewhere") == uri
    assert resolve_data_path("d.jsonl", f"file://{tmp_path}") == uri
    with pytest.raises(FileNotFoundError, match=r"^text set file://.*/none\.jsonl not found"):
        resolve_data_path("none.jsonl", f"file://{tmp_path}", what="text set")


def test_only_data_paths_reads_the_data_folder_setting():
    """One home: no other module defines the rule or reads $CONTRASTEXT_DATA itself."""
    offending = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "data" / "paths.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
                    "data_root", "data_roots", "resolve_data_path"):
                offending.append(f"{path.relative_to(SRC)}:{node.lineno} defines {node.name}")
            if isinstance(node, ast.Constant) and node.value == DATA_ENV:
                offending.append(f"{path.relative_to(SRC)}:{node.lineno} names {DATA_ENV}")
    assert not offending, offending
