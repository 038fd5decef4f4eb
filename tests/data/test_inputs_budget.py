"""Local inputs shipped through the object store: a budget for all of them, not per file."""

from __future__ import annotations

import pytest

from contrastext.data.inputs import materialize, ship_local_files

pytestmark = pytest.mark.ray


def test_local_files_are_shipped_up_to_the_limit_in_all(ray_session, tmp_path):
    paths = []
    for n in range(4):
        paths.append(str(tmp_path / f"part-{n}.parquet"))
        (tmp_path / f"part-{n}.parquet").write_bytes(bytes([n]) * 40)
    shipped = ship_local_files([*paths, "s3://bucket/other.parquet"], limit_bytes=100)
    assert sorted(shipped) == paths[:2]  # 80 bytes; a third file would pass the 100 in all
    with open(materialize(paths[1], shipped), "rb") as f:
        assert f.read() == bytes([1]) * 40
    assert materialize(paths[3], shipped) == paths[3]  # read in place
