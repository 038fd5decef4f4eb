"""The ``predict`` job: a trained model applied to every text of a corpus, streaming on Ray Data.

Read tasks read the input's units (files, or row ranges of large parquet files) in chunks of texts; an actor
pool, each actor holding the model once, turns each chunk into its output rows and writes them as one parquet
file; the driver sees only each chunk's counts. A chunk's file is written whole under its own name, so a
retried task or a resumed run writes it once; a run started again continues with the chunks that are missing,
and one started with other settings is refused (``contrastext.predict.outputs``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.errors import InputError
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.predict import outputs
from contrastext.predict.config import PredictConfig
from contrastext.predict.inputs import InputUnit, UnreadableInput, check_columns, plan_units, read_chunks
from contrastext.predict.predictors import ModelKind, Predictor, model_kind
from contrastext.report import format_table
from contrastext.runtime import init_ray
from contrastext.stages import Stage, Timings

JOB = "predict"
_PROGRESS_EVERY_S = 5.0
_BLOCK_BYTES = 64 * 1024


def _read_unit(row: dict[str, Any], source: dict[str, Any], chunk_rows: int):
    """Ray Data read task: one unit's chunk rows, then its plan row."""
    from contrastext.predict.config import PredictInput

    unit = InputUnit(**json.loads(row["unit"]))
    yield from read_chunks(unit, PredictInput.model_validate(source), chunk_rows,
                           frozenset(json.loads(row["skip"])))


class PredictChunks:
    """Ray Data actor: loads the model once; each chunk row becomes one output file (written here), each plan
    row the unit's plan file; returns only the counts."""

    def __init__(self, kind: dict[str, str], run_dir: str, settings: dict[str, Any], threads: int):
        import torch

        torch.set_num_threads(threads)
        self.kind = ModelKind(**kind)
        self.run_dir = run_dir
        folder = self.kind.model
        if not storage.on_local_disk(folder):  # a model on a bucket: one copy per actor, in node-local scratch
            local = str(storage.scratch_dir("contrastext-predict-model-"))
            storage.copy_tree(folder, local)
            folder = local
        elif folder.startswith("file://"):
            folder = storage.resolve(folder)[1]
        self.predictor = Predictor(self.kind, folder, **settings)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, list]:
        entries = []
        for i in range(len(batch["unit"])):
            unit, chunk = int(batch["unit"][i]), int(batch["chunk"][i])
            if chunk < 0:
                plan = json.loads(batch["plan"][i])
                write_json_atomic(storage.join(self.run_dir, outputs.plan_name(unit)), plan)
                entries.append(json.dumps({"unit": unit, "plan": plan}))
                continue
            entries.append(json.dumps(self._chunk(unit, chunk, list(batch["ids"][i]), list(batch["texts"][i]),
                                                  int(batch["rows_in"][i]), json.loads(batch["skipped"][i]))))
        return {"entry": entries}

    def _chunk(self, unit: int, chunk: int, ids: list[str], texts: list[str], rows_in: int,
               skipped: dict[str, int]) -> dict[str, Any]:
        table = self.predictor.table([str(i) for i in ids], [str(t) for t in texts])
        counted = self.kind.counted
        counts = Counter() if counted is None else Counter(
            "none" if value is None else str(value) for value in table.column(counted).to_pylist())
        entry = {"unit": unit, "chunk": chunk, "rows_in": rows_in, "rows_out": table.num_rows,
                 "skipped": skipped, "counts": dict(counts), "backend": self.predictor.backend,
                 "finished_at": time.time()}
        table = table.replace_schema_metadata({outputs.COUNTS_KEY: json.dumps(entry).encode()})
        storage.write_parquet(table, storage.join(self.run_dir, outputs.part_name(unit, chunk)))
        return entry


def _settings(config: PredictConfig, kind: ModelKind, units: list[InputUnit]) -> dict[str, Any]:
    """What the output depends on (not how many actors made it): a run with other settings is refused."""
    plan = hashlib.sha256(json.dumps([[u.file, u.row_start, u.row_end] for u in units]).encode()).hexdigest()
    return {"model": config.model, "model_files": _model_signature(config.model), "task": kind.task,
            "input": config.input.model_dump(mode="json", exclude={"on_unreadable"}), "input_plan": plan[:16],
            "top_k": config.top_k,
            "include_embedding": config.include_embedding, "max_length": config.max_length,
            "chunk_rows": config.chunk_rows, "rows_per_unit": config.rows_per_unit, "backend": config.backend}


def _model_signature(model: str) -> str | None:
    """The model folder's files by name and size: a model saved again in place is another model."""
    if not (storage.is_uri(model) or storage.exists(model)):
        return None  # a model spec (bundled:minilm), pinned by the package that ships it
    files = storage.list_files(model, recursive=True)
    sizes = [f"{f[len(str(model)):]}:{storage.file_size(f)}" for f in files]
    return hashlib.sha256("\n".join(sizes).encode()).hexdigest()[:16]


