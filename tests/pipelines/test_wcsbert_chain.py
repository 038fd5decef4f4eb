"""The whole WC-SBERT chain, run once and read by every test here: the real dump sample's corpus, pretraining,
two rounds, the evaluations, the report and plots, on a cluster of several nodes with everything on object
storage (a head with no CPUs runs the driver, two worker nodes run every task; the model and the dump are on
the bucket, the evaluation set is read by the driver alone). The last tests run the job again on the same
folder: every stage is skipped, and one more round runs only that round."""

from __future__ import annotations

import io
import os
from contextlib import redirect_stdout

import numpy as np
import pyarrow.parquet as pq
import pytest
from wcsbert_tiny import labelled_file, news_rows, tiny_settings

from contrastext import storage
from contrastext.config import IN_PROCESS_ENV, load_config
from contrastext.data.samples import find_dump_sample
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.pipelines.wcsbert import run_wcsbert
from contrastext.vectors import unit_rows

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.multinode]

STAGES = ("corpus", "pretrain", "round 1", "round 2")


@pytest.fixture(scope="module")
def chain(ray_cluster, s3_server, tiny_encoder_dir, tmp_path_factory):
    """One run of the job on the cluster: its config, summary, console output, run URI and driver folder."""
    import ray

    bucket = s3_server.new_bucket("chain")
    driver_dir = tmp_path_factory.mktemp("driver")
    model = storage.copy_tree(tiny_encoder_dir, bucket + "/models/tiny")
    dump = storage.upload_file(find_dump_sample(), bucket + "/input/dump.xml.bz2")
    evaluation = labelled_file(driver_dir / "eval.jsonl")
    config = load_config(WCSBertConfig, overrides=[
        *tiny_settings(model=model, storage_path=f"{bucket}/runs", dump=dump, evaluation=evaluation),
        "rounds.guard=false", "rounds.min_change=0"])
    heads = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) == 0]
    on_head = len(heads) == 1 and ray.get_runtime_context().get_node_id() == heads[0]["NodeID"]

    output, cwd = io.StringIO(), os.getcwd()
    os.chdir(driver_dir)  # a relative path written by mistake would land here
    # the job as a cluster runs it: every fit on a Ray Train worker group, none in the driver on the head
    in_process = os.environ.pop(IN_PROCESS_ENV, None)
    try:
        with redirect_stdout(output):
            summary = run_wcsbert(config)
    finally:
        os.chdir(cwd)
        if in_process is not None:
            os.environ[IN_PROCESS_ENV] = in_process
    return {"config": config, "summary": summary, "out": output.getvalue(), "run": f"{bucket}/runs/wcsbert",
            "driver_dir": driver_dir, "model": model, "driver_on_head": on_head}


def _zero_shot_accuracy(model: str, config: WCSBertConfig, max_length: int) -> float:
    """The evaluation recomputed by hand: every NEWS text against the prompts of the news labels (Sci/Tech
    through its two aliases, not its own name), best cosine wins."""
    prompts = {"World": ["World"], "Sports": ["Sports"], "Business": ["Business"],
               "Sci/Tech": ["Science", "Technology"]}
    rows = news_rows()
    encoder = config.encoder.load(model, max_length=max_length)
    texts = unit_rows(encoder.encode([text for text, _ in rows]))
    scores = np.stack([(texts @ unit_rows(encoder.encode([f"This topic is talk about {a}" for a in aliases])).T).max(1)
                       for aliases in prompts.values()], axis=1)
    predicted = [list(prompts)[i] for i in scores.argmax(axis=1)]
    return float(np.mean([p == label for p, (_, label) in zip(predicted, rows)]))


def _table(uri: str):
    filesystem, path = storage.resolve(uri)
    return pq.read_table(path, filesystem=filesystem)


def test_the_driver_runs_on_the_head_and_writes_nothing_to_its_disk(chain):
    assert chain["driver_on_head"]
    assert sorted(p.name for p in chain["driver_dir"].iterdir()) == ["eval.jsonl"]


