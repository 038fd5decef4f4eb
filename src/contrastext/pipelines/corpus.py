"""Wikipedia corpus jobs on Ray Data: ``build_corpus`` (dump → pages → category pairs) and
``encode_corpus`` (pages → sharded ``.h5`` embeddings, resumable).

``build_corpus`` writes, under ``<output.storage_path>/<output.name>/``:

- ``pages/part-<chunk>.parquet``: ``page_id`` int64, ``title`` string, ``text`` string (plain text),
  ``categories`` list<string> (normalised, page order); plus ``links`` list<struct<target, start, end>>
  when ``links: true``;
- ``pairs/part-<n>.parquet``: ``anchor`` string, ``positive`` string, ``page_id`` int64;
- ``category_counts.parquet`` (``category``, ``pages``), ``summary.json`` and ``manifest.json``.

``encode_corpus`` writes ``shard-<n>.h5`` files and ``manifest.json`` (see :mod:`contrastext.data.h5store`).

Each chunk of the dump (or each page-table file) is one Ray Data task that writes its own pages file, so
the work units and file names are the same on every run; a chunk whose result is already there is skipped.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from contrastext.config import EncoderConfig, OutputConfig, RayConfig, ScalingSettings, Settings
from contrastext.data.pairs import (PairCounts, PairOptions, count_categories, deduplicate_bucket,
                                    iter_page_categories, merge_category_counts, rare_categories,
                                    write_category_counts, write_page_pairs)
from contrastext.manifest import file_checksum, write_json_atomic, write_manifest
from contrastext.report import format_table
from contrastext.runtime import init_ray

log = logging.getLogger(__name__)

_PAGE_FIELDS = [("page_id", pa.int64()), ("title", pa.string()), ("text", pa.string()),
                ("categories", pa.list_(pa.string()))]
PAGE_SCHEMA = pa.schema(_PAGE_FIELDS)
PAGE_SCHEMA_WITH_LINKS = pa.schema(_PAGE_FIELDS + [("links", pa.list_(pa.struct(
    [("target", pa.string()), ("start", pa.int32()), ("end", pa.int32())])))])


class BuildCorpusConfig(Settings):
    """Dump (or page table + categories table) → pages parquet → category pairs parquet."""

    dump: str | None = Field(None, description="pages-articles .xml.bz2 (single stream or multistream); "
                                               "None and no pages_table: the real dump sample")
    index: str | None = Field(None, description="multistream index (offset:page_id:title, .txt or .txt.bz2)")
    streams_per_chunk: int = Field(20, ge=1, description="multistream: bz2 streams (100 pages each) per task")
    pages_table: list[str] | None = Field(None, description="parquet/JSON-lines files or folders in the HF "
                                                            "wikipedia layout (id, url, title, text)")
    categories_table: str | None = Field(None, description="with pages_table: page_id or title → categories")
    links: bool = Field(False, description="also store link spans (target, start, end) of each page")
    read_cpus: float = Field(1.0, gt=0, description="CPUs per reading task")
    pairs: PairOptions = Field(default_factory=PairOptions)
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="wiki_corpus"))
    ray: RayConfig = Field(default_factory=RayConfig)


class EncodeCorpusConfig(Settings):
    """Pages parquet → first ``max_words`` words encoded → ``.h5`` shards + manifest."""

    pages: str | None = Field(None, description="pages parquet file or folder; None: the build_corpus output "
                                                "<output.storage_path>/wiki_corpus/pages")
    encoder: EncoderConfig = Field(default_factory=lambda: EncoderConfig(max_length=256))
    max_words: int = Field(200, ge=1, description="words of each page that are encoded")
    rows_per_shard: int = Field(10_000, ge=1)
    batch_size: int = Field(64, ge=1, description="texts per forward pass")
    rows_per_task: int = Field(512, ge=1, description="rows per batch handed to an encoder actor")
    dtype: Literal["float16", "float32"] = "float16"
    scaling: ScalingSettings = Field(default_factory=lambda: ScalingSettings(num_workers=1, cpus_per_worker=1.0),
                                     description="num_workers: encoder actors; use_gpu: one GPU each")
    torch_threads: int | None = Field(None, ge=1, description="CPU threads per encoder; None: its CPUs")
    overwrite: bool = Field(False, description="discard shards written with another configuration")
    output: OutputConfig = Field(default_factory=lambda: OutputConfig(name="wiki_embeddings"))
    ray: RayConfig = Field(default_factory=RayConfig)


def _local_run_dir(output: OutputConfig) -> Path:
    run_dir = output.run_dir()
    if "://" in run_dir:
        raise ValueError(f"{run_dir}: corpus jobs write to a local or mounted folder (h5py and the shard "
                         "writers need a file system); copy the result to object storage afterwards.")
    return Path(run_dir)


# ------------------------------------------------------------------------------------ build_corpus
def _pages_table(rows: list[dict], links: bool) -> pa.Table:
    schema = PAGE_SCHEMA_WITH_LINKS if links else PAGE_SCHEMA
    return pa.Table.from_pylist(rows, schema=schema)


def read_unit(unit: dict[str, Any], run_dir: str, links: bool, categories: tuple[str, dict] | None) -> dict:
    """One work unit: read pages, write ``pages/part-<i>``, its category counts and its read stats."""
    from contrastext.data.wikipedia import (DumpChunk, Page, ReadStats, iter_dump_chunk, iter_table_file)

    run = Path(run_dir)
    part = f"part-{unit['index']:05d}"
    started = time.perf_counter()
    if unit["kind"] == "dump":
        items = iter_dump_chunk(DumpChunk(unit["path"], unit["start"], unit["end"], unit["index"]), links=links)
    else:
        items = iter_table_file(unit["path"], categories)
    stats, rows = ReadStats(), []
    for item in items:
        stats.add(item)
        if isinstance(item, Page):
            rows.append(item.as_row())
    pages_file = run / "pages" / f"{part}.parquet"
    pages_file.unlink(missing_ok=True)  # a unit read again replaces what an earlier run wrote
    if rows:
        pages_file.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_pages_table(rows, links), str(pages_file) + ".tmp", row_group_size=2048)
        Path(str(pages_file) + ".tmp").replace(pages_file)
    write_category_counts(count_categories((r["page_id"], r["categories"]) for r in rows),
                          run / "category_counts" / f"{part}.parquet")
    result = {"index": unit["index"], "unit": unit, "links": links, **stats.to_dict(),
              "seconds": time.perf_counter() - started}
    write_json_atomic(run / "read_stats" / f"{part}.json", result)  # written last: marks the unit done
    return result


def _read_units(batch: dict[str, np.ndarray], **kwargs) -> dict[str, list]:
    return {"result": [json.dumps(read_unit(json.loads(u), **kwargs)) for u in batch["unit"]]}


def _pairs_unit(batch: dict[str, np.ndarray], work: str, options: dict, rare: list[str]) -> dict[str, list]:
    opts, rare_set, out = PairOptions(**options), set(rare), []
    for item in batch["unit"]:
        unit = json.loads(item)
        counts = write_page_pairs(iter_page_categories(unit["path"]), work, f"{unit['index']:05d}", opts, rare_set)
        out.append(json.dumps(counts.__dict__))
    return {"result": out}


def _dedup_unit(batch: dict[str, np.ndarray], work: str, out: str) -> dict[str, list]:
    results = []
    for b in batch["bucket"]:
        counts = deduplicate_bucket(Path(work) / f"bucket-{int(b):04d}", Path(out) / f"part-{int(b):05d}.parquet")
        results.append(json.dumps(counts))
    return {"result": results}


def plan_units(config: BuildCorpusConfig) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Work units (one task each) and the input files they come from."""
    from contrastext.data.samples import find_dump_sample
    from contrastext.data.wikipedia import plan_dump_chunks, table_files

    if config.pages_table:
        files = table_files(config.pages_table)
        return [{"kind": "table", "path": f, "index": i} for i, f in enumerate(files)], {f: "table" for f in files}
    dump = config.dump or str(find_dump_sample())
    if not Path(dump).is_file():
        raise FileNotFoundError(f"Wikipedia dump {dump} not found")
    chunks = plan_dump_chunks(dump, config.index, config.streams_per_chunk)
    units = [{"kind": "dump", "path": c.path, "start": c.start, "end": c.end, "index": c.index} for c in chunks]
    inputs = {dump: "dump"}
    if config.index:
        inputs[config.index] = "index"
    return units, inputs


