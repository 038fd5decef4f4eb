"""Job outputs at a local path or a filesystem URI (file:// stands in for s3:// here: same code path)."""

from contrastext import storage


def test_uri_and_local_path_resolve_to_the_same_file(tmp_path):
    uri = f"file://{tmp_path}/a/b.json"
    storage.write_bytes(uri, b"{}")
    assert (tmp_path / "a" / "b.json").read_bytes() == b"{}"
    assert storage.exists(uri) and storage.exists(tmp_path / "a" / "b.json")
    assert storage.read_bytes(tmp_path / "a" / "b.json") == b"{}"
    assert not list((tmp_path / "a").glob("*.tmp"))
    assert not storage.exists(f"file://{tmp_path}/missing")


def test_copy_tree_replaces_the_destination_and_local_copy_downloads_uris(tmp_path):
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "x.txt").write_text("x")
    target = f"file://{tmp_path}/dst"
    storage.write_bytes(storage.join(target, "stale.txt"), b"old")
    storage.copy_tree(source, target)
    assert sorted(p.name for p in (tmp_path / "dst").rglob("*")) == ["sub", "x.txt"]
    with storage.local_copy(target) as local:
        assert (local / "sub" / "x.txt").read_text() == "x" and local == tmp_path / "dst"  # file:// is local
    with storage.local_copy(tmp_path / "dst") as local:
        assert local == tmp_path / "dst"
