"""Sharded ``.h5`` page embeddings: shard plan, shard writing, streaming reader.

Layout of an output folder (stable: the self-training rounds read it)::

    shard-00000.h5     datasets ``ids`` int64 [N] (ascending), ``embeddings`` float16|float32 [N, D];
    shard-00001.h5     attributes: model, dimension, normalize, pooling, max_length, max_words, dtype,
    ...                source, row_start, row_end, expected_rows
    manifest.json      job config, counts, timings, ``attributes`` and ``shards``: one entry per shard with
                       file, rows, checksum (sha256), id_min, id_max, source, row_start, row_end

A shard is the rows ``[row_start, row_end)`` of one pages parquet file, so the assignment of pages to
shards is the same on every run. A shard file only ever appears complete: it is written under a temporary
name and renamed when closed (on object storage: written to node-local scratch, uploaded under a temporary
name, then moved); a restarted run keeps the shards whose file exists and matches the plan and
configuration, removes temporary leftovers, and redoes the rest. Every location may be a URI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.manifest import file_checksum

SHARD_PATTERN = "shard-{:05d}.h5"
_TMP_MARK = ".tmp-"
# attributes that must match for a shard written earlier to be reused
SIGNATURE_KEYS = ("model", "dimension", "normalize", "pooling", "max_length", "max_words", "dtype",
                  "source", "row_start", "row_end")


@dataclass(frozen=True)
class ShardSpec:
    shard: int
    source: str
    row_start: int
    row_end: int

    @property
    def file_name(self) -> str:
        return SHARD_PATTERN.format(self.shard)

    def as_dict(self) -> dict[str, Any]:
        return {"shard": self.shard, "source": self.source, "row_start": self.row_start, "row_end": self.row_end}


def plan_shards(files: Sequence[str | Path], rows_per_shard: int) -> list[ShardSpec]:
    """Cut each pages file (in the given order) into runs of ``rows_per_shard`` rows."""
    specs: list[ShardSpec] = []
    for f in files:
        rows = storage.parquet_file(f).metadata.num_rows
        for start in range(0, rows, rows_per_shard):
            specs.append(ShardSpec(len(specs), str(f), start, min(rows, start + rows_per_shard)))
    return specs


def read_rows(path: str | Path, start: int, end: int, columns: Sequence[str]) -> pa.Table:
    """Rows ``[start, end)`` of a parquet file, reading only the row groups that hold them."""
    parquet = storage.parquet_file(path)
    groups, offset, first_offset = [], 0, None
    for g in range(parquet.metadata.num_row_groups):
        n = parquet.metadata.row_group(g).num_rows
        if offset + n > start and offset < end:
            groups.append(g)
            first_offset = offset if first_offset is None else first_offset
        offset += n
    if not groups:
        return parquet.schema_arrow.empty_table().select(list(columns))
    table = parquet.read_row_groups(groups, columns=list(columns))
    return table.slice(start - first_offset, end - start)


def first_words(text: str, max_words: int) -> str:
    return " ".join(text.split(None, max_words)[:max_words])


def write_shard(directory: str | Path, shard: int, ids: np.ndarray, embeddings: np.ndarray,
                attributes: dict[str, Any], dtype: str = "float16") -> dict[str, Any]:
    """Write one shard (rows sorted by id) under a temporary name, then rename it; returns its manifest entry."""
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    embeddings = np.asarray(embeddings)[order].astype(dtype, copy=False)
    file_name = SHARD_PATTERN.format(shard)
    target = storage.join(directory, file_name)
    if storage.on_local_disk(directory):  # written beside its final name, then renamed
        final = Path(storage.resolve(target)[1])
        final.parent.mkdir(parents=True, exist_ok=True)
        local = final.with_name(f"{file_name}{_TMP_MARK}{os.getpid()}")
        _write_h5(local, ids, embeddings, attributes, dtype)
        checksum = file_checksum(local)
        local.replace(final)
    else:  # h5py needs a real file: made in node-local scratch, then uploaded whole
        scratch = storage.scratch_dir("shard-")
        try:
            local = scratch / file_name
            _write_h5(local, ids, embeddings, attributes, dtype)
            checksum = file_checksum(local)
            storage.upload_file(local, target)
        finally:
            storage.remove_local(scratch)
    return {"shard": shard, "file": file_name, "rows": int(len(ids)), "checksum": checksum,
            "id_min": int(ids[0]) if len(ids) else None, "id_max": int(ids[-1]) if len(ids) else None}


def _write_h5(path: Path, ids: np.ndarray, embeddings: np.ndarray, attributes: dict[str, Any], dtype: str) -> None:
    import h5py

    with h5py.File(path, "w") as h5:
        h5.create_dataset("ids", data=ids)
        h5.create_dataset("embeddings", data=embeddings.reshape(len(ids), -1) if len(ids) else
                          np.zeros((0, int(attributes.get("dimension", 0))), dtype=dtype))
        for key, value in {**attributes, "dtype": dtype, "rows": len(ids)}.items():
            h5.attrs[key] = "" if value is None else value


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_shard_attributes(path: str | Path) -> dict[str, Any]:
    import h5py

    with storage.local_file(path) as local, h5py.File(local, "r") as h5:
        attrs = {k: _attr(v) for k, v in h5.attrs.items()}
        attrs["_ids_rows"] = int(h5["ids"].shape[0])
        attrs["_embedding_rows"] = int(h5["embeddings"].shape[0])
        attrs["_ids_range"] = (int(h5["ids"][0]), int(h5["ids"][-1])) if h5["ids"].shape[0] else (None, None)
        attrs["_checksum"] = file_checksum(local)
    return attrs


def remove_partial_files(directory: str | Path) -> list[str]:
    """Delete temporary shard files a killed run left behind; returns their names."""
    removed = []
    for location in storage.list_temporary(directory):
        if storage.name(location).startswith("shard-"):
            storage.delete(location)
            removed.append(storage.name(location))
    return removed


def shard_status(directory: str | Path, spec: ShardSpec, signature: dict[str, Any],
                 checksum: str | None = None) -> str:
    """``complete``, ``missing``, ``damaged`` (unreadable, row counts or checksum wrong) or ``mismatch``
    (a complete shard written with another configuration or plan)."""
    path = storage.join(directory, spec.file_name)
    if not storage.exists(path):
        return "missing"
    try:
        attrs = read_shard_attributes(path)
    except Exception:  # noqa: BLE001 -- any unreadable file is redone
        return "damaged"
    return classify_shard(attrs, spec, signature, checksum)


def classify_shard(attrs: dict[str, Any], spec: ShardSpec, signature: dict[str, Any],
                   checksum: str | None = None) -> str:
    """:func:`shard_status` of a shard whose attributes were read already."""
    if not (attrs.get("rows") == attrs["_ids_rows"] == attrs["_embedding_rows"] == attrs.get("expected_rows")):
        return "damaged"
    expected = {**signature, **{k: v for k, v in spec.as_dict().items() if k != "shard"}}
    if any(str(attrs.get(k)) != str(expected[k]) for k in SIGNATURE_KEYS if k in expected):
        return "mismatch"
    if checksum is not None and attrs["_checksum"] != checksum:
        return "damaged"
    return "complete"


class H5Corpus:
    """Read an encoded corpus folder: stream it in chunks, or look rows up by page id.

    Nothing is loaded whole: ``iter_chunks`` reads ``chunk_rows`` rows at a time; ``lookup`` reads only the
    ``ids`` of the shards whose id range can hold the requested ids, then the matching embedding rows.
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        manifest_path = storage.join(self.path, "manifest.json")
        if not storage.is_file(manifest_path):
            raise FileNotFoundError(f"{manifest_path} not found: the folder is not a finished encode_corpus output")
        self.manifest = storage.read_json(manifest_path)
        self.attributes: dict[str, Any] = self.manifest["attributes"]
        self.shards: list[dict[str, Any]] = self.manifest["shards"]

    @property
    def dimension(self) -> int:
        return int(self.attributes["dimension"])

    def __len__(self) -> int:
        return sum(s["rows"] for s in self.shards)

    def iter_chunks(self, chunk_rows: int = 65_536,
                    dtype: str | None = "float32") -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(ids, embeddings)`` chunks of at most ``chunk_rows`` rows, shard after shard."""
        import h5py

        for shard in self.shards:
            with storage.local_file(storage.join(self.path, shard["file"])) as local, h5py.File(local, "r") as h5:
                n = h5["ids"].shape[0]
                for start in range(0, n, chunk_rows):
                    ids = h5["ids"][start:start + chunk_rows]
                    embeddings = h5["embeddings"][start:start + chunk_rows]
                    yield ids, embeddings.astype(dtype) if dtype else embeddings

    def ids_at(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """The ids at ``positions`` of the corpus order (shard after shard); only the shards' id columns are read."""
        import h5py

        positions = np.asarray(positions, dtype=np.int64)
        out = np.empty(len(positions), dtype=np.int64)
        start = 0
        for shard in self.shards:
            end = start + shard["rows"]
            inside = (positions >= start) & (positions < end)
            if inside.any():
                with storage.local_file(storage.join(self.path, shard["file"])) as local, h5py.File(local, "r") as h5:
                    out[inside] = h5["ids"][:][positions[inside] - start]
            start = end
        if len(positions) and (positions.min() < 0 or positions.max() >= start):
            raise IndexError(f"positions outside 0..{start - 1} in {self.path}")
        return out

    def lookup(self, ids: Sequence[int] | np.ndarray, dtype: str = "float32") -> np.ndarray:
        """Embeddings of ``ids`` in the order given; ``KeyError`` names ids that are not in the corpus."""
        import h5py

        wanted = np.asarray(ids, dtype=np.int64)
        out = np.empty((len(wanted), self.dimension), dtype=dtype)
        found = np.zeros(len(wanted), dtype=bool)
        for shard in self.shards:
            if not shard["rows"]:
                continue
            in_range = (~found) & (wanted >= shard["id_min"]) & (wanted <= shard["id_max"])
            if not in_range.any():
                continue
            with storage.local_file(storage.join(self.path, shard["file"])) as local, h5py.File(local, "r") as h5:
                shard_ids = h5["ids"][:]
                positions = np.searchsorted(shard_ids, wanted[in_range])
                positions = np.minimum(positions, len(shard_ids) - 1)
                hit = shard_ids[positions] == wanted[in_range]
                targets = np.flatnonzero(in_range)[hit]
                rows = positions[hit]
                if len(rows):
                    order = np.argsort(rows)  # h5py fancy indexing wants increasing indices
                    unique_rows, inverse = np.unique(rows[order], return_inverse=True)
                    values = h5["embeddings"][unique_rows][inverse]
                    out[targets[order]] = values
                    found[targets] = True
        if not found.all():
            missing = wanted[~found][:10].tolist()
            raise KeyError(f"{int((~found).sum())} ids not in {self.path} (first: {missing})")
        return out

    def verify(self) -> list[str]:
        """Shards whose file is missing or whose checksum differs from the manifest."""
        bad = []
        for shard in self.shards:
            path = storage.join(self.path, shard["file"])
            if not storage.is_file(path):
                bad.append(shard["file"])
                continue
            with storage.local_file(path) as local:
                if file_checksum(local) != shard["checksum"]:
                    bad.append(shard["file"])
        return bad