def test_every_stage_runs_on_the_dump_sample(chain):
    summary, run = chain["summary"], chain["run"]
    assert summary["corpus"]["pages"] == 106 and summary["corpus"]["pairs_written"] > 4000
    assert summary["pretrain"]["dev_pages"] == 5 and summary["pretrain"]["steps"] == 2
    pretrain = summary["pretrain"]
    # round 1 starts from the pretrained model only if it beat the untrained one on the dev pages
    assert pretrain["used"] == (pretrain["dev_after"]["map@3"] > pretrain["dev_before"]["map@3"])
    started_from = storage.read_json(f"{run}/round_1/done.json")["settings"]["from"]
    assert started_from == (pretrain["model"] if pretrain["used"] else chain["model"])
    assert summary["pool_rows"] == 106
    # encoder.max_length=auto, settled on the pages the corpus stage wrote to the bucket: long pages ask for 512
    # tokens, which the tiny model's 128 positions lower
    read = summary["read_tokens"]
    assert read["asked"] == "auto" and read["median_tokens"] > 128 and read["tokens"] == 128
    assert read["texts_measured"] == 106 and "reading 128 tokens of each text" in chain["out"]
    assert [r["round"] for r in summary["rounds"]] == [1, 2]
    assert summary["rounds"][-1]["model"] == f"{run}/round_2/model"
    schemes = [e["scheme"] for e in summary["evaluations"] if e["stage"] == "untrained"]
    assert schemes == ["labels only, 4 labels", "labels only, 4 labels as 5 strings", "prompt, 4 labels",
                       "prompt, 4 labels as 5 strings"]
    assert summary["final"]["accuracy"] == summary["rounds"][-1]["eval_accuracy"]
    assert storage.read_json(f"{run}/metrics.json")["chosen_round"] == 2
    out = chain["out"]
    assert "round 1" in out and "wcsbert" in out


def test_each_round_trains_on_its_pairs_and_reports_its_own_accuracy(chain):
    summary, run, config = chain["summary"], chain["run"], chain["config"]
    for record in summary["rounds"]:
        assert record["pairs"] > 0 and record["steps"] == 2
        assert sum(record["kept_per_label"].values()) == record["kept"] <= 106
        # the accuracy of this round's own model on the evaluation texts
        by_hand = _zero_shot_accuracy(record["model"], config, summary["read_tokens"]["tokens"])
        assert record["eval_accuracy"] == pytest.approx(by_hand, abs=1e-9)
        pairs = _table(f"{run}/round_{record['round']}/pairs").to_pylist()
        assert len(pairs) == record["pairs"]
        assert all(p["positive"].startswith("This topic is talk about ") for p in pairs)
        assert len({p["anchor"] for p in pairs}) == len(pairs)  # one label per category
    labels_1, labels_2 = (np.load(io.BytesIO(storage.read_bytes(f"{run}/round_{r}/pseudo_labels.npy")))
                          for r in (1, 2))
    assert summary["rounds"][0]["labels_changed"] is None  # nothing to compare round 1 with
    assert summary["rounds"][1]["labels_changed"] == pytest.approx(float(np.mean(labels_1 != labels_2)))


def test_the_outputs_are_on_the_bucket(chain):
    run = chain["run"]
    files = {f[len(run) + 1:] for f in storage.list_files(run, recursive=True)}
    for name in ("metrics.json", "manifest.json", "report.md", "plots/accuracy_per_round.png",
                 "plots/pairs_per_round.png", "plots/confusion_final.png", "corpus/done.json", "pretrain/done.json",
                 "pretrain/model/config.json", "round_0/embeddings/manifest.json", "round_1/pseudo_labels.npy",
                 "round_2/model/config.json", "round_2/embeddings/manifest.json", "eval_final.json",
                 # the kept round's evaluation texts, encoded once: the final evaluation reads them
                 "round_2/evaluation/eval_embeddings.npy"):
        assert name in files, name
    assert any(f.startswith("round_1/pairs/") and f.endswith(".parquet") for f in files)
    assert any(f.startswith("round_1/fit/") and f.endswith("history.jsonl") for f in files)
    assert "| round 2 |" in storage.read_text(f"{run}/report.md")


def test_a_second_run_skips_every_stage_and_one_more_round_runs_only_that_round(chain, capsys):
    config, summary = chain["config"], chain["summary"]
    capsys.readouterr()
    again = run_wcsbert(config)  # done-markers on the bucket: every stage is skipped
    out = capsys.readouterr().out
    for stage in STAGES:
        assert f"{stage}: done in an earlier run" in out
    assert again["rounds"] == summary["rounds"] and again["pretrain"] == summary["pretrain"]
    assert again["timings_s"]["rounds"] < summary["timings_s"]["rounds"]

    more = run_wcsbert(config.model_copy(update={"rounds": config.rounds.model_copy(update={"rounds": 3})}))
    out = capsys.readouterr().out
    assert "round 1: done in an earlier run" in out and "round 3: done" not in out
    assert more["rounds"][:2] == summary["rounds"] and more["rounds"][2]["round"] == 3