def _unit_done(run_dir: Path, unit: dict[str, Any], links: bool) -> bool:
    """A unit is done when its stats file exists and was written for the same input range and options."""
    stats = run_dir / "read_stats" / f"part-{unit['index']:05d}.json"
    if not stats.is_file():
        return False
    try:
        done = json.loads(stats.read_text())
    except ValueError:
        return False
    return done.get("unit") == unit and done.get("links") == links


def _progress(label: str, done: int, total: int, started: float, amount: int, unit: str) -> None:
    elapsed = max(time.perf_counter() - started, 1e-9)
    log.info("%s %d/%d done: %d %s (%.1f %s/s)", label, done, total, amount, unit, amount / elapsed, unit)


def run_build_corpus(config: BuildCorpusConfig) -> dict[str, Any]:
    """Read pages (Ray Data tasks per chunk), then build category pairs; returns the summary."""
    import ray.data

    from contrastext.data.wikipedia import ReadStats, read_categories_table

    started = time.perf_counter()
    timings: dict[str, float] = {}
    init_ray(config.ray)
    run_dir = _local_run_dir(config.output)
    run_dir.mkdir(parents=True, exist_ok=True)
    units, inputs = plan_units(config)
    categories = read_categories_table(config.categories_table) if config.categories_table else None

    # -- pages: one task per chunk, finished chunks (read_stats present) skipped
    pending = [u for u in units if not _unit_done(run_dir, u, config.links)]
    log.info("reading %d work units (%d already done)", len(pending), len(units) - len(pending))
    t = time.perf_counter()
    if pending:
        ds = ray.data.from_items([{"unit": json.dumps(u)} for u in pending], override_num_blocks=len(pending))
        ds = ds.map_batches(_read_units, batch_size=1, num_cpus=config.read_cpus,
                            fn_kwargs={"run_dir": str(run_dir), "links": config.links, "categories": categories})
        pages_so_far = 0
        for done, row in enumerate(ds.iter_rows(), 1):
            pages_so_far += json.loads(row["result"])["pages"]
            _progress("read unit", done, len(pending), t, pages_so_far, "pages")
    stats = ReadStats()
    for u in units:
        stats.merge(ReadStats.from_dict(json.loads(
            (run_dir / "read_stats" / f"part-{u['index']:05d}.json").read_text())))
    timings["read"] = time.perf_counter() - t

    # -- category frequencies (also what min_category_frequency needs)
    t = time.perf_counter()
    parts = [f"part-{u['index']:05d}.parquet" for u in units]  # only this input's units, never stale files
    counts = merge_category_counts(run_dir / "category_counts" / p for p in parts)
    pq.write_table(counts.sort_by([("pages", "descending"), ("category", "ascending")]),
                   run_dir / "category_counts.parquet")
    rare = sorted(rare_categories(counts, config.pairs.min_category_frequency))
    for folder in ("pages", "category_counts", "read_stats"):  # left by an earlier run on other input
        for stale in (run_dir / folder).glob("part-*"):
            if stale.name.split(".")[0] + ".parquet" not in parts:
                stale.unlink()
    pages_files = [run_dir / "pages" / p for p in parts if (run_dir / "pages" / p).is_file()]
    pages_with_2 = _pages_with_at_least(pages_files, 2)

    # -- pairs: one task per pages file, then one per dedup bucket
    options = config.pairs
    pairs_dir, work = run_dir / "pairs", run_dir / "pairs_buckets"
    for stale in (pairs_dir, work):
        shutil.rmtree(stale, ignore_errors=True)
    pair_counts = PairCounts()
    if pages_files:
        ds = ray.data.from_items([{"unit": json.dumps({"path": str(f), "index": i})}
                                  for i, f in enumerate(pages_files)], override_num_blocks=len(pages_files))
        ds = ds.map_batches(_pairs_unit, batch_size=1, num_cpus=config.read_cpus, fn_kwargs={
            "work": str(work if options.deduplicate else pairs_dir), "options": options.model_dump(), "rare": rare})
        for done, row in enumerate(ds.iter_rows(), 1):
            pair_counts.merge(PairCounts(**json.loads(row["result"])))
            _progress("pairs of pages file", done, len(pages_files), t, pair_counts.pairs, "pairs")
    pairs_written = pair_counts.pairs
    if options.deduplicate and pages_files:
        ds = ray.data.from_items([{"bucket": b} for b in range(options.buckets)],
                                 override_num_blocks=options.buckets)
        ds = ds.map_batches(_dedup_unit, batch_size=1, num_cpus=config.read_cpus,
                            fn_kwargs={"work": str(work), "out": str(pairs_dir)})
        pairs_written = sum(json.loads(r["result"])["rows_out"] for r in ds.iter_rows())
        shutil.rmtree(work, ignore_errors=True)
    timings["pairs"] = time.perf_counter() - t
    timings["total"] = time.perf_counter() - started

    summary = {
        "input": inputs, "work_units": len(units), "pages": stats.pages, "skipped": dict(stats.skipped),
        "skipped_examples": stats.examples, "pages_with_2_categories": pages_with_2,
        "distinct_categories": counts.num_rows, "rare_categories_dropped": len(rare),
        "pair_pages_with_pairs": pair_counts.pages_with_pairs, "pair_pages_capped": pair_counts.pages_capped,
        "categories_dropped_by_pattern": pair_counts.categories_dropped_by_pattern,
        "categories_dropped_by_frequency": pair_counts.categories_dropped_by_frequency,
        "pairs_generated": pair_counts.pairs, "pairs_written": pairs_written,
        "pages_per_s": stats.pages / timings["read"] if timings["read"] > 0 else None,
        "pages_dir": str(run_dir / "pages"), "pairs_dir": str(pairs_dir), "timings_s": timings,
    }
    write_json_atomic(run_dir / "summary.json", summary)
    checksums = {p: file_checksum(p) for p, kind in inputs.items() if Path(p).is_file()}
    write_manifest(run_dir, job="build_corpus", config=config, timings=timings, inputs=checksums,
                   counts={k: summary[k] for k in ("pages", "skipped", "pages_with_2_categories",
                                                   "distinct_categories", "pairs_generated", "pairs_written")},
                   extra={"outputs": {"pages": sorted(p.name for p in pages_files),
                                      "pairs": sorted(p.name for p in pairs_dir.glob("*.parquet"))}})
    print(build_summary_table(summary))
    return summary


