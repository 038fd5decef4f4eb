from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from conftest import shared_data

from contrastext.data.sources import TextSource, ag_news_test, load_texts


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_headerless_csv_joins_text_columns_and_maps_labels(tmp_path):
    f = _write(tmp_path / "news.csv", '"1","Title one","Body\\none"\n"2","T2","B2"\n"9","T3","B3"\n"3","only","x","extra"\n')
    config = TextSource(path=str(f), columns=["class", "title", "body"], text_columns=["title", "body"],
                        label_column="class", label_names={"1": "A", "2": "B", "3": "C"},
                        unescape_breaks=True)
    data = load_texts(config)
    assert data.texts == ["Title one Body one", "T2 B2"]
    assert data.labels == ["A", "B"]
    assert data.label_names == ["A", "B", "C"]
    assert data.label_ids().tolist() == [0, 1]
    assert data.skipped == {"label '9' not in label_names": 1, "row with 4 fields, not 3": 1}


def test_jsonl_pool_without_labels_and_relative_path(tmp_path):
    _write(tmp_path / "pool.jsonl", '{"text": "a b"}\n{"text": ""}\nnot json\n{"text": "c"}\n')
    data = load_texts(TextSource(path="pool.jsonl"), data_dir=tmp_path)
    assert data.texts == ["a b", "c"] and data.labels is None
    assert data.skipped["missing or empty text"] == 1 and data.skipped["malformed JSON line"] == 1
    with pytest.raises(ValueError, match="no labels"):
        data.label_ids()


def test_declared_columns_must_cover_text_and_label():
    with pytest.raises(ValueError, match="not among the declared columns"):
        TextSource(path="x.csv", columns=["a", "b"], text_columns=["c"], label_column="a")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_texts(TextSource(path=str(tmp_path / "none.csv")))


def test_halves_are_disjoint_complete_and_seeded(tmp_path):
    _write(tmp_path / "t.jsonl", "".join(f'{{"text": "t{i}", "label": "{i % 2}"}}\n' for i in range(400)))
    data = load_texts(TextSource(path=str(tmp_path / "t.jsonl"), label_column="label"))
    first, second = data.split_halves(seed=3)
    assert 150 < len(first) < 250 and len(first) + len(second) == 400
    assert sorted(first.texts + second.texts) == sorted(data.texts)
    # a text's half does not depend on the other rows: the pool read of a subset splits the same way
    part_first, _ = data.subset(range(0, 400, 3)).split_halves(seed=3)
    assert set(part_first.texts) == set(first.texts) & set(data.subset(range(0, 400, 3)).texts)
    again, _ = data.split_halves(seed=3)
    assert again.texts == first.texts
    assert data.split_halves(seed=4)[0].texts != first.texts


@pytest.mark.integration
def test_real_ag_news_test_set():
    path = shared_data("ag_news/test.csv")
    data = load_texts(ag_news_test(str(path)))
    assert len(data) == 7600 and not data.skipped
    assert data.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    assert np.bincount(data.label_ids()).tolist() == [1900] * 4
    assert not any("\\" in t for t in data.texts)


def test_sentences_join_ends_each_part_with_a_full_stop(tmp_path):
    f = _write(tmp_path / "t.csv", '"1","A title","The body."\n"1","Done!","x"\n')
    config = TextSource(path=str(f), columns=["class", "title", "body"], text_columns=["title", "body"],
                        label_column="class", join="sentences")
    assert load_texts(config).texts == ["A title. The body.", "Done! x"]


