"""``contrastext predict`` on real data with the bundled MiniLM: each method's saved model labels, clusters,
assigns topics to or embeds a corpus exactly as the method's own class does; a killed run resumes with every
id once; a finished run skips, other settings are refused, bad input is named before any work."""

import csv
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import AG_NEWS_LABELS, shared_data

from contrastext.errors import InputError
from contrastext.pipelines.predict import run_predict
from contrastext.predict.config import PredictConfig
from contrastext.predict.inputs import UnreadableInput

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ray]


def _config(model, path, out: Path, name="run", **settings) -> PredictConfig:
    inputs = settings.pop("input", {})
    return PredictConfig(model=str(model), input={"path": str(path), **inputs},
                         output={"storage_path": str(out), "name": name}, **settings)


def _rows(out: Path, name="run") -> pa.Table:
    return pq.read_table(out / name / "predictions")


def _bbcsport(limit=None) -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in shared_data("bbcsport/bbcsport.jsonl").read_text().splitlines()][:limit]
    return [f"{r['title']}. {r['text']}" for r in rows], [r["label"] for r in rows]


@pytest.mark.integration
@pytest.mark.slow
def test_a_classifier_self_trained_on_one_half_labels_the_other_half_as_the_class_does(
        self_trained_wcsbert, ag_news_split, tmp_path, capsys):
    _, held_out, gold = ag_news_split
    model = self_trained_wcsbert.save(tmp_path / "model")
    with open(tmp_path / "held_out.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["doc_id", "text"])
        writer.writerows([f"n{i}", text] for i, text in enumerate(held_out))
    config = _config(model, tmp_path / "held_out.csv", tmp_path / "out", input={"id_column": "doc_id"},
                     chunk_rows=150)
    summary = run_predict(config)

    table = _rows(tmp_path / "out").to_pylist()
    by_id = {row["id"]: row for row in table}
    expected = self_trained_wcsbert.predict(held_out)
    assert len(table) == len(by_id) == 400 and summary["rows_in"] == summary["rows_out"] == 400
    assert [by_id[f"n{i}"]["label"] for i in range(400)] == expected
    proba = self_trained_wcsbert.predict_proba(held_out[:50])
    for i in range(50):
        row = by_id[f"n{i}"]
        assert row["top_labels"][0] == row["label"] and len(row["top_labels"]) == 3
        assert row["score"] == pytest.approx(float(proba[i].max()), abs=1e-5)
        assert row["top_scores"] == sorted(row["top_scores"], reverse=True)
    accuracy = float(np.mean(np.array([by_id[f"n{i}"]["label"] for i in range(400)]) == gold))
    assert accuracy > 0.75, accuracy  # the self-trained model's accuracy (0.86 measured), not an untrained one (0.70)
    assert summary["counts"] == {label: expected.count(label) for label in AG_NEWS_LABELS if label in expected}
    assert summary["chunks"] == 3 and summary["method"] == "WCSBert" and summary["task"] == "classify"
    out = capsys.readouterr().out
    assert "[predict] plan: 1 files, 1 units" in out and "classify: Sports" in out and "rows/s" in out
    manifest = json.loads((tmp_path / "out" / "run" / "manifest.json").read_text())
    assert manifest["job"] == "predict" and manifest["counts"]["rows_out"] == 400

    # started again: finished, so skipped; other settings are refused rather than mixed in
    assert run_predict(config)["rows_out"] == 400
    assert "done in an earlier run with these settings, skipped" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"made with other settings \(top_k\).*another output.name.*overwrite"):
        run_predict(config.model_copy(update={"top_k": 2}))
    replaced = run_predict(config.model_copy(update={"top_k": 2, "overwrite": True}))
    assert replaced["rows_out"] == 400 and len(_rows(tmp_path / "out").column("top_labels")[0]) == 2