def _absolute_paths(config: PredictConfig) -> PredictConfig:
    """Local model and input paths made absolute here: a worker on another node, or in another working folder,
    reads the same place."""
    from pathlib import Path

    def absolute(location: str) -> str:
        return location if storage.is_uri(location) else str(Path(location).expanduser().absolute())

    model = config.model  # a local folder, else a URI or a model spec (bundled:minilm) as it is
    model = absolute(model) if not storage.is_uri(model) and Path(model).expanduser().exists() else model
    return config.model_copy(update={"model": model,
                                     "input": config.input.model_copy(update={"path": absolute(config.input.path)})})


def run_predict(config: PredictConfig) -> dict[str, Any]:
    """Predict every text of ``config.input`` (skipping chunks an earlier run finished); returns the summary."""
    timings = Timings()
    config = _absolute_paths(config)
    run_dir = config.output.run_dir()
    model = Stage(JOB, "model")
    kind = model_kind(config.model, config.task)
    model.say(f"{kind.method} at {config.model}: {kind.task}")
    planning = Stage(JOB, "plan")
    units, left_out = plan_units(config.input, config.rows_per_unit)
    check_columns(units[0], config.input)
    files = len({u.file for u in units})
    planning.say(f"{files} files, {len(units)} units" + (f"; left out: {dict(left_out)}" if left_out else ""))
    settings = _settings(config, kind, units)
    outputs.check_settings(run_dir, settings, config.overwrite)
    finished = Stage(JOB, "predict", folder=run_dir, settings=settings)
    record = finished.finished()
    if record is not None:
        print(summary_table(record["result"]), flush=True)
        return record["result"]

    init_ray(config.ray)
    removed = outputs.remove_temporary(run_dir)
    done = outputs.finished_chunks(run_dir)
    unfinished = set(outputs.unfinished(units, outputs.unit_plans(run_dir), done))
    pending = [u for u in units if u.unit in unfinished]
    complete = {u.unit for u in units} - unfinished
    earlier = {(u, c) for u, chunks in done.items() for c in chunks}
    finished.say(f"{len(units)} units: {len(complete)} finished in an earlier run, {len(pending)} to predict "
                 f"({len(earlier)} chunks kept, {removed} partial files removed)")
    started_at = time.time()
    totals = outputs.empty_counts()
    rows_now, times = _predict(config, kind, pending, done, run_dir, finished, totals)
    timings["predict"] = finished.seconds
    # a writer on a node lost during this run leaves its half-written file; its chunk was written again
    removed += outputs.remove_temporary(run_dir)

    plans = outputs.unit_plans(run_dir)
    missing = outputs.unfinished(units, plans, outputs.finished_chunks(run_dir))
    if missing:
        raise RuntimeError(f"{len(missing)} units were not finished (first: {missing[:5]}); run the job again to "
                           "finish them")
    outputs.add_chunk_counts(totals, [storage.join(run_dir, outputs.part_name(u, c)) for u, c in sorted(earlier)])
    unreadable = {plans[u]["file"]: plans[u]["unreadable"] for u in sorted(plans) if plans[u].get("unreadable")}
    lost = sum(plans[u].get("rows_lost", 0) for u in plans)
    if lost:  # records read before an unreadable file's error, in the chunk it cut short
        totals["rows_in"] += lost
        totals["skipped"]["in an unreadable file's last chunk"] += lost
    timings.total()
    summary = {
        "model": config.model, "method": kind.method, "task": kind.task, "input": config.input.path,
        "output": run_dir, "files": files, "units": len(units), "units_kept": len(complete),
        "chunks": sum(plans[u.unit]["chunks"] for u in units), "chunks_kept": len(earlier),
        "rows_in": totals["rows_in"], "rows_out": totals["rows_out"],
        "rows_skipped": dict(totals["skipped"].most_common()), "files_left_out": dict(left_out),
        "files_unreadable": unreadable, "counts": dict(totals["counts"].most_common()),
        "backend": config.backend, "backend_rows": dict(totals["backends"]),
        "rows_predicted": rows_now, "rows_per_s": rows_now / timings["predict"] if rows_now else None,
        **_steady_rate(times, started_at), "actors": config.scaling.actors, "partial_files_removed": removed,
        "timings_s": timings,
    }
    write_json_atomic(storage.join(run_dir, "summary.json"), summary)
    write_manifest(run_dir, job=JOB, config=config, timings=timings,
                   counts={k: summary[k] for k in ("files", "units", "chunks", "rows_in", "rows_out")},
                   extra={"method": kind.method, "task": kind.task, "rows_skipped": summary["rows_skipped"],
                          "counts_per_value": summary["counts"]})
    finished.mark_done(summary)
    print(summary_table(summary), flush=True)
    return summary


