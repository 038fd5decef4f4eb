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
Every input and output may be a URI (``s3://…``): the tasks read and write it themselves, wherever they run;
small inputs on the driver's disk are shipped to them (:mod:`contrastext.data.inputs`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import numpy as np
from pydantic import Field

from contrastext import storage
from contrastext.config import EncoderConfig, OutputConfig, RayConfig, ScalingSettings, Settings
from contrastext.data.pairs import (PairCounts, PairOptions, count_categories, deduplicate_bucket,
                                    iter_page_categories, merge_category_counts, rare_categories,
                                    write_category_counts, write_page_pairs)
from contrastext.data.inputs import materialize, ship_local_files
from contrastext.data.pages import pages_table
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.report import format_table
from contrastext.runtime import init_ray
from contrastext.stages import Stage, Timings


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


def _prepare_run_dir(output: OutputConfig) -> str:
    run_dir = output.run_dir()
    storage.check_writable(run_dir)
    return run_dir


# ------------------------------------------------------------------------------------ build_corpus
def read_unit(unit: dict[str, Any], run_dir: str, links: bool, categories: tuple[str, dict] | None,
              shipped: dict[str, Any] | None = None) -> dict:
    """One work unit: read pages, write ``pages/part-<i>``, its category counts and its read stats."""
    from contrastext.data.wikipedia import (DumpChunk, Page, ReadStats, iter_dump_chunk, iter_table_file)

    part = f"part-{unit['index']:05d}"
    started = time.perf_counter()
    source = materialize(unit["path"], shipped)
    if unit["kind"] == "dump":
        items = iter_dump_chunk(DumpChunk(source, unit["start"], unit["end"], unit["index"]), links=links)
    else:
        items = iter_table_file(source, categories)
    stats, rows = ReadStats(), []
    for item in items:
        stats.add(item)
        if isinstance(item, Page):
            rows.append(item.as_row())
    pages_file = storage.join(run_dir, "pages", f"{part}.parquet")
    storage.delete(pages_file)  # a unit read again replaces what an earlier run wrote
    if rows:
        storage.write_parquet(pages_table(rows, links), pages_file, row_group_size=2048)
    write_category_counts(count_categories((r["page_id"], r["categories"]) for r in rows),
                          storage.join(run_dir, "category_counts", f"{part}.parquet"))
    result = {"index": unit["index"], "unit": unit, "links": links, **stats.to_dict(),
              "pages_with_2_categories": sum(len(set(r["categories"] or ())) >= 2 for r in rows),
              "seconds": time.perf_counter() - started}
    # written last: marks the unit done
    write_json_atomic(storage.join(run_dir, "read_stats", f"{part}.json"), result)
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
        counts = deduplicate_bucket(storage.join(work, f"bucket-{int(b):04d}"),
                                    storage.join(out, f"part-{int(b):05d}.parquet"))
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
    if not storage.is_file(dump):
        raise FileNotFoundError(f"Wikipedia dump {dump} not found")
    chunks = plan_dump_chunks(dump, config.index, config.streams_per_chunk)
    units = [{"kind": "dump", "path": c.path, "start": c.start, "end": c.end, "index": c.index} for c in chunks]
    inputs = {dump: "dump"}
    if config.index:
        inputs[config.index] = "index"
    return units, inputs


def _unit_done(run_dir: str, unit: dict[str, Any], links: bool) -> bool:
    """A unit is done when its stats file exists and was written for the same input range and options."""
    stats = storage.join(run_dir, "read_stats", f"part-{unit['index']:05d}.json")
    try:
        done = storage.read_json(stats)
    except (FileNotFoundError, ValueError):
        return False
    return (done.get("unit") == unit and done.get("links") == links
            and "pages_with_2_categories" in done)  # stats of older runs lack it: read again


def run_build_corpus(config: BuildCorpusConfig, *, table: bool = True) -> dict[str, Any]:
    """Read pages (Ray Data tasks per chunk), then build category pairs; returns the summary (and prints
    it as a table unless ``table`` is False: a job that runs this as one of its stages says it in a line)."""
    import ray.data

    from contrastext.data.wikipedia import ReadStats, read_categories_table

    timings = Timings()
    init_ray(config.ray)
    run_dir = _prepare_run_dir(config.output)
    units, inputs = plan_units(config)
    categories = read_categories_table(config.categories_table) if config.categories_table else None

    # -- pages: one task per chunk, finished chunks (read_stats present) skipped
    pending = [u for u in units if not _unit_done(run_dir, u, config.links)]
    reading = Stage("build_corpus", "pages")
    reading.say(f"reading {len(pending)} work units ({len(units) - len(pending)} already done)")
    if pending:
        shipped = ship_local_files(sorted({u["path"] for u in pending}))
        ds = ray.data.from_items([{"unit": json.dumps(u)} for u in pending], override_num_blocks=len(pending))
        ds = ds.map_batches(_read_units, batch_size=1, num_cpus=config.read_cpus,
                            fn_kwargs={"run_dir": run_dir, "links": config.links, "categories": categories,
                                       "shipped": shipped})
        pages_so_far = 0
        for done, row in enumerate(ds.iter_rows(), 1):
            pages_so_far += json.loads(row["result"])["pages"]
            reading.progress("read unit", done, len(pending), pages_so_far, "pages")
    stats, pages_with_2 = ReadStats(), 0
    for u in units:
        unit_stats = storage.read_json(storage.join(run_dir, "read_stats", f"part-{u['index']:05d}.json"))
        stats.merge(ReadStats.from_dict(unit_stats))
        pages_with_2 += unit_stats["pages_with_2_categories"]
    timings["read"] = reading.seconds

    # -- category frequencies (also what min_category_frequency needs)
    pairing = Stage("build_corpus", "pairs")
    parts = [f"part-{u['index']:05d}.parquet" for u in units]  # only this input's units, never stale files
    counts = merge_category_counts(storage.join(run_dir, "category_counts", p) for p in parts)
    storage.write_parquet(counts.sort_by([("pages", "descending"), ("category", "ascending")]),
                          storage.join(run_dir, "category_counts.parquet"))
    rare = sorted(rare_categories(counts, config.pairs.min_category_frequency))
    for folder in ("pages", "category_counts", "read_stats"):  # left by an earlier run on other input
        for stale in storage.list_files(storage.join(run_dir, folder)):
            if storage.name(stale).split(".")[0] + ".parquet" not in parts:
                storage.delete(stale)
    present = set(storage.list_files(storage.join(run_dir, "pages"), ".parquet"))
    pages_files = [f for f in (storage.join(run_dir, "pages", p) for p in parts) if f in present]

    # -- pairs: one task per pages file, then one per dedup bucket
    options = config.pairs
    pairs_dir, work = storage.join(run_dir, "pairs"), storage.join(run_dir, "pairs_buckets")
    for stale in (pairs_dir, work):
        storage.delete(stale)
    pair_counts = PairCounts()
    if pages_files:
        ds = ray.data.from_items([{"unit": json.dumps({"path": f, "index": i})}
                                  for i, f in enumerate(pages_files)], override_num_blocks=len(pages_files))
        ds = ds.map_batches(_pairs_unit, batch_size=1, num_cpus=config.read_cpus, fn_kwargs={
            "work": work if options.deduplicate else pairs_dir, "options": options.model_dump(), "rare": rare})
        for done, row in enumerate(ds.iter_rows(), 1):
            pair_counts.merge(PairCounts(**json.loads(row["result"])))
            pairing.progress("pages file", done, len(pages_files), pair_counts.pairs, "pairs")
    pairs_written = pair_counts.pairs
    if options.deduplicate and pages_files:
        ds = ray.data.from_items([{"bucket": b} for b in range(options.buckets)],
                                 override_num_blocks=options.buckets)
        ds = ds.map_batches(_dedup_unit, batch_size=1, num_cpus=config.read_cpus,
                            fn_kwargs={"work": work, "out": pairs_dir})
        pairs_written = sum(json.loads(r["result"])["rows_out"] for r in ds.iter_rows())
        storage.delete(work)
    timings["pairs"] = pairing.seconds
    timings.total()

    summary = {
        "input": inputs, "work_units": len(units), "pages": stats.pages, "skipped": dict(stats.skipped),
        "skipped_examples": stats.examples, "pages_with_2_categories": pages_with_2,
        "distinct_categories": counts.num_rows, "rare_categories_dropped": len(rare),
        "pair_pages_with_pairs": pair_counts.pages_with_pairs, "pair_pages_capped": pair_counts.pages_capped,
        "categories_dropped_by_pattern": pair_counts.categories_dropped_by_pattern,
        "categories_dropped_by_frequency": pair_counts.categories_dropped_by_frequency,
        "pairs_generated": pair_counts.pairs, "pairs_written": pairs_written,
        "pages_per_s": stats.pages / timings["read"] if timings["read"] > 0 else None,
        "pages_dir": storage.join(run_dir, "pages"), "pairs_dir": pairs_dir, "timings_s": timings,
    }
    write_json_atomic(storage.join(run_dir, "summary.json"), summary)
    signatures = {p: storage.file_signature(p) for p in inputs if storage.is_file(p)}
    write_manifest(run_dir, job="build_corpus", config=config, timings=timings, inputs=signatures,
                   counts={k: summary[k] for k in ("pages", "skipped", "pages_with_2_categories",
                                                   "distinct_categories", "pairs_generated", "pairs_written")},
                   extra={"outputs": {"pages": sorted(storage.name(p) for p in pages_files),
                                      "pairs": [storage.name(p) for p in storage.list_files(pairs_dir, ".parquet")]}})
    if table:
        print(build_summary_table(summary))
    return summary


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
        ["output", storage.parent(summary["pages_dir"])],
    ]
    return format_table(rows, headers=["build_corpus", "value"])


