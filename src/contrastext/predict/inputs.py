"""The predict job's input: which files, cut into units, and a unit read into chunks of texts.

A unit is one file, or a row range of a large parquet file (whole row groups). A read task reads one unit
and yields it in chunks of ``chunk_rows`` input records: chunk ``c`` always holds the same records, so an
output file per chunk is written exactly once however often a task is retried or a run resumed. Each
record's id is its id column's value as written, else ``<file>:<row>`` (the file relative to the input).
"""

from __future__ import annotations

import json
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator

from contrastext import storage
from contrastext.errors import InputError
from contrastext.data.sources import (
    TABLE_SUFFIXES,
    TEXT_SUFFIXES,
    file_records,
    file_suffix,
    missing_columns,
    record_text,
)
from contrastext.predict.config import PredictInput

class UnreadableInput(InputError):
    """An input file that cannot be read; the message names it."""


@dataclass(frozen=True)
class InputUnit:
    unit: int
    file: str  # where it is (a path or a URI)
    relative: str  # its name in ids: the path below the input's folder
    whole_text: bool  # a text file found in a folder, glob or prefix: one text
    row_start: int | None = None  # a parquet row range; None: the whole file
    row_end: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _base(pattern: str, single: bool) -> str:
    """The folder ids are relative to: the file's own folder, the folder, or a glob's / prefix's folder."""
    if single:
        return storage.folder_of(pattern)
    if any(c in pattern for c in "*?["):
        return storage.glob_base(pattern)
    return pattern.rstrip("/") if storage.is_dir(pattern) else storage.folder_of(pattern)


def plan_units(source: PredictInput, rows_per_unit: int) -> tuple[list[InputUnit], Counter]:
    """Every unit of the input, in file order, and the files left out (by reason)."""
    try:
        files = storage.expand(source.path)
    except FileNotFoundError as error:
        raise InputError(f"input.path {error}") from None
    single = len(files) == 1 and storage.is_file(source.path)
    base = _base(source.path, single)
    units: list[InputUnit] = []
    left_out: Counter = Counter()
    for file in files:
        kind = file_suffix(file)
        relative = file[len(base):].lstrip("/") if base != "." else file
        if kind not in TABLE_SUFFIXES + TEXT_SUFFIXES:
            if single:
                raise InputError(f"{file}: unknown input format (expected parquet, JSON lines, CSV/TSV or text, "
                                 "optionally .gz)")
            left_out[f"file of unknown type ({kind or 'no suffix'})"] += 1
            continue
        if kind == ".parquet":
            for start, end in _row_ranges(file, rows_per_unit):
                units.append(InputUnit(len(units), file, relative, False, start, end))
        else:
            units.append(InputUnit(len(units), file, relative, kind in TEXT_SUFFIXES and not single))
    if not units:
        raise FileNotFoundError(f"input.path {source.path}: no readable file ({dict(left_out)})")
    return units, left_out


def _row_ranges(file: str, rows_per_unit: int) -> list[tuple[int, int]]:
    """Row ranges of whole row groups, each about ``rows_per_unit`` rows (a file too damaged to read its
    footer is one range, so its read task reports it)."""
    try:
        metadata = storage.parquet_file(file).metadata
    except Exception:  # noqa: BLE001 -- reported by the unit's read, with on_unreadable's rule
        return [(0, -1)]
    ranges, start, offset = [], 0, 0
    for g in range(metadata.num_row_groups):
        offset += metadata.row_group(g).num_rows
        if offset - start >= rows_per_unit:
            ranges.append((start, offset))
            start = offset
    if offset > start or not ranges:
        ranges.append((start, offset))
    return ranges


def unit_records(unit: InputUnit, source: PredictInput, skipped: Counter) -> Iterator[dict[str, Any]]:
    """The unit's records in a fixed order (malformed ones counted in ``skipped``)."""
    if unit.row_start is not None:
        yield from _parquet_rows(unit, source)
        return
    local = storage.local_file(unit.file) if not storage.on_local_disk(unit.file) else nullcontext(
        Path(storage.resolve(unit.file)[1]))
    with local as path:
        if unit.whole_text:
            from contrastext.data.documents import open_text

            with open_text(Path(path)) as f:
                yield {source.text_columns[0]: f.read()}
            return
        yield from file_records(Path(path), source, skipped)


