"""Sharded ``.h5`` page embeddings: shard plan, shard writer (a Ray Data actor), streaming reader.

Layout of an output folder (stable: the self-training rounds read it)::

    shard-00000.h5     datasets ``ids`` int64 [N] (ascending), ``embeddings`` float16|float32 [N, D];
    shard-00001.h5     attributes: model, dimension, normalize, pooling, max_length, max_words, dtype,
    ...                source, row_start, row_end, expected_rows
    manifest.json      job config, counts, timings, ``attributes`` and ``shards``: one entry per shard with
                       file, rows, checksum (sha256), id_min, id_max, source, row_start, row_end

A shard is the rows ``[row_start, row_end)`` of one pages parquet file, so the assignment of pages to
shards is the same on every run. A shard file only ever appears complete: it is written under a temporary
name and renamed when closed; a restarted run keeps the shards whose file exists and matches the plan and
configuration, removes temporary leftovers, and redoes the rest.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

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
        rows = pq.ParquetFile(f).metadata.num_rows
        for start in range(0, rows, rows_per_shard):
            specs.append(ShardSpec(len(specs), str(f), start, min(rows, start + rows_per_shard)))
    return specs


def read_rows(path: str | Path, start: int, end: int, columns: Sequence[str]) -> pa.Table:
    """Rows ``[start, end)`` of a parquet file, reading only the row groups that hold them."""
    parquet = pq.ParquetFile(path)
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
    import h5py

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    embeddings = np.asarray(embeddings)[order].astype(dtype, copy=False)
    final = directory / SHARD_PATTERN.format(shard)
    tmp = directory / f"{final.name}{_TMP_MARK}{os.getpid()}"
    with h5py.File(tmp, "w") as h5:
        h5.create_dataset("ids", data=ids)
        h5.create_dataset("embeddings", data=embeddings.reshape(len(ids), -1) if len(ids) else
                          np.zeros((0, int(attributes.get("dimension", 0))), dtype=dtype))
        for key, value in {**attributes, "dtype": dtype, "rows": len(ids)}.items():
            h5.attrs[key] = "" if value is None else value
    tmp.replace(final)
    return {"shard": shard, "file": final.name, "rows": int(len(ids)), "checksum": file_checksum(final),
            "id_min": int(ids[0]) if len(ids) else None, "id_max": int(ids[-1]) if len(ids) else None}


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def read_shard_attributes(path: str | Path) -> dict[str, Any]:
    import h5py

    with h5py.File(path, "r") as h5:
        attrs = {k: _attr(v) for k, v in h5.attrs.items()}
        attrs["_ids_rows"] = int(h5["ids"].shape[0])
        attrs["_embedding_rows"] = int(h5["embeddings"].shape[0])
    return attrs


def remove_partial_files(directory: str | Path) -> list[str]:
    """Delete temporary shard files a killed run left behind; returns their names."""
    removed = []
    for path in Path(directory).glob(f"shard-*.h5{_TMP_MARK}*"):
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


def shard_status(directory: str | Path, spec: ShardSpec, signature: dict[str, Any],
                 checksum: str | None = None) -> str:
    """``complete``, ``missing``, ``damaged`` (unreadable, row counts or checksum wrong) or ``mismatch``
    (a complete shard written with another configuration or plan)."""
    path = Path(directory) / spec.file_name
    if not path.exists():
        return "missing"
    try:
        attrs = read_shard_attributes(path)
    except Exception:  # noqa: BLE001 -- any unreadable file is redone
        return "damaged"
    if not (attrs.get("rows") == attrs["_ids_rows"] == attrs["_embedding_rows"] == attrs.get("expected_rows")):
        return "damaged"
    expected = {**signature, **{k: v for k, v in spec.as_dict().items() if k != "shard"}}
    if any(str(attrs.get(k)) != str(expected[k]) for k in SIGNATURE_KEYS if k in expected):
        return "mismatch"
    if checksum is not None and file_checksum(path) != checksum:
        return "damaged"
    return "complete"


class H5ShardWriter:
    """Ray Data stage (run as one actor): gathers encoded rows by shard, writes a shard when it is whole.

    Input batches carry ``shard``, ``shard_rows`` (rows the shard will have), ``page_id``, ``embedding``;
    each output row is the manifest entry of a shard just written.
    """

    def __init__(self, directory: str, attributes: dict[str, Any], specs: dict[int, dict[str, Any]],
                 dtype: str = "float16"):
        self.directory, self.attributes, self.specs, self.dtype = directory, attributes, specs, dtype
        self.ids: dict[int, list[np.ndarray]] = defaultdict(list)
        self.embeddings: dict[int, list[np.ndarray]] = defaultdict(list)
        self.received: dict[int, int] = defaultdict(int)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        done: list[dict[str, Any]] = []
        shards = np.asarray(batch["shard"])
        for shard in np.unique(shards):
            rows = shards == shard
            shard = int(shard)
            self.ids[shard].append(np.asarray(batch["page_id"])[rows])
            self.embeddings[shard].append(np.asarray(batch["embedding"])[rows])
            self.received[shard] += int(rows.sum())
            expected = int(np.asarray(batch["shard_rows"])[rows][0])
            if self.received[shard] >= expected:
                done.append(self._finish(shard, expected))
        return {"entry": [json.dumps(d) for d in done]}

    def _finish(self, shard: int, expected: int) -> dict[str, Any]:
        ids = np.concatenate(self.ids.pop(shard))
        embeddings = np.concatenate(self.embeddings.pop(shard))
        self.received.pop(shard)
        spec = self.specs[shard]
        attrs = {**self.attributes, **{k: v for k, v in spec.items() if k != "shard"}, "expected_rows": expected}
        entry = write_shard(self.directory, shard, ids, embeddings, attrs, self.dtype)
        return {**entry, **spec}


class H5Corpus:
    """Read an encoded corpus folder: stream it in chunks, or look rows up by page id.

    Nothing is loaded whole: ``iter_chunks`` reads ``chunk_rows`` rows at a time; ``lookup`` reads only the
    ``ids`` of the shards whose id range can hold the requested ids, then the matching embedding rows.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        manifest_path = self.path / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{manifest_path} not found: the folder is not a finished encode_corpus output")
        self.manifest = json.loads(manifest_path.read_text())
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
            with h5py.File(self.path / shard["file"], "r") as h5:
                n = h5["ids"].shape[0]
                for start in range(0, n, chunk_rows):
                    ids = h5["ids"][start:start + chunk_rows]
                    embeddings = h5["embeddings"][start:start + chunk_rows]
                    yield ids, embeddings.astype(dtype) if dtype else embeddings

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
            with h5py.File(self.path / shard["file"], "r") as h5:
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
            path = self.path / shard["file"]
            if not path.is_file() or file_checksum(path) != shard["checksum"]:
                bad.append(shard["file"])
        return bad