# ----------------------------------------------------------------------------------- encode_corpus
class EncodeShards:
    """Ray Data actor: holds one ``TextEncoder`` (on a GPU when the actor has one); each call encodes whole
    shards and writes each one itself, so no single process gathers the corpus, and a shard lost with its
    node is simply encoded again by another actor (writes are whole-file and idempotent)."""

    def __init__(self, encoder: EncoderConfig, batch_size: int, torch_threads: int | None, directory: str,
                 attributes: dict[str, Any], max_words: int):
        import torch

        if torch_threads:
            torch.set_num_threads(torch_threads)
        self.batch_size, self.directory, self.attributes, self.max_words = batch_size, directory, attributes, max_words
        self.encoder = encoder.load()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        return {"entry": [json.dumps(self.encode_shard(json.loads(spec))) for spec in batch["spec"]]}

    def encode_shard(self, spec: dict[str, Any]) -> dict[str, Any]:
        from contrastext.data.h5store import first_words, read_rows, write_shard

        table = read_rows(spec["source"], spec["row_start"], spec["row_end"], ["page_id", "text"])
        valid = [(i, t) for i, t in zip(table.column("page_id").to_pylist(), table.column("text").to_pylist())
                 if i is not None and t is not None]
        ids = np.asarray([i for i, _ in valid], np.int64)
        texts = [first_words(t, self.max_words) for _, t in valid]
        embeddings = (self.encoder.encode(texts, batch_size=self.batch_size) if texts
                      else np.zeros((0, self.attributes["dimension"]), np.float32))
        attrs = {**self.attributes, **{k: v for k, v in spec.items() if k != "shard"}, "expected_rows": len(ids)}
        entry = write_shard(self.directory, spec["shard"], ids, embeddings, attrs, self.attributes["dtype"])
        return {**entry, **spec}


