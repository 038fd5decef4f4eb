"""The CCL record on the docs page is generated from the benchmark's JSON, and holds the shipped settings only."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import uctopic_entities  # noqa: E402


def test_the_page_is_the_record_rendered():
    record = json.loads(uctopic_entities.RECORD.read_text(encoding="utf-8"))
    assert uctopic_entities.PAGE.read_text(encoding="utf-8") == uctopic_entities.render_page(record)


def _row(nmis: list[float], losses: tuple = (None, 0.3, 0.2)) -> dict:
    return {"set": "conll_test", "seed": 0, "k": 3, "instances": 2000,
            "untrained_in_context": {"nmi": 0.3, "acc": 0.7},
            "epochs": [{"epoch": i, "gold_nmi": nmi, "gold_acc": 0.7, "loss": losses[i], "silhouette": 0.1 * i,
                        "anchored_silhouette": 0.1 * i, "start_agreement": 1.0} for i, nmi in enumerate(nmis)]}


def test_the_best_epoch_is_marked_and_each_rule_reads_its_own_epoch():
    page = uctopic_entities.render_page({"epochs": 2, "rows": [_row([0.38, 0.42, 0.40])]})
    line = ("| conll_test | 0 | 3 | 0.300 / 0.700 | 0.380 / 0.700 | **0.420** / 0.700 | 0.400 / 0.700 | "
            "0.400 (epoch 2) |")
    assert line in page
    assert "| the start model (no CCL) | 0.040 | 0.040 | 0.040 | +0.000 | +0.000 | +0.080 |" in page
    assert "| epoch 1 | 0.000 | 0.000 | 0.000 | +0.040 | +0.040 | +0.120 |" in page
    assert "| `anchored_silhouette` over every epoch | 0.020 | 0.020 | 0.020 | +0.020 | +0.020 | +0.100 |" in page
    second_draw = {**_row([0.40, 0.38, 0.36]), "seed": 1}
    page = uctopic_entities.render_page({"epochs": 2, "rows": [_row([0.38, 0.42, 0.40]), second_draw]})
    assert "| the start model (no CCL) | 0.040 | 0.000 | 0.020 | 0.040 | +0.000 | +0.000 | +0.090 |" in page


def test_the_shipped_rule_stops_before_a_fit_with_nothing_left_to_learn():
    from contrastext.methods.uctopic.config import FinetuneSettings

    assert FinetuneSettings().min_loss == 0.01
    learned_nothing = _row([0.38, 0.42, 0.40], losses=(None, 0.3, 0.001))
    assert uctopic_entities.shipped_choice(learned_nothing["epochs"])["epoch"] == 1
    assert uctopic_entities.shipped_choice(_row([0.38, 0.42, 0.40])["epochs"])["epoch"] == 2
    first_fit_learned_nothing = _row([0.38, 0.42, 0.40], losses=(None, 0.005, 0.001))
    assert uctopic_entities.shipped_choice(first_fit_learned_nothing["epochs"])["epoch"] == 0
    page = uctopic_entities.render_page({"epochs": 2, "rows": [learned_nothing]})
    assert "| 0.420 (epoch 1) |" in page
    assert "| **shipped**: stop at a fit with nothing left to learn, then `anchored_silhouette` | 0.000 | 0.000 |" \
        in page


def test_a_run_with_other_settings_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(uctopic_entities, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(uctopic_entities, "PAGE", tmp_path / "page.md")
    run = {"settings": [], "model": "bundled:minilm", "max_instances": 2000, "epochs": 3, "results": []}
    for other in ({"settings": ["finetune.positives=mention"]}, {"model": "runs/pretrained"}, {"epochs": 2},
                  {"max_instances": 500}):
        with pytest.raises(SystemExit, match="shipped settings"):
            uctopic_entities.add_to_record([{**run, **other}])
    assert not (tmp_path / "record.json").exists()


def test_a_set_run_again_replaces_its_row_and_other_sets_stay(tmp_path, monkeypatch):
    monkeypatch.setattr(uctopic_entities, "RECORD", tmp_path / "record.json")
    monkeypatch.setattr(uctopic_entities, "PAGE", tmp_path / "page.md")

    def run(name: str, nmi: float) -> dict:
        epochs = [{**epoch, "model": "/tmp/x"} for epoch in _row([0.3, nmi])["epochs"]]
        result = {"set": name, "seed": 0, "k": 3, "instances": 2000, "select_by": "anchored_silhouette",
                  "untrained_in_context": {"nmi": 0.2, "acc": 0.6}, "epochs": epochs,
                  "picks": {"delivered": {"epoch": 1}}}
        return {"settings": [], "model": "bundled:minilm", "max_instances": 2000, "epochs": 3, "results": [result]}

    uctopic_entities.add_to_record([run("conll_dev", 0.5), run("conll_test", 0.4)])
    record = uctopic_entities.add_to_record([run("conll_test", 0.45)])
    assert [(row["set"], row["epochs"][1]["gold_nmi"]) for row in record["rows"]] == [("conll_test", 0.45),
                                                                                     ("conll_dev", 0.5)]
    assert "model" not in record["rows"][0]["epochs"][0]
    assert (tmp_path / "page.md").read_text() == uctopic_entities.render_page(record)
