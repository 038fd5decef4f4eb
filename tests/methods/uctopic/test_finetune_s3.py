"""The UCTopic stages with their inputs, models and outputs on an S3 bucket (moto server, local Ray)."""

import json

import pytest
from uctopic_data import conll_text, pages_jsonl

from contrastext import storage
from contrastext.config import load_config
from contrastext.methods.uctopic.config import UCTopicConfig
from contrastext.methods.uctopic.mlm import MLM_HEAD_WEIGHTS
from contrastext.pipelines.uctopic import finished_summary, run_uctopic, training_stage

TOPIC_TEXTS = {"sport": "The striker scored a late goal and the football club won the league title.",
               "money": "The central bank raised interest rates and the stock market fell sharply.",
               "tech": "The new smartphone has a faster chip and the battery life is longer."}


def _config(bucket: str, model: str, stage: str, **sets) -> UCTopicConfig:
    overrides = [f"stage={stage}", f"model={model}", f"output.storage_path={bucket}/runs",
                 "max_length=32", "train.batch_size=8", "train.log_every_steps=1"]
    overrides += [f"{k}={v}" for k, v in sets.items()]
    return load_config(UCTopicConfig, None, overrides)


def _files(run_dir: str) -> set[str]:
    return {f[len(run_dir) + 1:] for f in storage.list_files(run_dir, recursive=True)}