def _parquet_rows(unit: InputUnit, source: PredictInput) -> Iterator[dict[str, Any]]:
    parquet = storage.parquet_file(unit.file)
    names = set(parquet.schema_arrow.names)
    wanted = [c for c in dict.fromkeys([*source.text_columns, source.title_column, source.id_column])
              if c and c in names]
    offset = 0
    for g in range(parquet.metadata.num_row_groups):
        rows = parquet.metadata.row_group(g).num_rows
        if unit.row_start <= offset < unit.row_end:
            for batch in parquet.read_row_group(g, columns=wanted).to_batches():
                yield from batch.to_pylist()
        offset += rows


def check_columns(unit: InputUnit, source: PredictInput) -> None:
    """Fail before any work when the first record of the first file lacks a text column (a remote text file is
    checked by its read task instead: the driver would download it whole)."""
    if unit.row_start is None and not storage.on_local_disk(unit.file):
        return
    skipped: Counter = Counter()
    try:
        first = next(iter(unit_records(unit, source, skipped)), None)
    except Exception as error:  # noqa: BLE001 -- named, with the file
        if source.on_unreadable == "skip":
            return
        raise UnreadableInput(f"input file {unit.file} cannot be read: {error}") from error
    if first is None:
        return
    missing = [] if unit.whole_text else missing_columns(first, source, labels=False)
    if missing:
        raise InputError(f"input file {unit.file}: text column(s) {missing} not found; its records have "
                         f"{sorted(first)} (set input.text_columns)")


def read_chunks(unit: InputUnit, source: PredictInput, chunk_rows: int,
                skip_chunks: frozenset[int] = frozenset()) -> Iterator[dict[str, Any]]:
    """The unit as chunk rows ``{unit, chunk, ids, texts, rows_in, skipped}`` (chunks in ``skip_chunks``
    are read but not yielded), then its plan: ``{unit, chunk: -1, plan}`` with the number of chunks."""
    skipped: Counter = Counter()
    ids: list[str] = []
    texts: list[str] = []
    chunk, rows_in, unreadable = 0, 0, None
    id_column = source.id_column

    def emit():  # rows in: the texts kept and every record or line left out, malformed ones included
        return {"unit": unit.unit, "chunk": chunk, "ids": list(ids), "texts": list(texts),
                "rows_in": len(ids) + sum(skipped.values()), "skipped": json.dumps(dict(skipped)), "plan": ""}

    row_number = unit.row_start or 0
    checked = unit.whole_text
    try:
        for record in unit_records(unit, source, skipped):
            if not checked:
                checked = True
                missing = missing_columns(record, source, labels=False)
                if missing:
                    raise InputError(f"input file {unit.file}: text column(s) {missing} not found; its records "
                                     f"have {sorted(record)} (set input.text_columns)")
            text, reason = record_text(record, source)
            rows_in += 1
            if text is None:
                skipped[reason] += 1
            else:
                identifier = record.get(id_column) if id_column else None
                ids.append(str(identifier) if identifier is not None else f"{unit.relative}:{row_number}")
                texts.append(text)
            row_number += 1
            if rows_in == chunk_rows:
                if chunk not in skip_chunks:
                    yield emit()
                chunk, rows_in = chunk + 1, 0
                ids.clear(), texts.clear(), skipped.clear()
    except InputError:
        raise
    except Exception as error:  # noqa: BLE001 -- the rule of on_unreadable decides
        if source.on_unreadable == "error":
            raise UnreadableInput(f"input file {unit.file} cannot be read: {type(error).__name__}: {error}") from error
        unreadable = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
    lost = 0
    if unreadable is not None:  # the chunk the error cut short is not written: its records count as skipped
        lost = len(ids) + sum(skipped.values())
    elif rows_in or skipped or chunk == 0:
        if chunk not in skip_chunks:
            yield emit()
        chunk += 1
    plan = {"unit": unit.unit, "file": unit.file, "chunks": chunk, "unreadable": unreadable, "rows_lost": lost}
    yield {"unit": unit.unit, "chunk": -1, "ids": [], "texts": [], "rows_in": 0, "skipped": "{}",
           "plan": json.dumps(plan)}
