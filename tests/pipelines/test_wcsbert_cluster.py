"""The WC-SBERT chain on a cluster of several nodes, everything on object storage: a head with no CPUs runs
the driver, two worker nodes run every task, and no input is read from the driver's disk by a worker
(the model and the dump are on the bucket; the evaluation set is read by the driver alone)."""

import json

import pytest

from contrastext import storage
from contrastext.config import load_config
from contrastext.data.samples import find_dump_sample
from contrastext.pipelines.wcsbert import run_wcsbert
from contrastext.selftrain.config import WCSBertConfig

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.multinode]

NEWS = [("Sports", "the team won the football match and the cup final"),
        ("Business", "shares fell as the company reported lower profits and sales"),
        ("World", "the president met foreign ministers to discuss the war and peace talks"),
        ("Sci/Tech", "a space probe sent back images of the planet to scientists")]


def test_wcsbert_chain_on_several_nodes_with_outputs_on_s3(fresh_cluster, s3_bucket, tiny_encoder_dir, tmp_path,
                                                            monkeypatch, capsys):
    import ray

    monkeypatch.chdir(tmp_path)
    model = storage.copy_tree(tiny_encoder_dir, s3_bucket + "/models/tiny")
    dump = storage.upload_file(find_dump_sample(), s3_bucket + "/input/dump.xml.bz2")
    evaluation = tmp_path / "eval.jsonl"
    evaluation.write_text("".join(json.dumps({"text": f"{t} ({i})", "label": label}) + "\n"
                                  for i in range(3) for label, t in NEWS), encoding="utf-8")
    config = load_config(WCSBertConfig, overrides=[
        "labels.names=[World, Sports, Business, Sci/Tech]", "labels.aliases={Sci/Tech: [Science, Technology]}",
        "pool.source=wikipedia", "evaluation.half=null", "rounds.guard=false", f"encoder.model={model}", f"output.storage_path={s3_bucket}/runs", "output.name=wcsbert",
        f"corpus.dump={dump}", "pretrain.train.max_steps=2", "pretrain.train.batch_size=16",
        "pretrain.dev_min_pages=5", "rounds.rounds=2", "rounds.min_change=0", "rounds.train.max_steps=2",
        "rounds.train.batch_size=8", "rounds.selection.top_fraction=0.8", "encode.batch_size=16",
        "evaluation.max_rows=null", f"evaluation.texts.path={evaluation}", "evaluation.texts.dataset=null", "evaluation.texts.columns=null",
        "evaluation.texts.text_columns=[text]", "evaluation.texts.label_column=label",
        "evaluation.texts.label_names=null", "evaluation.texts.unescape_breaks=false", "plots=true"])
    heads = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) == 0]
    assert len(heads) == 1 and ray.get_runtime_context().get_node_id() == heads[0]["NodeID"]

    summary = run_wcsbert(config)
    run = f"{s3_bucket}/runs/wcsbert"
    assert summary["corpus"]["pages"] == 106 and summary["pool_rows"] == 106
    assert [r["round"] for r in summary["rounds"]] == [1, 2] and all(r["steps"] == 2 for r in summary["rounds"])
    assert summary["rounds"][-1]["model"] == f"{run}/round_2/model"
    files = {f[len(run) + 1:] for f in storage.list_files(run, recursive=True)}
    for name in ("metrics.json", "manifest.json", "report.md", "plots/confusion_final.png", "corpus/done.json",
                 "pretrain/done.json", "pretrain/model/config.json", "round_0/embeddings/manifest.json",
                 "round_1/pseudo_labels.npy", "round_2/model/config.json",
                 "round_2/embeddings/manifest.json", "eval_final.json"):
        assert name in files, name
    assert any(f.startswith("round_1/pairs/") and f.endswith(".parquet") for f in files)
    assert any(f.startswith("round_1/fit/") and f.endswith("history.jsonl") or f == "round_1/fit/history.jsonl"
               for f in files)
    assert storage.read_json(f"{run}/metrics.json")["chosen_round"] == 2
    assert not list(tmp_path.glob("runs*"))  # nothing written to the driver's disk

    capsys.readouterr()
    again = run_wcsbert(config)  # done-markers on the bucket: every stage is skipped
    out = capsys.readouterr().out
    for stage in ("corpus", "pretrain", "round 1", "round 2"):
        assert f"{stage}: done in an earlier run" in out
    assert again["rounds"] == summary["rounds"]