def _pages_with_at_least(files: list[Path], n: int) -> int:
    return sum(len(c or ()) >= n for f in files for _, c in iter_page_categories(f))


def build_summary_table(summary: dict[str, Any]) -> str:
    rows: list[list[Any]] = [["pages read (articles kept)", summary["pages"]]]
    for reason, count in sorted(summary["skipped"].items()):
        rows.append([f"skipped: {reason}", count])
    rows += [
        ["pages with >= 2 categories", summary["pages_with_2_categories"]],
        ["distinct categories", summary["distinct_categories"]],
        ["categories dropped (pattern / rare)", f"{summary['categories_dropped_by_pattern']} / "
                                                f"{summary['categories_dropped_by_frequency']}"],
        ["pairs generated", summary["pairs_generated"]],
        ["pairs written (after dedup)", summary["pairs_written"]],
        ["pages/s (read stage)", summary["pages_per_s"] or 0.0],
        ["time (s): read / pairs / total", " / ".join(f"{summary['timings_s'][k]:.1f}"
                                                     for k in ("read", "pairs", "total"))],
        ["output", str(Path(summary["pages_dir"]).parent)],
    ]
    return format_table(rows, headers=["build_corpus", "value"])


# ----------------------------------------------------------------------------------- encode_corpus
def _load_shards(batch: dict[str, np.ndarray], max_words: int, directory: str, attributes: dict) -> dict:
    """Shard descriptors → rows to encode (``shard``, ``shard_rows``, ``page_id``, ``text``)."""
    from contrastext.data.h5store import first_words, read_rows, write_shard

    out: dict[str, list] = {"shard": [], "shard_rows": [], "page_id": [], "text": []}
    for item in batch["spec"]:
        spec = json.loads(item)
        table = read_rows(spec["source"], spec["row_start"], spec["row_end"], ["page_id", "text"])
        ids, texts = table.column("page_id").to_pylist(), table.column("text").to_pylist()
        valid = [(i, t) for i, t in zip(ids, texts) if i is not None and t is not None]
        if not valid:  # nothing to encode: the empty shard is written here, no row would carry it
            write_shard(directory, spec["shard"], np.zeros(0, np.int64), np.zeros((0, attributes["dimension"])),
                        {**attributes, **{k: v for k, v in spec.items() if k != "shard"}, "expected_rows": 0},
                        attributes["dtype"])
            continue
        for page_id, text in valid:
            out["shard"].append(spec["shard"])
            out["shard_rows"].append(len(valid))
            out["page_id"].append(page_id)
            out["text"].append(first_words(text, max_words))
    return {"shard": np.asarray(out["shard"], np.int64), "shard_rows": np.asarray(out["shard_rows"], np.int64),
            "page_id": np.asarray(out["page_id"], np.int64), "text": np.asarray(out["text"], dtype=object)}