def _pages_files(config: EncodeCorpusConfig) -> list[str]:
    source = config.pages or storage.join(config.output.storage_uri(), "wiki_corpus", "pages")
    if storage.is_file(source):
        return [source]
    files = storage.list_files(source, ".parquet") if storage.is_dir(source) else []
    if not files:
        raise FileNotFoundError(f"no pages parquet at {source} (run build_corpus first, or set pages=...)")
    return files


def encoder_attributes(config: EncodeCorpusConfig) -> dict[str, Any]:
    """What a shard records about how it was made (the model is loaded once here to read its settings)."""
    encoder = config.encoder.load(device="cpu")
    return {"model": config.encoder.model, "dimension": encoder.embedding_dimension, "normalize": bool(encoder.normalize),
            "pooling": encoder.pooling, "max_length": int(encoder.max_length), "max_words": config.max_words,
            "dtype": config.dtype}


def _inspect_shards(run_dir: str, specs, attributes: dict[str, Any],
                    previous: dict[str, str]) -> tuple[dict[int, str], dict[int, dict[str, Any]]]:
    """Status of every planned shard (see ``h5store.shard_status``) and the attributes of those present."""
    from contrastext.data.h5store import classify_shard, read_shard_attributes

    present = {storage.name(f) for f in storage.list_files(run_dir, ".h5")}
    status, found = {}, {}
    for s in specs:
        if s.file_name not in present:
            status[s.shard] = "missing"
            continue
        try:
            found[s.shard] = read_shard_attributes(storage.join(run_dir, s.file_name))
        except Exception:  # noqa: BLE001 -- any unreadable file is redone
            status[s.shard] = "damaged"
            continue
        status[s.shard] = classify_shard(found[s.shard], s, attributes, previous.get(s.file_name))
    return status, found