@pytest.mark.integration
def test_plain_embeddings_of_a_folder_equal_the_encoder_and_bad_rows_are_counted(ray_session, tmp_path):
    from contrastext.models import TextEncoder

    texts, _ = _bbcsport(60)
    folder = tmp_path / "docs"
    folder.mkdir()
    with gzip.open(folder / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        for i, text in enumerate(texts[:30]):
            f.write(json.dumps({"id": f"a{i}", "text": text}) + "\n")
        f.write(json.dumps({"id": "blank", "text": "   "}) + "\n" + json.dumps({"id": "null", "text": None}) + "\n")
    pq.write_table(pa.table({"id": [f"b{i}" for i in range(30)], "text": texts[30:]}), folder / "b.parquet")
    (folder / "_SUCCESS").write_text("")
    summary = run_predict(_config("bundled:minilm", folder, tmp_path / "out", chunk_rows=16))

    table = _rows(tmp_path / "out")
    got = dict(zip(table.column("id").to_pylist(), np.array(table.column("embedding").to_pylist(), np.float32)))
    direct = TextEncoder.from_pretrained("bundled:minilm").encode(texts)
    ids = [f"a{i}" for i in range(30)] + [f"b{i}" for i in range(30)]
    assert sorted(got) == sorted(ids) and table.schema.field("embedding").type.list_size == 384
    assert max(float(np.abs(got[i] - direct[k]).max()) for k, i in enumerate(ids)) <= 1e-5
    assert summary["rows_in"] == 62 and summary["rows_out"] == 60
    assert summary["rows_skipped"] == {"missing or empty text": 2} and summary["task"] == "embed"


def test_embeddings_on_the_onnx_backend_equal_torch_and_the_summary_names_the_backend(ray_session, tmp_path,
                                                                                       tiny_encoder_dir):
    from contrastext.models import TextEncoder

    texts = [f"document {i} about {topic}" for i, topic in enumerate(["football", "rates", "phones"] * 8)]
    pq.write_table(pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts}), tmp_path / "docs.parquet")
    summary = run_predict(_config(tiny_encoder_dir, tmp_path / "docs.parquet", tmp_path / "out", backend="onnx",
                                  chunk_rows=10))

    table = _rows(tmp_path / "out")
    got = dict(zip(table.column("id").to_pylist(), np.array(table.column("embedding").to_pylist(), np.float32)))
    direct = TextEncoder.from_pretrained(str(tiny_encoder_dir)).encode(texts)
    assert max(float(np.abs(got[f"d{k}"] - direct[k]).max()) for k in range(len(texts))) <= 1e-4
    assert summary["backend"] == "onnx" and summary["backend_rows"] == {"onnx": len(texts)}


@pytest.mark.integration
@pytest.mark.slow
def test_shuffle_divide_clusters_bbcsport_through_predict_as_the_method_does(ray_session, tmp_path):
    from contrastext import ShuffleDivide
    from contrastext.methods.shuffle_divide.config import default_shuffle_divide_train

    texts, labels = _bbcsport(300)
    train = default_shuffle_divide_train().model_copy(update={"max_steps": 2, "batch_size": 16})
    method = ShuffleDivide("bundled:minilm", n_clusters=5, epochs=1, train=train, encode_max_length=128,
                           work_dir=tmp_path / "work")
    fitted = method.fit_predict(texts)
    folder = method.save(tmp_path / "model")
    pq.write_table(pa.table({"id": [str(i) for i in range(len(texts))], "text": texts}), tmp_path / "bbc.parquet")
    summary = run_predict(_config(folder, tmp_path / "bbc.parquet", tmp_path / "out"))

    table = _rows(tmp_path / "out")
    got = dict(zip(table.column("id").to_pylist(), table.column("cluster").to_pylist()))
    assigned = [got[str(i)] for i in range(len(texts))]
    loaded = ShuffleDivide.load(folder)
    assert assigned == loaded.predict(texts).tolist() == fitted.tolist()
    assert summary["task"] == "cluster" and len(summary["counts"]) == 5
    from sklearn.metrics import normalized_mutual_info_score

    assert normalized_mutual_info_score(labels, assigned) > 0.5  # clusters that follow the sports