@pytest.mark.ray
@pytest.mark.slow
def test_pretrain_and_finetune_on_a_bucket_and_a_finished_finetune_is_skipped(
        ray_session, s3_bucket, tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a relative local folder written by mistake would appear here
    conll = storage.write_text(f"{s3_bucket}/data/mini.conll", conll_text())
    pages = storage.write_text(f"{s3_bucket}/data/pages.jsonl", pages_jsonl())
    model = storage.copy_tree(tiny_encoder_dir, f"{s3_bucket}/models/tiny")

    pretrain = _config(s3_bucket, model, "pretrain", **{
        "pretrain.pages": pages, "evaluation.conll": conll, "train.max_steps": 2,
        "train.loss.params.mlm_weight": 0.1})
    summary = run_uctopic(pretrain)
    pretrain_dir = f"{s3_bucket}/runs/uctopic-pretrain"
    assert summary["run_dir"] == pretrain_dir and summary["model_path"] == f"{pretrain_dir}/model"
    assert summary["link_mentions"] == 24 and summary["steps"] == 2
    assert summary["entity_clustering_after"]["instances"] == 72
    files = _files(pretrain_dir)
    for name in ("metrics.json", "report.md", "manifest.json", "done.json", "pairs.parquet", "history.jsonl",
                 "model/phrase_encoder.json", "model/modules.json", f"model/{MLM_HEAD_WEIGHTS}"):
        assert name in files, name
    manifest = storage.read_json(f"{pretrain_dir}/manifest.json")
    assert set(manifest["inputs"]) == {pages, conll} and manifest["inputs"][conll].startswith("size:")

    finetune = _config(s3_bucket, summary["model_path"], "finetune", **{
        "finetune.data.conll": conll, "finetune.central_fraction": 0.5, "train.max_steps": 2,
        "finetune.epochs": 1, "finetune.select_by": "last"})
    tuned = run_uctopic(finetune)
    run_dir = f"{s3_bucket}/runs/uctopic-finetune"
    assert tuned["run_dir"] == run_dir and tuned["model_path"] == f"{run_dir}/model"
    assert tuned["k"] == 3 and tuned["steps"] == 2 and tuned["pairs"] > 0 and len(tuned["topics"]) == 3
    assert tuned["source"] == conll and tuned["counts"]["instances"] == 72
    files = _files(run_dir)
    for name in ("metrics.json", "report.md", "manifest.json", "done.json", "train/epoch_001/history.jsonl",
                 "epochs/epoch_001/model/modules.json", "model/phrase_encoder.json", "model/modules.json"):
        assert name in files, name
    checkpoints = sorted(f for f in files if f.startswith("train/epoch_001/checkpoint_"))
    assert checkpoints
    metrics = storage.read_json(f"{run_dir}/metrics.json")
    assert metrics["steps"] == 2 and metrics["model_path"] == f"{run_dir}/model"
    assert "## Topics" in storage.read_text(f"{run_dir}/report.md")
    assert storage.read_json(f"{run_dir}/done.json")["settings"]["model"] == f"{pretrain_dir}/model"
    assert not (tmp_path / "runs").exists() and not list(tmp_path.iterdir())

    # the same stage again: skipped from its marker on the bucket, nothing retrained or rewritten
    marker = storage.read_bytes(f"{run_dir}/done.json")
    capsys.readouterr()
    again = run_uctopic(finetune)
    assert "finetune: done in an earlier run with these settings, skipped" in capsys.readouterr().out
    assert again == {**metrics, "run_dir": run_dir}
    assert sorted(f for f in _files(run_dir) if f.startswith("train/epoch_001/checkpoint_")) == checkpoints
    assert storage.read_bytes(f"{run_dir}/done.json") == marker
    # other settings: the marker is not trusted
    changed = finetune.model_copy(update={"finetune": finetune.finetune.model_copy(
        update={"central_fraction": 0.4})})
    assert finished_summary(training_stage(changed, run_dir)) is None
    assert "finetune.central_fraction" in capsys.readouterr().out
    # a setting that only changes how training runs keeps the marker valid
    scaled = finetune.model_copy(update={"train": finetune.train.model_copy(update={"max_failures": 3})})
    assert finished_summary(training_stage(scaled, run_dir)) is not None
    assert not list(tmp_path.iterdir())


def test_mine_and_evaluate_read_and_write_on_a_bucket(s3_bucket, tiny_encoder_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for i in range(6):
        for name, text in TOPIC_TEXTS.items():
            storage.write_text(f"{s3_bucket}/docs/{name}{i}.txt", text)
    storage.write_bytes(f"{s3_bucket}/docs/notes.bin", b"\x00")
    model = storage.copy_tree(tiny_encoder_dir, f"{s3_bucket}/models/tiny")
    summary = run_uctopic(_config(s3_bucket, model, "mine", **{
        "mine.data.documents": f"{s3_bucket}/docs", "mine.topics.k_max": 4}))
    assert summary["counts"]["documents"] == 18
    assert summary["counts"]["documents_skipped"] == {"file of unknown type": 1}
    assert 2 <= summary["n_topics"] <= 4 and "interest rates" in summary["phrase_topics"]
    run_dir = f"{s3_bucket}/runs/uctopic-mine"
    assert {"metrics.json", "report.md", "manifest.json", "topics_pca.png"} <= _files(run_dir)
    assert storage.read_json(f"{run_dir}/metrics.json")["n_topics"] == summary["n_topics"]

    conll = storage.write_text(f"{s3_bucket}/data/mini.conll", conll_text())
    scores = run_uctopic(_config(s3_bucket, model, "evaluate", **{"evaluation.conll": conll}))
    assert scores["entity_clustering"]["instances"] == 72 and scores["entity_clustering"]["k"] == 3
    assert {"metrics.json", "report.md", "manifest.json"} <= _files(f"{s3_bucket}/runs/uctopic-evaluate")
    assert not list(tmp_path.iterdir())


def test_missing_inputs_on_a_bucket_name_them(s3_bucket, tiny_encoder_dir):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_uctopic(_config(s3_bucket, str(tiny_encoder_dir), "mine",
                            **{"mine.data.documents": f"{s3_bucket}/nothing-here"}))
    with pytest.raises(FileNotFoundError, match="CoNLL file .*missing.conll does not exist"):
        run_uctopic(_config(s3_bucket, str(tiny_encoder_dir), "evaluate",
                            **{"evaluation.conll": f"{s3_bucket}/missing.conll"}))


NAMED_DOCUMENTS = [
    {"id": i, "text": text} for i, text in enumerate([
        "Supporters of Manchester United travelled to Lisbon for the final. The Bank of England said little.",
        "In Lisbon the players of Manchester United trained in the rain. Officials at the Bank of England met.",
        "The coach said Manchester United would rest two players in Lisbon. Traders watched the Bank of England.",
        "Rain fell on Lisbon all week long. Nobody expected the Bank of England to act before the summer.",
    ])]


@pytest.mark.ray
@pytest.mark.slow
def test_pretraining_on_phrases_of_text_sources_on_a_bucket(ray_session, s3_bucket, tiny_encoder_dir, tmp_path,
                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = storage.write_text(f"{s3_bucket}/text/news.jsonl", "\n".join(json.dumps(d) for d in NAMED_DOCUMENTS))
    other = storage.write_text(f"{s3_bucket}/text/more.jsonl", json.dumps(
        {"id": 9, "text": "Fans in Lisbon sang about Manchester United until late. Prices rose again in May."}))
    model = storage.copy_tree(tiny_encoder_dir, f"{s3_bucket}/models/tiny")
    config = _config(s3_bucket, model, "pretrain", **{
        "pretrain.documents": f'[{{"path": "{docs}"}}, {{"path": "{other}"}}]', "pretrain.vocabulary_documents": 10,
        "train.max_steps": 2, "output.name": "text"})
    summary = run_uctopic(config)
    run_dir = f"{s3_bucket}/runs/text-pretrain"
    assert summary["run_dir"] == run_dir and summary["source"] == f"{docs} + {other}"
    # named spans of four or more words' sentences: 4 "Manchester United", 4 "Bank of England", 5 "Lisbon"
    assert summary["link_mentions"] == 13
    pairs = storage.read_parquet(f"{run_dir}/pairs.parquet").to_pylist()
    assert summary["pairs"] == len(pairs) > 0 and summary["steps"] == 2
    for row in pairs:  # two different sentences that mention the same phrase, at the stated spans
        assert row["anchor"] != row["positive"]
        phrase = row["key"].split(":", 1)[1]
        assert row["anchor"][row["anchor_start"]:row["anchor_end"]].lower() == phrase
        assert row["positive"][row["positive_start"]:row["positive_end"]].lower() == phrase
    assert {row["key"] for row in pairs} == {"target:manchester united", "target:bank of england", "target:lisbon"}
    assert "model/modules.json" in {f[len(run_dir) + 1:] for f in storage.list_files(run_dir, recursive=True)}
    assert not list(tmp_path.iterdir())
