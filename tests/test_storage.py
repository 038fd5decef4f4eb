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


# ------------------------------------------------------------------------------- on S3 (moto on 127.0.0.1)
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow as pa  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_s3_files_appear_whole_and_list_without_temporaries(s3_bucket, tmp_path):
    run = s3_bucket + "/runs/x"
    storage.write_json(run + "/a/done.json", {"ok": True})
    storage.write_parquet(pa.table({"v": [1, 2, 3]}), run + "/t.parquet")
    local = tmp_path / "big.bin"
    local.write_bytes(b"z" * 100_000)
    storage.upload_file(local, run + "/big.bin")
    fs, path = storage.resolve(run + "/half.bin.tmp-0001")
    with fs.open_output_stream(path) as f:  # what a writer killed mid-upload leaves
        f.write(b"partial")
    assert storage.list_files(run, recursive=True) == [run + "/a/done.json", run + "/big.bin", run + "/t.parquet"]
    assert storage.list_temporary(run) == [run + "/half.bin.tmp-0001"]
    assert storage.read_json(run + "/a/done.json") == {"ok": True} and storage.is_dir(run + "/a")
    assert storage.read_parquet(run + "/t.parquet").column("v").to_pylist() == [1, 2, 3]
    with storage.local_file(run + "/big.bin") as copy:
        assert copy.read_bytes() == local.read_bytes()
    storage.delete(run + "/a")
    assert not storage.exists(run + "/a/done.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        storage.read_bytes(run + "/missing.json")


def test_bad_locations_fail_at_once_naming_the_uri(s3_server, monkeypatch):
    with pytest.raises(storage.StorageError, match="s3://no-such-bucket/runs: bucket 'no-such-bucket' does not"):
        storage.check_writable("s3://no-such-bucket/runs")
    bucket = s3_server.new_bucket("creds")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(storage.StorageError, match=f"{bucket}/runs: .*check the AWS credentials"):
        storage.check_writable(bucket + "/runs")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(storage.StorageError, match=f"{bucket}/runs: the store cannot be reached"):
        storage.check_writable(bucket + "/runs")


def test_a_job_with_an_unreachable_bucket_stops_before_any_work(s3_server, tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "wcsbert_selftrain.py"),
                           "--set", "output.storage_path=s3://no-such-bucket/runs"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2
    assert "output.storage_path: s3://no-such-bucket/runs" in done.stderr and "does not exist" in done.stderr
    assert "Ray" not in done.stdout + done.stderr.replace("s3://", "")  # no Ray was started
    assert not list(tmp_path.iterdir())