class EncodePages:
    """Ray Data actor: holds one ``TextEncoder`` (on a GPU when the actor has one) and encodes batches."""

    def __init__(self, encoder: dict[str, Any], batch_size: int, torch_threads: int | None):
        import torch

        from contrastext.models import TextEncoder

        if torch_threads:
            torch.set_num_threads(torch_threads)
        self.batch_size = batch_size
        self.encoder = TextEncoder.from_pretrained(
            encoder["model"], pooling=encoder["pooling"], normalize=encoder["normalize"],
            max_length=encoder["max_length"], allow_download=encoder["allow_download"])

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        embeddings = self.encoder.encode(list(batch["text"]), batch_size=self.batch_size)
        return {"shard": batch["shard"], "shard_rows": batch["shard_rows"], "page_id": batch["page_id"],
                "embedding": embeddings}


def _pages_files(config: EncodeCorpusConfig) -> list[str]:
    source = Path(config.pages) if config.pages else Path(config.output.storage_uri()) / "wiki_corpus" / "pages"
    if source.is_file():
        return [str(source)]
    files = sorted(str(p) for p in source.glob("*.parquet")) if source.is_dir() else []
    if not files:
        raise FileNotFoundError(f"no pages parquet at {source} (run build_corpus first, or set pages=...)")
    return files


