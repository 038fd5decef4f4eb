"""The predict job's input side: which files a path names, units, chunks, ids and the records left out."""

import gzip
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext import storage
from contrastext.errors import InputError
from contrastext.predict.config import PredictInput
from contrastext.predict.inputs import UnreadableInput, check_columns, plan_units, read_chunks


def _jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")


def _chunks(unit, source, chunk_rows, skip=frozenset()):
    rows = list(read_chunks(unit, source, chunk_rows, skip))
    return [r for r in rows if r["chunk"] >= 0], json.loads(rows[-1]["plan"])


def test_expand_names_files_by_folder_glob_and_prefix(tmp_path):
    for name in ["a/x.jsonl", "a/b/y.jsonl", "a/part-1.txt", "a/_SUCCESS", "a/.hidden", "a/_units/u.json"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    folder = str(tmp_path / "a")
    assert storage.expand(folder) == [f"{folder}/b/y.jsonl", f"{folder}/part-1.txt", f"{folder}/x.jsonl"]
    assert storage.expand(f"{folder}/*.jsonl") == [f"{folder}/x.jsonl"]  # * stays in one folder
    assert storage.expand(f"{folder}/**/*.jsonl") == [f"{folder}/b/y.jsonl", f"{folder}/x.jsonl"]
    assert storage.expand(f"{folder}/part-") == [f"{folder}/part-1.txt"]
    with pytest.raises(FileNotFoundError, match="no file matches"):
        storage.expand(f"{folder}/*.csv")


def test_relative_patterns_are_read_from_the_working_folder(tmp_path, monkeypatch):
    for name in ["a.jsonl", "b.txt", "data1/x.jsonl", "part-3.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    assert storage.expand("*.jsonl") == ["a.jsonl"]
    assert storage.expand("data*/x.jsonl") == ["data1/x.jsonl"]
    assert storage.expand("part-") == ["part-3.txt"]
    units, _ = plan_units(PredictInput(path="data*/*.jsonl"), 100)
    assert [u.relative for u in units] == ["data1/x.jsonl"]


def test_chunk_files_are_found_past_six_digit_units():
    from contrastext.predict.outputs import _PART, part_name

    for unit, chunk in [(3, 7), (1_234_567, 123_456)]:
        match = _PART.search(part_name(unit, chunk))
        assert (int(match[1]), int(match[2])) == (unit, chunk)


def test_units_cover_a_folder_and_large_parquet_files_in_row_ranges(tmp_path):
    _jsonl(tmp_path / "in" / "a.jsonl", [{"text": "one"}])
    pq.write_table(pa.table({"text": [f"t{i}" for i in range(1000)]}), tmp_path / "in" / "b.parquet",
                   row_group_size=100)
    (tmp_path / "in" / "notes.bin").write_bytes(b"\x00")
    units, left_out = plan_units(PredictInput(path=str(tmp_path / "in")), rows_per_unit=300)
    assert [(u.relative, u.row_start, u.row_end) for u in units] == [
        ("a.jsonl", None, None), ("b.parquet", 0, 300), ("b.parquet", 300, 600), ("b.parquet", 600, 900),
        ("b.parquet", 900, 1000)]
    assert [u.unit for u in units] == list(range(5)) and left_out == Counter({"file of unknown type (.bin)": 1})
    # every parquet row is read by exactly one unit, in order
    source = PredictInput(path=str(tmp_path / "in"))
    texts = [t for u in units[1:] for c in _chunks(u, source, 128)[0] for t in c["texts"]]
    assert texts == [f"t{i}" for i in range(1000)]


def test_chunks_hold_fixed_records_with_ids_and_the_reasons_rows_were_left_out(tmp_path):
    rows = [{"doc": f"d{i}", "body": f"text {i}"} for i in range(7)]
    rows[2]["body"] = ""
    rows[4]["body"] = None
    _jsonl(tmp_path / "docs.jsonl.gz", rows[:5] + ["{broken"] + rows[5:])
    source = PredictInput(path=str(tmp_path / "docs.jsonl.gz"), text_columns=["body"], id_column="doc")
    (unit,), _ = plan_units(source, 100)
    chunks, plan = _chunks(unit, source, 3)
    assert [c["ids"] for c in chunks] == [["d0", "d1"], ["d3", "d5"], ["d6"]]
    # chunks are cut every 3 records; the malformed line counts in the chunk where it was met
    assert [c["rows_in"] for c in chunks] == [3, 4, 1]
    assert [json.loads(c["skipped"]) for c in chunks] == [
        {"missing or empty text": 1}, {"missing or empty text": 1, "malformed JSON line": 1}, {}]
    assert plan == {"unit": 0, "file": str(tmp_path / "docs.jsonl.gz"), "chunks": 3, "unreadable": None, "rows_lost": 0}
    # chunks finished earlier are read again but not handed on; the plan still counts them
    again, plan = _chunks(unit, source, 3, frozenset({0, 2}))
    assert [c["chunk"] for c in again] == [1] and plan["chunks"] == 3


def test_rows_without_an_id_are_named_by_file_and_row(tmp_path):
    _jsonl(tmp_path / "in" / "x.jsonl", [{"text": "a"}, {"text": "b"}])
    (tmp_path / "in" / "notes.txt").write_text("a whole document\nof two lines\n")
    source = PredictInput(path=str(tmp_path / "in"))
    units, _ = plan_units(source, 100)
    ids = [(c["ids"], c["texts"]) for u in units for c in _chunks(u, source, 10)[0]]
    assert ids == [(["notes.txt:0"], ["a whole document\nof two lines"]), (["x.jsonl:0", "x.jsonl:1"], ["a", "b"])]
    # a text file given alone holds a text a line
    lines = PredictInput(path=str(tmp_path / "in" / "notes.txt"))
    (unit,), _ = plan_units(lines, 100)
    assert _chunks(unit, lines, 10)[0][0]["texts"] == ["a whole document", "of two lines"]


def test_a_missing_text_column_is_an_error_before_any_work(tmp_path):
    _jsonl(tmp_path / "x.jsonl", [{"body": "a"}])
    source = PredictInput(path=str(tmp_path / "x.jsonl"))
    units, _ = plan_units(source, 100)
    with pytest.raises(InputError, match=r"text column\(s\) \['text'\] not found; its records have \['body'\]"):
        check_columns(units[0], source)


def test_an_unreadable_file_is_an_error_naming_it_or_counted_when_asked(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.parquet").write_bytes(b"not a parquet file at all")
    _jsonl(tmp_path / "in" / "good.jsonl", [{"text": "fine"}])
    source = PredictInput(path=str(tmp_path / "in"))
    units, _ = plan_units(source, 100)
    bad = next(u for u in units if u.relative == "bad.parquet")
    with pytest.raises(UnreadableInput, match=f"input file {tmp_path / 'in' / 'bad.parquet'} cannot be read"):
        list(read_chunks(bad, source, 10))
    skipping = source.model_copy(update={"on_unreadable": "skip"})
    chunks, plan = _chunks(bad, skipping, 10)
    assert chunks == [] and plan["chunks"] == 0 and "ArrowInvalid" in plan["unreadable"]
    check_columns(bad, skipping)  # the rule holds for the first file too


def test_a_file_that_breaks_mid_way_keeps_its_whole_chunks_and_counts_the_cut_one(tmp_path):
    path = tmp_path / "x.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": f"text {i * 7919 % 100003}"}) + "\n" for i in range(2500)))
    path.write_bytes(path.read_bytes()[:-40])  # the stream ends early: the gzip reader fails near the end
    source = PredictInput(path=str(path), on_unreadable="skip")
    (unit,), _ = plan_units(source, 100)
    chunks, plan = _chunks(unit, source, 1000)
    assert [len(c["ids"]) for c in chunks] == [1000, 1000] and plan["chunks"] == 2
    assert plan["unreadable"] and 0 < plan["rows_lost"] < 500  # read before the error, in the chunk it cut


def test_predict_input_refuses_settings_that_do_not_apply():
    with pytest.raises(ValueError, match="dataset, label_column and max_documents do not apply"):
        PredictInput(path="x.jsonl", label_column="label")
