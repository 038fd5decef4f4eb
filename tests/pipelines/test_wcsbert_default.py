"""The job's embedded default end to end on a small slice: Vital articles (fetched when not beside the
project) as pool and evaluation halves, the 11 topics with aliases, the round guard; the tiny encoder."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from contrastext.config import load_config
from contrastext.data.sources import load_texts, vital_articles
from contrastext.data.vital import TOPICS
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.pipelines.wcsbert import run_wcsbert

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.integration]


def _config(tmp_path: Path, tiny_encoder_dir: Path, *more: str) -> WCSBertConfig:
    return load_config(WCSBertConfig, overrides=[
        f"encoder.model={tiny_encoder_dir}", f"output.storage_path={tmp_path / 'runs'}", "pool.max_rows=80",
        "evaluation.max_rows=60", "pretrain.train.max_steps=2", "pretrain.train.batch_size=16",
        "rounds.train.max_steps=2", "rounds.train.batch_size=8", "rounds.patience=2", "rounds.min_change=0",
        "encode.batch_size=16", *more])


def test_the_default_self_trains_on_one_half_evaluates_on_the_other_and_guards_its_rounds(
        ray_session, tiny_encoder_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CONTRASTEXT_BACKEND")  # the real default: auto, so each round's model is exported
    summary = run_wcsbert(_config(tmp_path, tiny_encoder_dir))
    run = tmp_path / "runs" / "wcsbert"
    assert summary["labels"] == TOPICS and summary["pool_rows"] == 80
    assert summary["evaluation_set"].startswith("vital_articles, second half (seed 0), 60 rows")
    # each baseline once: the template is the label itself, so "prompt" would repeat "labels only"
    assert [e["scheme"] for e in summary["evaluations"] if e["stage"] == "untrained"] == [
        "labels only, 11 labels", "labels only, 11 labels as 44 strings"]
    # the pretrained model is used only if its dev MAP@3 beat the untrained model's
    pretrain = summary["pretrain"]
    assert pretrain["used"] == (pretrain["dev_after"]["map@3"] > pretrain["dev_before"]["map@3"])
    # the guard scored the round-0 model and every round; the kept round is the best of them
    guards = [summary["guard_round_0"], *[r["guard"] for r in summary["rounds"]]]
    parts = [summary["guard_round_0_parts"], *summary["rounds"]]
    assert len(guards) == 3
    # a plain-text pool: each round also trains on pairs of kept texts sharing a pseudo-label (the default)
    assert all(r["text_pairs"] > 0 for r in summary["rounds"])
    # auto on a CPU with VNNI: each round's new model exported before it encoded; int8 where its check
    # passed, else torch (one line said why)
    from contrastext.models.onnx_backend import int8_cpu_reason

    assert summary["backend"] == "auto" and summary["final"]["backend"] in ("onnx-int8", "torch")
    assert all((r["seconds"]["export"] > 0) == (int8_cpu_reason() is None) for r in summary["rounds"])
    for guard, part in zip(guards, parts):  # kappa times the share of the 11 labels still anchored
        assert guard == pytest.approx(part["guard_kappa"] * part["guard_anchored"])
        assert round(part["guard_anchored"] * 11) == pytest.approx(part["guard_anchored"] * 11)
    assert summary["chosen_round"] == max(range(3), key=lambda r: (guards[r], -r))
    # each model scored with the three heads, the prompts' score its guard; a trained round is delivered with
    # the blend, the round-0 model with its prototypes where they are clearly better, else with its prompts
    from contrastext.methods.wcsbert.guard import PROTOTYPE_MARGIN

    for r, part in enumerate(parts):
        heads = part["guard_heads"]
        assert part["guard"] == heads["prompts"] and set(heads) == {"prompts", "prototypes", "blend"}
        assert part["head"] == ("blend" if r else "prototypes" if heads["prototypes"] > heads["prompts"] +
                                PROTOTYPE_MARGIN else "prompts")
    assert summary["chosen_head"] == parts[summary["chosen_round"]]["head"]
    assert summary["final"]["delivered"]["head"] == summary["chosen_head"]
    assert summary["final_model"] == (summary["rounds"][summary["chosen_round"] - 1]["model"]
                                      if summary["chosen_round"] else summary["pretrain"]["model"]
                                      if pretrain["used"] else str(tiny_encoder_dir))
    # the pool is the first half's texts only; labels never read
    pool = pq.read_table(run / "pool" / "pages.parquet").column("text").to_pylist()
    _, second = load_texts(vital_articles()).split_halves(0)
    assert len(pool) == 80 and not set(pool) & set(second.texts)
    assert "guard" in capsys.readouterr().out
    assert json.loads((run / "metrics.json").read_text())["chosen_round"] == summary["chosen_round"]

    # the kept model is delivered as a WCSBert folder, and `predict` labels a corpus with it as the class does
    from contrastext import WCSBert
    from contrastext.pipelines.predict import run_predict
    from contrastext.predict.config import PredictConfig

    assert summary["delivered"] == str(run / "final" / "model")
    delivered = WCSBert.load(summary["delivered"])
    assert delivered.head.kind == delivered.chosen_head_ == summary["chosen_head"]
    assert delivered.labels == TOPICS and (run / "final" / "model" / "head_vectors.npy").is_file()
    labelled = run_predict(PredictConfig(model=summary["delivered"], input={"path": str(run / "pool" / "pages.parquet"), "id_column": "page_id"},
                                         output={"storage_path": str(tmp_path / "predicted"), "name": "pool"}))
    table = pq.read_table(tmp_path / "predicted" / "pool" / "predictions")
    got = dict(zip(table.column("id").to_pylist(), table.column("label").to_pylist()))
    pages = pq.read_table(run / "pool" / "pages.parquet").to_pylist()
    assert labelled["rows_out"] == len(got) == 80
    assert labelled["backend"] == "auto" and sum(labelled["backend_rows"].values()) == 80
    delivered.encoder_.set_backend("auto")  # the same export (cached by its weights), so the same embeddings
    assert [got[str(p["page_id"])] for p in pages] == delivered.predict([p["text"] for p in pages])


def test_a_pool_too_small_for_the_labels_is_refused_before_training(ray_session, tiny_encoder_dir, tmp_path):
    with pytest.raises(ValueError, match="the pool has 30 texts for 11 labels: self-training needs at least 55"):
        run_wcsbert(_config(tmp_path, tiny_encoder_dir, "pool.max_rows=30"))
    assert not (tmp_path / "runs" / "wcsbert" / "round_0").exists()


def test_with_no_round_the_guard_still_chooses_the_head_delivered(ray_session, tiny_encoder_dir, tmp_path):
    from contrastext import WCSBert
    from contrastext.methods.wcsbert.guard import PROTOTYPE_MARGIN

    summary = run_wcsbert(_config(tmp_path, tiny_encoder_dir, "rounds.rounds=0", "pretrain.enabled=false"))
    assert summary["rounds"] == [] and summary["chosen_round"] == 0
    heads = summary["guard_round_0_parts"]["guard_heads"]
    assert set(heads) == {"prompts", "prototypes", "blend"} and summary["guard_round_0"] == heads["prompts"]
    assert summary["chosen_head"] == ("prototypes" if heads["prototypes"] > heads["prompts"] + PROTOTYPE_MARGIN
                                      else "prompts")
    delivered = WCSBert.load(summary["delivered"])
    assert delivered.head.kind == summary["chosen_head"] == summary["final"]["delivered"]["head"]