def encoder_attributes(config: EncodeCorpusConfig) -> dict[str, Any]:
    """What a shard records about how it was made (the model is loaded once here to read its settings)."""
    from contrastext.models import TextEncoder

    enc = config.encoder
    encoder = TextEncoder.from_pretrained(enc.model, pooling=enc.pooling, normalize=enc.normalize,
                                          max_length=enc.max_length, device="cpu",
                                          allow_download=enc.allow_download)
    return {"model": enc.model, "dimension": encoder.embedding_dimension, "normalize": bool(encoder.normalize),
            "pooling": encoder.pooling, "max_length": int(encoder.max_length), "max_words": config.max_words,
            "dtype": config.dtype}


def run_encode_corpus(config: EncodeCorpusConfig) -> dict[str, Any]:
    """Encode every page into ``.h5`` shards, skipping shards a previous run completed; returns the summary."""
    import ray.data

    from contrastext.data.h5store import H5ShardWriter, plan_shards, remove_partial_files, shard_status

    started = time.perf_counter()
    timings: dict[str, float] = {}
    init_ray(config.ray)
    run_dir = _local_run_dir(config.output)
    run_dir.mkdir(parents=True, exist_ok=True)
    files = _pages_files(config)
    specs = plan_shards(files, config.rows_per_shard)
    attributes = encoder_attributes(config)

    # -- what a previous run left: complete shards are kept, partial files removed, the rest redone
    removed = remove_partial_files(run_dir)
    previous = _previous_checksums(run_dir)
    status = {s.shard: shard_status(run_dir, s, attributes, previous.get(s.file_name)) for s in specs}
    mismatched = [s.file_name for s in specs if status[s.shard] == "mismatch"]
    if mismatched and not config.overwrite:
        raise ValueError(f"{run_dir} holds shards written with another model, word limit or plan "
                         f"({', '.join(mismatched[:3])}…): use another output.name or set overwrite=true")
    pending = [s for s in specs if status[s.shard] != "complete"]
    for s in pending:
        (run_dir / s.file_name).unlink(missing_ok=True)
    kept = len(specs) - len(pending)
    log.info("%d shards planned: %d complete from an earlier run, %d to encode (%d partial files removed)",
             len(specs), kept, len(pending), len(removed))

    t = time.perf_counter()
    entries: dict[int, dict[str, Any]] = {}
    rows_encoded = 0
    completed_at: list[tuple[float, int]] = []  # (seconds since start, rows) per finished shard
    if pending:
        scaling = config.scaling
        threads = config.torch_threads or max(1, int(scaling.cpus_per_worker))
        ds = ray.data.from_items([{"spec": json.dumps(s.as_dict())} for s in pending],
                                 override_num_blocks=len(pending))
        ds = ds.map_batches(_load_shards, batch_size=1, num_cpus=0.5, fn_kwargs={
            "max_words": config.max_words, "directory": str(run_dir), "attributes": attributes})
        ds = ds.map_batches(
            EncodePages, batch_size=config.rows_per_task,
            compute=ray.data.ActorPoolStrategy(size=scaling.num_workers),
            num_cpus=scaling.cpus_per_worker, num_gpus=1 if scaling.use_gpu else 0,
            fn_constructor_kwargs={"encoder": config.encoder.model_dump(), "batch_size": config.batch_size,
                                   "torch_threads": threads})
        ds = ds.map_batches(
            H5ShardWriter, batch_size=None, compute=ray.data.ActorPoolStrategy(size=1), num_cpus=0.25,
            fn_constructor_kwargs={"directory": str(run_dir), "attributes": attributes, "dtype": config.dtype,
                                   "specs": {s.shard: s.as_dict() for s in pending}})
        for row in ds.iter_rows():
            entry = json.loads(row["entry"])
            entries[entry["shard"]] = entry
            rows_encoded += entry["rows"]
            completed_at.append((time.perf_counter() - t, entry["rows"]))
            _progress("shard", len(entries), len(pending), t, rows_encoded, "pages")
    timings["encode"] = time.perf_counter() - t

    # -- every shard must now be complete; the manifest lists them all
    import h5py

    from contrastext.data.h5store import SHARD_PATTERN, read_shard_attributes

    shards = []
    for s in specs:
        path = run_dir / s.file_name
        if s.shard in entries:
            shards.append(entries[s.shard])
            continue
        if not path.is_file():
            raise RuntimeError(f"shard {s.file_name} was not written; run the job again to finish it")
        attrs = read_shard_attributes(path)
        with h5py.File(path, "r") as h5:
            ids = h5["ids"]
            id_min, id_max = (int(ids[0]), int(ids[-1])) if len(ids) else (None, None)
        shards.append({"shard": s.shard, "file": SHARD_PATTERN.format(s.shard), "rows": int(attrs["rows"]),
                       "checksum": previous.get(s.file_name) or file_checksum(path), "id_min": id_min,
                       "id_max": id_max, **s.as_dict()})
    timings["total"] = time.perf_counter() - started
    total_rows = sum(s["rows"] for s in shards)
    summary = {
        "pages_files": len(files), "rows": total_rows, "shards": len(specs), "shards_kept": kept,
        "shards_written": len(pending), "partial_files_removed": len(removed), "rows_encoded": rows_encoded,
        "pages_per_s": rows_encoded / timings["encode"] if rows_encoded else None,
        **_startup_and_steady_rate(completed_at),
        "dimension": attributes["dimension"], "dtype": config.dtype, "model": config.encoder.model,
        "output": str(run_dir), "timings_s": timings,
    }
    write_manifest(run_dir, job="encode_corpus", config=config, timings=timings,
                   inputs={f: file_checksum(f) for f in files},
                   counts={k: summary[k] for k in ("rows", "shards", "shards_kept", "shards_written",
                                                   "rows_encoded")},
                   extra={"attributes": attributes, "shards": shards})
    write_json_atomic(run_dir / "summary.json", summary)
    print(encode_summary_table(summary))
    return summary