def test_one_text_column_titles_cleaning_ids_and_a_seeded_subset(tmp_path):
    rows = [{"id": "a", "title": "First", "text": "one two three four see https://x.org"},
            {"title": "Short", "text": "two words"},
            {"id": "c", "text": "five words in this text", "label": "L"}]
    _write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    source = TextSource.model_validate({"path": "d.jsonl", "text_column": "text", "title_column": "title",
                                        "cleaning": "basic", "min_words": 4})
    assert source.text_columns == ["text"]
    data = load_texts(source, data_dir=tmp_path)
    # the title counts as words; the URL is cleaned away; row 1 keeps only 3 words
    assert data.texts == ["First.\n\none two three four see", "five words in this text"]
    assert data.ids == ["a", "c"] and data.labels is None
    assert data.skipped == {"fewer than 4 words after cleaning": 1}
    subset = load_texts(source.model_copy(update={"max_documents": 2, "min_words": 1}), tmp_path, seed=0)
    assert len(subset) == 2 and subset.ids == sorted(subset.ids, key=["a", "1", "c"].index)
    with pytest.raises(ValueError, match="not both"):
        TextSource.model_validate({"path": "d.jsonl", "text_column": "text", "text_columns": ["text"]})


def test_the_jobs_defaults_for_sources_given_as_mappings():
    from contrastext.methods.wcsbert.config import EvaluationConfig
    from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig

    documents = ShuffleDivideConfig.model_validate({"documents": {"path": "d.jsonl", "text_column": "body"}}).documents
    assert (documents.text_columns, documents.cleaning, documents.min_words, documents.label_column) == (
        ["body"], "basic", 10, None)
    kept = ShuffleDivideConfig.model_validate({"documents": {"path": "d.jsonl", "cleaning": "none"}}).documents
    assert kept.cleaning == "none"
    assert EvaluationConfig.model_validate({"texts": {"path": "e.csv"}}).texts.label_column == "label"
    with pytest.raises(ValueError, match="needs a label_column"):
        EvaluationConfig(texts=TextSource(path="e.csv"))
    with pytest.raises(ValueError, match="extra"):
        TextSource.model_validate({"path": "d.jsonl", "text_field": "text"})


def test_text_files_and_folders_of_mixed_files(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("first text\n\n  second text  \n")
    texts = load_texts(TextSource(path=str(lines)))
    assert texts.texts == ["first text", "second text"] and texts.ids == ["lines.txt:1", "lines.txt:3"]

    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("A whole document.\n\nIts second paragraph.")
    (folder / "sub" / "b.jsonl").write_text('{"text": "row one", "id": "r1"}\n{"text": ""}\n')
    (folder / "c.bin").write_bytes(b"\x00")
    (folder / "sub" / "c.jsonl").write_text('{"text": "row two", "id": "r1"}\n')
    with gzip.open(folder / "d.txt.gz", "wt") as f:
        f.write("A compressed document.")
    (folder / ".hidden.md").write_text("an editor's copy")
    texts = load_texts(TextSource(path=str(folder)))
    assert texts.texts == ["A whole document.\n\nIts second paragraph.", "A compressed document.", "row one",
                           "row two"]
    # a table file's ids are prefixed by its path: two files' ids never collide
    assert texts.ids == ["a.md", "d.txt.gz", "sub/b.jsonl:r1", "sub/c.jsonl:r1"]
    assert dict(texts.skipped) == {"missing or empty text": 1, "file of unknown type": 1}
    with pytest.raises(ValueError, match="no usable texts .*'missing label': 2"):
        load_texts(TextSource(path=str(lines), label_column="label"))  # a text file's lines have no labels
    # the columns are checked on the table files; a whole text file has no label and is skipped for it
    labelled = load_texts(TextSource(path=str(folder), label_column="id"))
    assert labelled.texts == ["row one", "row two"] and labelled.skipped["missing label"] == 2


def test_a_folder_of_parquet_files_is_one_dataset_with_its_partition_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    for label in ("sport", "money"):
        (tmp_path / "docs" / f"label={label}").mkdir(parents=True)
        pq.write_table(pa.table({"text": [f"a {label} text"]}), tmp_path / "docs" / f"label={label}" / "0.parquet")
    (tmp_path / "docs" / "_SUCCESS").write_text("")
    texts = load_texts(TextSource(path=str(tmp_path / "docs"), label_column="label"))
    assert sorted(zip(texts.texts, texts.labels)) == [("a money text", "money"), ("a sport text", "sport")]