def run_encode_corpus(config: EncodeCorpusConfig, *, table: bool = True) -> dict[str, Any]:
    """Encode every page into ``.h5`` shards, skipping shards a previous run completed; returns the summary."""
    import ray.data

    from contrastext.data.h5store import SHARD_PATTERN, plan_shards, remove_partial_files

    timings = Timings()
    init_ray(config.ray)
    run_dir = _prepare_run_dir(config.output)
    files = _pages_files(config)
    specs = plan_shards(files, config.rows_per_shard)
    attributes = encoder_attributes(config)

    # -- what a previous run left: complete shards are kept, partial files removed, the rest redone
    removed = remove_partial_files(run_dir)
    previous = _previous_checksums(run_dir)
    status, found = _inspect_shards(run_dir, specs, attributes, previous)
    mismatched = [s.file_name for s in specs if status[s.shard] == "mismatch"]
    if mismatched and not config.overwrite:
        raise ValueError(f"{run_dir} holds shards written with another model, read length, word limit or plan "
                         f"({', '.join(mismatched[:3])}…): use another output.name or set overwrite=true")
    pending = [s for s in specs if status[s.shard] != "complete"]
    for s in pending:
        storage.delete(storage.join(run_dir, s.file_name))
    storage.delete(storage.join(run_dir, "manifest.json"))  # the folder is finished again only when it is
    kept = len(specs) - len(pending)
    encoding = Stage("encode_corpus", "shards")
    encoding.say(f"{len(specs)} planned: {kept} complete from an earlier run, {len(pending)} to encode "
                 f"({len(removed)} partial files removed)")
    entries: dict[int, dict[str, Any]] = {}
    rows_encoded = 0
    completed_at: list[tuple[float, int]] = []  # (seconds since start, rows) per finished shard
    if pending:
        scaling = config.scaling
        threads = config.torch_threads or max(1, int(scaling.cpus_per_worker))
        ds = ray.data.from_items([{"spec": json.dumps(s.as_dict())} for s in pending],
                                 override_num_blocks=len(pending))
        ds = ds.map_batches(
            EncodeShards, batch_size=1, compute=ray.data.ActorPoolStrategy(size=scaling.num_workers),
            num_cpus=scaling.cpus_per_worker, num_gpus=1 if scaling.use_gpu else 0,
            fn_constructor_kwargs={"encoder": config.encoder, "batch_size": config.batch_size,
                                   "torch_threads": threads, "directory": run_dir, "attributes": attributes,
                                   "max_words": config.max_words})
        for row in ds.iter_rows():
            entry = json.loads(row["entry"])
            if entry["shard"] in entries:  # a retried task wrote the same shard again: count it once
                continue
            entries[entry["shard"]] = entry
            rows_encoded += entry["rows"]
            completed_at.append((encoding.seconds, entry["rows"]))
            encoding.progress("shard", len(entries), len(pending), rows_encoded, "pages")
    timings["encode"] = encoding.seconds
    # a writer on a node lost during this run leaves its half-moved file; its shard was written again
    removed += remove_partial_files(run_dir)

    # -- every shard must now be complete; the manifest lists them all
    shards = []
    for s in specs:
        if s.shard in entries:
            shards.append(entries[s.shard])
            continue
        if s.shard not in found:
            raise RuntimeError(f"shard {s.file_name} was not written; run the job again to finish it")
        attrs = found[s.shard]
        id_min, id_max = attrs["_ids_range"]
        shards.append({"shard": s.shard, "file": SHARD_PATTERN.format(s.shard), "rows": int(attrs["rows"]),
                       "checksum": attrs["_checksum"], "id_min": id_min, "id_max": id_max, **s.as_dict()})
    timings.total()
    total_rows = sum(s["rows"] for s in shards)
    summary = {
        "pages_files": len(files), "rows": total_rows, "shards": len(specs), "shards_kept": kept,
        "shards_written": len(pending), "partial_files_removed": len(removed), "rows_encoded": rows_encoded,
        "pages_per_s": rows_encoded / timings["encode"] if rows_encoded else None,
        **_startup_and_steady_rate(completed_at),
        "dimension": attributes["dimension"], "dtype": config.dtype, "model": config.encoder.model,
        "output": run_dir, "timings_s": timings,
    }
    write_json_atomic(storage.join(run_dir, "summary.json"), summary)
    # the manifest is written last: H5Corpus reads a folder only once it is there
    write_manifest(run_dir, job="encode_corpus", config=config, timings=timings,
                   inputs={f: storage.file_signature(f) for f in files},
                   counts={k: summary[k] for k in ("rows", "shards", "shards_kept", "shards_written",
                                                   "rows_encoded")},
                   extra={"attributes": attributes, "shards": shards})
    if table:
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


def _previous_checksums(run_dir: str) -> dict[str, str]:
    try:
        return {s["file"]: s["checksum"] for s in storage.read_json(storage.join(run_dir, "manifest.json"))
                .get("shards", [])}
    except (FileNotFoundError, ValueError, KeyError, TypeError):
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