def _predict(config: PredictConfig, kind: ModelKind, pending: list[InputUnit], done: dict[int, set[int]],
             run_dir: str, stage: Stage, totals: dict[str, Any]) -> tuple[int, list[tuple[float, int]]]:
    """Run the pipeline over ``pending``, adding each chunk's counts to ``totals``; returns the rows predicted
    and (finishing time, rows) of the first and the last chunk and the rows in between."""
    import ray.data

    seen: set[tuple[int, int]] = set()  # a retried task's chunk or plan counts once
    first = last = None
    rows = 0
    if not pending:
        return rows, []
    scaling = config.scaling
    items = [{"unit": json.dumps(u.as_dict()), "skip": json.dumps(sorted(done.get(u.unit, set())))} for u in pending]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    readers = max(2, 2 * (scaling.max_actors or scaling.actors))  # enough to keep every actor fed
    ds = ds.flat_map(_read_unit, num_cpus=scaling.read_cpus, compute=ray.data.TaskPoolStrategy(size=readers),
                     fn_kwargs={"source": config.input.model_dump(mode="json"), "chunk_rows": config.chunk_rows})
    settings = {"top_k": config.top_k, "include_embedding": config.include_embedding,
                "max_length": config.max_length, "batch_size": config.batch_size, "backend": config.backend}
    ds = ds.map_batches(
        PredictChunks, batch_size=1,
        compute=ray.data.ActorPoolStrategy(min_size=scaling.actors, max_size=scaling.max_actors or scaling.actors),
        num_cpus=scaling.cpus_per_actor, num_gpus=scaling.gpus_per_actor or None,
        fn_constructor_kwargs={"kind": kind.__dict__, "run_dir": run_dir, "settings": settings,
                               "threads": scaling.torch_threads or max(1, int(scaling.cpus_per_actor))})
    # small blocks: a chunk is a block of its own, so the pool spreads one file's chunks over its actors and
    # each chunk's counts reach the driver when it is written (one block would hold a whole file's chunks)
    ds.context.target_max_block_size = _BLOCK_BYTES
    units_done, last_line = 0, 0.0
    try:
        for row in ds.iter_rows():
            entry = json.loads(row["entry"])
            key = (entry["unit"], -1 if "plan" in entry else entry["chunk"])
            if key in seen:
                continue
            seen.add(key)
            if "plan" in entry:
                units_done += 1
            else:
                outputs.add_counts(totals, entry)
                rows += entry["rows_out"]
                point = (entry["finished_at"], entry["rows_out"])
                first = point if first is None or point < first else first
                last = point if last is None or point > last else last
            if stage.seconds - last_line >= _PROGRESS_EVERY_S or units_done == len(pending):
                last_line = stage.seconds
                stage.progress("units", units_done, len(pending), rows, "rows")
    except UnreadableInput as error:  # Ray's task error is also an instance of the cause's class
        cause = str(getattr(error, "cause", None) or error).splitlines()[0]  # Ray adds its retry advice below
        raise UnreadableInput(f"{cause} (set input.on_unreadable=skip to count it and go on)") from None
    except InputError as error:  # a missing text column met by a read task
        raise InputError(str(getattr(error, "cause", None) or error).splitlines()[0]) from None
    if first is None:
        return rows, []
    return rows, [first, (last[0], rows - first[1])] if last != first else [first]


def _steady_rate(times: list[tuple[float, int]], started_at: float) -> dict[str, float | None]:
    """Time to the first finished chunk (actors start, model load) and the rate after it, by the clocks of
    the actors that wrote the chunks (the driver sees them in batches); ``times``: the first chunk's (time,
    rows), then the last one's time with every row after the first chunk."""
    if not times:
        return {"first_chunk_s": None, "steady_rows_per_s": None}
    span = times[-1][0] - times[0][0]
    later = times[-1][1] if len(times) > 1 else 0
    return {"first_chunk_s": times[0][0] - started_at,
            "steady_rows_per_s": later / span if later and span > 0 else None}


def summary_table(summary: dict[str, Any], max_values: int = 15) -> str:
    rows: list[list[Any]] = [
        ["model", f"{summary['method']} ({summary['task']})"],
        ["backend", ", ".join(f"{b} ({n:,} rows)" for b, n in summary.get("backend_rows", {}).items())
         or summary.get("backend", "torch")],
        ["files / units / chunks", f"{summary['files']} / {summary['units']} / {summary['chunks']}"],
        ["rows in", f"{summary['rows_in']:,}"], ["rows out", f"{summary['rows_out']:,}"],
    ]
    for reason, count in summary["rows_skipped"].items():
        rows.append([f"skipped: {reason}", f"{count:,}"])
    for reason, count in summary["files_left_out"].items():
        rows.append([f"files left out: {reason}", count])
    for file, reason in list(summary["files_unreadable"].items())[:5]:
        rows.append([f"unreadable: {storage.name(file)}", reason])
    counts = list(summary["counts"].items())
    for value, count in counts[:max_values]:
        rows.append([f"{summary['task']}: {value}", f"{count:,}"])
    if len(counts) > max_values:
        rest = sum(c for _, c in counts[max_values:])
        rows.append([f"{summary['task']}: {len(counts) - max_values} more", f"{rest:,}"])
    rate = summary.get("rows_per_s")
    steady = summary.get("steady_rows_per_s")
    rows.append(["rows/s (run / steady)", f"{rate:,.1f} / {steady:,.1f}" if rate and steady else
                 (f"{rate:,.1f}" if rate else "all kept from an earlier run")])
    rows.append(["time s", f"{summary['timings_s']['total']:.1f}"])
    rows.append(["output", summary["output"]])
    return format_table(rows, headers=["predict", "value"])