def _startup_and_steady_rate(completed_at: list[tuple[float, int]]) -> dict[str, float | None]:
    """Time to the first finished shard (actor start, model load, first batches) and the rate after it."""
    if not completed_at:
        return {"first_shard_s": None, "steady_pages_per_s": None}
    first = completed_at[0][0]
    later_rows = sum(rows for _, rows in completed_at[1:])
    span = completed_at[-1][0] - first
    return {"first_shard_s": first, "steady_pages_per_s": later_rows / span if later_rows and span > 0 else None}


def _previous_checksums(run_dir: Path) -> dict[str, str]:
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        return {}
    try:
        return {s["file"]: s["checksum"] for s in json.loads(manifest.read_text()).get("shards", [])}
    except (ValueError, KeyError, TypeError):
        return {}


def encode_summary_table(summary: dict[str, Any]) -> str:
    return format_table([
        ["pages encoded (rows in shards)", summary["rows"]],
        ["shards: total / kept from earlier run / written", f"{summary['shards']} / {summary['shards_kept']} / "
                                                            f"{summary['shards_written']}"],
        ["partial files removed", summary["partial_files_removed"]],
        ["pages/s (this run)", summary["pages_per_s"] or 0.0],
        ["pages/s after the first shard (steady)", summary["steady_pages_per_s"] or "-"],
        ["seconds to the first shard (start-up)", summary["first_shard_s"] if summary["first_shard_s"] is not None
                                                  else "-"],
        ["embedding", f"{summary['dimension']} × {summary['dtype']} ({summary['model']})"],
        ["time (s): encode / total", f"{summary['timings_s']['encode']:.1f} / {summary['timings_s']['total']:.1f}"],
        ["output", summary["output"]],
    ], headers=["encode_corpus", "value"])


__all__ = ["BuildCorpusConfig", "EncodeCorpusConfig", "run_build_corpus", "run_encode_corpus"]
