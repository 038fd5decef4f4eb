"""supcon_classify's data and config handling (no training): cleaning, subsets, null label, errors."""

import gzip
import json

import numpy as np
import pytest
from pydantic import ValidationError

from contrastext.config import load_config
from contrastext.data.documents import clean_text
from contrastext.methods.supcon.config import LabelledTextData, SupconClassifyConfig, VariantConfig
from contrastext.pipelines.supcon_classify import (
    best_variant,
    load_labelled_data,
    markdown_report,
    variant_train_config,
)
from conftest import shared_data

MESSAGE = ("From: someone@example.org\nSubject: Re: orbits\nOrganization: A University\nLines: 6\n\n"
           "In article <1@x.org> someone else wrote:\n> quoted claim about orbits\n"
           "Orbits are ellipses, not circles.\n\n--\nSignature Person, Dept of Physics\n")


def _write(path, records):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for record in records:
            f.write(record if isinstance(record, str) else json.dumps(record))
            f.write("\n")


def _files(tmp_path, n_per_label=6):
    labels = ["sci.space", "rec.autos", "talk.misc", "misc.forsale"]
    good = [{"id": i, "label": labels[i % 4], "text": f"Subject: s\n\nmessage {i} about {labels[i % 4]}"}
            for i in range(4 * n_per_label)]
    bad = ["{not json", json.dumps([1, 2]), json.dumps({"label": "sci.space"}),
           json.dumps({"text": "no label here"}), json.dumps({"text": "From: a\n\n", "label": "rec.autos"})]
    _write(tmp_path / "train.jsonl.gz", good + bad)
    _write(tmp_path / "test.jsonl.gz", good[:8] + [json.dumps({"text": "Subject: s\n\nx", "label": "unseen.group"})])
    return LabelledTextData(root=str(tmp_path), train_file="train.jsonl.gz", test_file="test.jsonl.gz")


def test_cleaning_removes_headers_quotes_and_signature():
    assert clean_text(MESSAGE, "newsgroups") == "Orbits are ellipses, not circles."
    assert clean_text(MESSAGE, "none").startswith("From: someone")
    assert LabelledTextData().train.cleaning == "newsgroups"  # the default data: 20 Newsgroups, cleaned


def test_loading_counts_malformed_lines_and_unknown_labels(tmp_path):
    data = load_labelled_data(_files(tmp_path))
    assert len(data.train.texts) == 24 and len(data.test.texts) == 8
    assert data.label_names == ["misc.forsale", "rec.autos", "sci.space", "talk.misc"] and data.null_id is None
    assert dict(data.skipped["train"]) == {"malformed JSON line": 1, "JSON line is not an object": 1,
                                           "missing or empty text": 1, "missing label": 1,
                                           "fewer than 1 words after cleaning": 1}
    assert dict(data.skipped["test"]) == {"label not in the training data": 1}
    assert all(not t.startswith("Subject") for t in data.train.texts)
    assert all(v.startswith("sha256:") for v in data.files.values())


def test_stratified_subset_caps_and_null_label(tmp_path):
    config = _files(tmp_path).model_copy(update={
        "train_per_class": 4, "class_caps": {"rec.autos": 2}, "null_groups": ["talk.misc", "misc.forsale"]})
    data = load_labelled_data(config)
    assert data.label_names == ["rec.autos", "sci.space", "other"] and data.null_id == 2
    assert np.bincount(data.train.labels).tolist() == [2, 4, 8]  # the null label merges two capped groups
    assert sorted(set(data.train.groups)) == ["misc.forsale", "rec.autos", "sci.space", "talk.misc"]
    again = load_labelled_data(config)
    assert again.train.texts == data.train.texts  # seeded


def test_missing_files_and_unknown_groups_name_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.root"):
        load_labelled_data(LabelledTextData(root=str(tmp_path)))
    config = _files(tmp_path).model_copy(update={"null_groups": ["no.such.group"]})
    with pytest.raises(ValueError, match="no.such.group"):
        load_labelled_data(config)


def test_earlier_keys_become_text_sources(tmp_path):
    earlier = LabelledTextData(root="/d", train_file="a.jsonl", test_file="b.csv", text_field="body",
                               label_field="topic", max_chars=100)
    assert earlier.train.path == "a.jsonl" and earlier.test.path == "b.csv"
    assert earlier.train.text_columns == ["body"] and earlier.test.label_column == "topic"
    assert earlier.train.cleaning == "newsgroups" and earlier.train.max_chars == 100
    assert LabelledTextData(remove=[]).test.cleaning == "none"
    with pytest.raises(ValidationError, match="some parts only"):
        LabelledTextData(remove=["headers"])
    with pytest.raises(ValidationError, match="not both"):
        LabelledTextData(train_file="a.jsonl", train={"path": "a.jsonl"})
    with pytest.raises(ValidationError, match="needs a label_column"):
        LabelledTextData(test={"path": "b.jsonl", "label_column": None})
    # a source given as a path or a mapping is read as labelled by its `label` column
    assert LabelledTextData(train="t.csv").train.label_column == "label"
    # the new shape reads any text file: a CSV with its own columns, cut and cleaned as it says
    (tmp_path / "t.csv").write_text("topic,body\nspace,orbit orbit orbit\nautos,engine wheel\n")
    source = {"path": "t.csv", "text_columns": ["body"], "label_column": "topic", "max_chars": 5}
    data = load_labelled_data(LabelledTextData(root=str(tmp_path), train=source, test=source))
    assert data.train.texts == ["orbit", "engin"] and data.label_names == ["autos", "space"]