@pytest.mark.integration
@pytest.mark.slow
def test_phrase_topics_are_assigned_to_documents_as_the_model_assigns_them(ray_session, tmp_path):
    from contrastext import PhraseTopicModel

    texts, _ = _bbcsport(140)
    model = PhraseTopicModel("bundled:minilm", extractor="ngram").fit(texts[:120], n_topics=5, max_phrases=1000)
    folder = model.save(tmp_path / "topics")
    with open(tmp_path / "new.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(texts[120:]):
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    summary = run_predict(_config(folder, tmp_path / "new.jsonl", tmp_path / "out"))

    rows = {row["id"]: row for row in _rows(tmp_path / "out").to_pylist()}
    expected = PhraseTopicModel.load(folder).assign(texts[120:])
    assert len(rows) == 20 and summary["task"] == "topics"
    for i, document in enumerate(expected):
        row = rows[str(i)]
        assert row["topic"] == document.topic
        assert [(p["phrase"], p["topic"]) for p in row["phrases"]] == [(o.phrase, o.topic) for o in document.phrases]
        assert all(texts[120 + i][p["start"]:p["end"]] == p["phrase"] for p in row["phrases"])
    assert sum(1 for row in rows.values() if row["phrases"]) >= 18  # the mined vocabulary finds phrases in new news
    assert len({row["topic"] for row in rows.values()} - {None}) >= 3


def test_a_killed_run_resumes_and_every_id_appears_once(ray_session, tiny_encoder_dir, tmp_path):
    words = "rivers mountains towns wizards boxing judges foxes dogs bridges markets".split()
    rng = np.random.default_rng(0)
    with open(tmp_path / "docs.jsonl", "w", encoding="utf-8") as f:
        for i in range(3000):
            f.write(json.dumps({"id": f"d{i}", "text": " ".join(rng.choice(words, 30))}) + "\n")
    settings = {"model": tiny_encoder_dir, "input.path": tmp_path / "docs.jsonl", "chunk_rows": 50,
                "batch_size": 16, "max_length": 32, "output.storage_path": tmp_path / "out", "output.name": "run",
                "scaling.cpus_per_actor": 1}
    env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address,
           "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, str(REPO / "jobs" / "predict.py"),
                                *[f"--set={k}={v}" for k, v in settings.items()]],
                               env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = tmp_path / "out" / "run" / "predictions"
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline and len(list(parts.glob("part-*.parquet"))) < 3:
            assert process.poll() is None, "the first run ended before writing three chunks"
            time.sleep(0.02)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    before = {p.name: p.stat().st_mtime_ns for p in parts.glob("part-*.parquet")}
    assert 3 <= len(before) < 60, "killed too late: nothing left to resume"
    assert not (tmp_path / "out" / "run" / "done.json").exists()

    config = PredictConfig(model=str(tiny_encoder_dir), input={"path": str(tmp_path / "docs.jsonl")}, chunk_rows=50,
                           batch_size=16, max_length=32,
                           output={"storage_path": str(tmp_path / "out"), "name": "run"},
                           scaling={"cpus_per_actor": 1})
    summary = run_predict(config)
    ids = _rows(tmp_path / "out").column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 3000 and set(ids) == {f"d{i}" for i in range(3000)}
    assert summary["chunks"] == 60 and summary["chunks_kept"] >= len(before) and summary["rows_in"] == 3000
    assert all(parts.joinpath(name).stat().st_mtime_ns == mtime for name, mtime in before.items())  # not redone


def test_bad_input_is_named_before_any_work(tmp_path, tiny_encoder_dir):
    (tmp_path / "x.jsonl").write_text(json.dumps({"body": "a text"}) + "\n")
    (tmp_path / "not_a_model").mkdir()
    (tmp_path / "not_a_model" / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="is not a model folder: it has none of"):
        run_predict(_config(tmp_path / "not_a_model", tmp_path / "x.jsonl", tmp_path / "out"))
    with pytest.raises(InputError, match=r"text column\(s\) \['text'\] not found"):
        run_predict(_config(tiny_encoder_dir, tmp_path / "x.jsonl", tmp_path / "out"))
    with pytest.raises(InputError, match="TextEncoder folder \\(embed\\); it cannot classify"):
        run_predict(_config(tiny_encoder_dir, tmp_path / "x.jsonl", tmp_path / "out", task="classify"))
    assert not (tmp_path / "out" / "run" / "predictions").exists()
    # an output folder that holds someone else's files is left alone
    (tmp_path / "mine" / "run").mkdir(parents=True)
    (tmp_path / "mine" / "run" / "keep.txt").write_text("mine")
    (tmp_path / "y.jsonl").write_text(json.dumps({"text": "a text"}) + "\n")
    with pytest.raises(InputError, match="holds 1 files that no predict run wrote"):
        run_predict(_config(tiny_encoder_dir, tmp_path / "y.jsonl", tmp_path / "mine"))
    assert (tmp_path / "mine" / "run" / "keep.txt").read_text() == "mine"
    # the command line says it in one line, exit 2
    command = [sys.executable, "-m", "contrastext.cli", "predict", f"--set=model={tmp_path / 'not_a_model'}",
               f"--set=input.path={tmp_path / 'x.jsonl'}", f"--set=output.storage_path={tmp_path / 'out'}"]
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert result.returncode == 2 and result.stderr.startswith("contrastext predict: model ")


def test_an_unreadable_file_stops_the_run_naming_it_or_is_counted(ray_session, tiny_encoder_dir, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(5)))
    (tmp_path / "in" / "b.parquet").write_bytes(b"PAR1 but not really")
    with pytest.raises(UnreadableInput, match=r"input file .*b\.parquet cannot be read.*on_unreadable=skip"):
        run_predict(_config(tiny_encoder_dir, tmp_path / "in", tmp_path / "out"))
    summary = run_predict(_config(tiny_encoder_dir, tmp_path / "in", tmp_path / "out", name="skip",
                                  input={"on_unreadable": "skip"}))
    assert summary["rows_out"] == 5 and list(summary["files_unreadable"]) == [str(tmp_path / "in" / "b.parquet")]
