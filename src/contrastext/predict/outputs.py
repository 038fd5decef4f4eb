"""The predict job's output folder: a parquet file per chunk, a plan per unit, and what a run was made with.

``predictions/part-<unit>-<chunk>.parquet`` files hold the rows (the folder reads as one parquet dataset);
each records in its footer how many input rows its chunk read and why any were left out, so counts survive a
resumed run. ``_units/unit-<unit>.json`` says how many
chunks a unit has (written by its read task). ``_settings.json`` is written before any chunk: a later run
with other settings is refused rather than mixed in. A unit is finished when its plan is there and every
chunk it names has its file; a run, when every unit is.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from contrastext import storage
from contrastext.errors import InputError
from contrastext.manifest import write_json_atomic
from contrastext.stages import as_json, setting_differences

SETTINGS_FILE = "_settings.json"
DATA = "predictions"
PLANS = "_units"
_PART = re.compile(r"part-(\d+)-(\d+)\.parquet$")
COUNTS_KEY = b"contrastext.predict"


def part_name(unit: int, chunk: int) -> str:
    return f"{DATA}/part-{unit:06d}-{chunk:05d}.parquet"


def plan_name(unit: int) -> str:
    return f"{PLANS}/unit-{unit:06d}.json"


def check_settings(run_dir: str, settings: dict[str, Any], overwrite: bool) -> None:
    """Record ``settings`` for a new output; refuse a folder made with other settings, or holding files no
    predict run wrote, unless ``overwrite`` (then it is emptied)."""
    location = storage.join(run_dir, SETTINGS_FILE)
    try:
        old = storage.read_json(location)
    except FileNotFoundError:
        old = None
    present = storage.list_files(run_dir, recursive=True) if storage.exists(run_dir) else []
    if old is None and present and not overwrite:
        raise InputError(f"{run_dir} holds {len(present)} files that no predict run wrote: choose another "
                         "output.name, or set overwrite=true to empty it")
    if old is not None:
        changed = setting_differences(old, as_json(settings))
        if not changed:
            return
        if not overwrite:
            raise InputError(f"{run_dir} holds predictions made with other settings ({', '.join(sorted(changed))}); "
                             "they are not mixed: choose another output.name, or set overwrite=true to replace them")
    for file in present:
        storage.delete(file)
    write_json_atomic(location, as_json(settings))


def finished_chunks(run_dir: str) -> dict[int, set[int]]:
    """Unit → the chunks whose files are in place (one listing of the folder)."""
    done: dict[int, set[int]] = {}
    for file in storage.list_files(storage.join(run_dir, DATA), ".parquet"):
        match = _PART.search(file)
        if match:
            done.setdefault(int(match[1]), set()).add(int(match[2]))
    return done


def unit_plans(run_dir: str) -> dict[int, dict[str, Any]]:
    plans = {}
    for file in storage.list_files(storage.join(run_dir, PLANS), ".json"):
        plan = storage.read_json(file)
        plans[int(plan["unit"])] = plan
    return plans


def unfinished(units, plans: dict[int, dict[str, Any]], done: dict[int, set[int]]) -> list[int]:
    """The units whose plan is missing or names a chunk without its file."""
    return [u.unit for u in units
            if u.unit not in plans or not set(range(plans[u.unit]["chunks"])) <= done.get(u.unit, set())]


def remove_temporary(run_dir: str) -> int:
    """Files a killed writer left under temporary names; returns how many were removed."""
    leftovers = [file for folder in (run_dir, storage.join(run_dir, DATA), storage.join(run_dir, PLANS))
                 for file in storage.list_temporary(folder)]
    for file in leftovers:
        storage.delete(file)
    return len(leftovers)


def add_chunk_counts(total: dict[str, Any], files: list[str], threads: int = 16) -> None:
    """Add the counts in each file's footer to ``total`` (footers only, several read at a time)."""
    def one(file: str) -> dict[str, Any]:
        metadata = storage.parquet_file(file).schema_arrow.metadata or {}
        return json.loads(metadata[COUNTS_KEY])

    with ThreadPoolExecutor(max_workers=threads) as pool:
        for entry in pool.map(one, files):
            add_counts(total, entry)


def add_counts(total: dict[str, Any], entry: dict[str, Any]) -> None:
    total["rows_in"] += entry["rows_in"]
    total["rows_out"] += entry["rows_out"]
    total["skipped"].update(entry["skipped"])
    total["counts"].update(entry["counts"])
    if "backend" in entry:  # rows per backend the actors ran (a requested int8 may have fallen back to fp32)
        total["backends"][entry["backend"]] += entry["rows_out"]


def empty_counts() -> dict[str, Any]:
    return {"rows_in": 0, "rows_out": 0, "skipped": Counter(), "counts": Counter(), "backends": Counter()}