def test_relative_paths_are_read_under_the_data_folder_and_a_folder_is_a_source(tmp_path, monkeypatch):
    _files(tmp_path)
    monkeypatch.setenv("CONTRASTEXT_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path.parent)  # not where the files are
    data = load_labelled_data(LabelledTextData(train="train.jsonl.gz", test="test.jsonl.gz"))
    assert len(data.train.texts) == 25  # a path alone is read as it is: the header-only message is kept
    assert set(data.files) == {str(tmp_path / "train.jsonl.gz"), str(tmp_path / "test.jsonl.gz")}
    (tmp_path / "parts").mkdir()
    (tmp_path / "train.jsonl.gz").rename(tmp_path / "parts" / "train.jsonl.gz")
    data = load_labelled_data(LabelledTextData(train={"path": "parts", "cleaning": "newsgroups"}, test="test.jsonl.gz"))
    assert len(data.train.texts) == 24 and str(tmp_path / "parts" / "train.jsonl.gz") in data.files


def test_variant_rules():
    with pytest.raises(ValidationError, match="not an earlier variant"):
        SupconClassifyConfig(variants=[VariantConfig(name="head", start_from="base"), VariantConfig(name="base")])
    with pytest.raises(ValidationError, match="two variants"):
        SupconClassifyConfig(variants=[VariantConfig(name="a"), VariantConfig(name="a")])
    with pytest.raises(ValidationError, match="letters, digits"):
        VariantConfig(name="a/b")
    with pytest.raises(ValidationError, match="both 0"):
        VariantConfig(name="a", loss={"focal_weight": 0, "ntxent_weight": 0})


def test_default_variants_are_the_experiment_and_map_to_train_configs():
    config = load_config(SupconClassifyConfig, overrides=["train.classifier.head_lr=0.01"])
    names = [v.name for v in config.variants]
    assert names == ["focal", "focal_ntxent", "focal_100ntxent", "focal_ntxent_then_head"]
    focal = variant_train_config(config, config.variants[0], 20, None)
    assert focal.objective == "classify" and focal.loss.name == "focal" and focal.classifier.num_labels == 20
    heavy = variant_train_config(config, config.variants[2], 20, None)
    assert heavy.loss.name == "focal_supcon" and heavy.loss.params["ntxent_weight"] == 100.0
    head = variant_train_config(config, config.variants[3], 20, "/runs/x/focal_ntxent/model")
    assert head.classifier.freeze_encoder and head.classifier.reset_head
    assert head.encoder.model == "/runs/x/focal_ntxent/model" and head.loss.name == "focal"
    assert head.classifier.head_lr == 0.01  # the job's train block is kept where the variant says nothing


def test_report_and_best_variant():
    per = {"a": 0.5, "b": 0.9}
    variants = {name: {"accuracy": v, "micro_f1": v, "macro_f1": v, "auprc": v, "silhouette": 0.1, "steps": 3,
                       "per_class_auprc": {"x": v, "y": 1.0}, "tsne_plot": f"plots/tsne_{name}.png"}
                for name, v in per.items()}
    comparison = {"data": {"train_rows": 10, "test_rows": 4, "labels": ["x", "y"], "null_label": "y",
                           "train_label_counts": {"x": 6, "y": 4}}, "variants": variants,
                  "best": best_variant(variants)}
    assert comparison["best"] == "b"
    text = markdown_report(comparison)
    assert "| b | 0.9000 | 0.9000 | 0.9000 | 0.9000 | 0.1000 | 3 |" in text
    assert "| x | 6 | 0.500 | 0.900 |" in text and "plots/tsne_a.png" in text
    assert "null label `y`" in text


@pytest.mark.integration
def test_real_20_newsgroups_subset_loads_cleaned():
    path = shared_data("20newsgroups/20ng_bydate_train.jsonl.gz")
    config = LabelledTextData(root=str(path.parents[1]), train_per_class=5, test_per_class=3,
                              null_groups=["talk.politics.misc", "talk.religion.misc"])
    data = load_labelled_data(config)
    assert len(data.label_names) == 19 and data.label_names[data.null_id] == "other"
    assert len(data.train.texts) == 20 * 5 and len(data.test.texts) == 20 * 3
    assert not any(t.lstrip().startswith("From:") for t in data.train.texts)
    assert data.skipped["train"]["fewer than 1 words after cleaning"] > 0  # nothing left once cleaned
