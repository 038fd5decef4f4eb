"""The WC-SBERT job on a local Ray with the tiny random encoder: every stage on the real dump sample,
a second run that skips every finished stage, and a plain-text pool split in halves."""

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from contrastext.config import load_config
from contrastext.data.sources import TextSource, load_texts
from contrastext.data.samples import DEFAULT_SAMPLE
from contrastext.models import TextEncoder
from contrastext.pipelines.wcsbert import run_wcsbert
from contrastext.selftrain.config import WCSBertConfig
from conftest import wikipedia_sample

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NEWS = [("Sports", "the team won the football match and the cup final"),
        ("Sports", "a tennis player reached the final of the open championship"),
        ("Business", "shares fell as the company reported lower profits and sales"),
        ("Business", "the bank raised interest rates and the market dropped"),
        ("World", "the president met foreign ministers to discuss the war and peace talks"),
        ("World", "elections were held after the government collapsed in the capital"),
        ("Sci/Tech", "researchers released new software for faster computer chips"),
        ("Sci/Tech", "a space probe sent back images of the planet to scientists")]


# the news labels of the texts above, in place of the default's Vital-article topics
NEWS_LABELS = ["labels.names=[World, Sports, Business, Sci/Tech]", "labels.aliases={Sci/Tech: [Science, Technology]}",
               "labels.template=This topic is talk about {label}"]


def _labelled_file(path: Path, copies: int = 3) -> Path:
    rows = [{"text": f"{text} (report {i})", "label": label} for i in range(copies) for label, text in NEWS]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _encoder(model: str, config: WCSBertConfig) -> TextEncoder:
    return config.encoder.load(model)


def _zero_shot_accuracy(model: str, config: WCSBertConfig) -> float:
    """The evaluation recomputed by hand: every NEWS text against the prompts of NEWS_LABELS (Sci/Tech through
    its two aliases, not its own name), best cosine wins."""
    prompts = {"World": ["World"], "Sports": ["Sports"], "Business": ["Business"],
               "Sci/Tech": ["Science", "Technology"]}
    rows = [(f"{text} (report {i})", label) for i in range(3) for label, text in NEWS]
    encoder = _encoder(model, config)
    texts = _unit(encoder.encode([text for text, _ in rows]))
    scores = np.stack([(texts @ _unit(encoder.encode([f"This topic is talk about {a}" for a in aliases])).T).max(1)
                       for aliases in prompts.values()], axis=1)
    predicted = [list(prompts)[i] for i in scores.argmax(axis=1)]
    return float(np.mean([p == label for p, (_, label) in zip(predicted, rows)]))


def _config(tmp_path: Path, tiny_encoder_dir: Path, **overrides) -> WCSBertConfig:
    sets = [*NEWS_LABELS, "pool.source=wikipedia", "evaluation.half=null",
            f"encoder.model={tiny_encoder_dir}", f"output.storage_path={tmp_path / 'runs'}",
            "output.name=wcsbert", f"corpus.dump={wikipedia_sample(DEFAULT_SAMPLE)}",
            "pretrain.train.max_steps=2", "pretrain.train.batch_size=16", "pretrain.dev_min_pages=5",
            "rounds.rounds=2", "rounds.train.max_steps=2", "rounds.train.batch_size=8",
            "rounds.selection.top_fraction=0.8", "encode.batch_size=16", "evaluation.max_rows=null",
            f"evaluation.texts.path={_labelled_file(tmp_path / 'eval.jsonl')}", "evaluation.texts.dataset=null",
            "evaluation.texts.columns=null",
            "evaluation.texts.text_columns=[text]", "evaluation.texts.label_column=label",
            "evaluation.texts.label_names=null", "evaluation.texts.unescape_breaks=false", "plots=true"]
    sets += [f"{k}={v}" for k, v in overrides.items()]
    return load_config(WCSBertConfig, overrides=sets)


def test_every_stage_runs_then_a_second_run_skips_them(ray_session, tiny_encoder_dir, tmp_path, capsys):
    config = _config(tmp_path, tiny_encoder_dir, **{"pretrain.use": "if_dev_improves", "rounds.min_change": "0",
                                                     "rounds.guard": "false"})
    summary = run_wcsbert(config)
    run = tmp_path / "runs" / "wcsbert"
    assert summary["corpus"]["pages"] == 106 and summary["corpus"]["pairs_written"] > 4000
    assert summary["pretrain"]["dev_pages"] == 5 and summary["pretrain"]["steps"] == 2
    pretrain = summary["pretrain"]
    # round 1 starts from the pretrained model only if it beat the untrained one on the dev pages
    assert pretrain["used"] == (pretrain["dev_after"]["map@3"] > pretrain["dev_before"]["map@3"])
    started_from = json.loads((run / "round_1" / "done.json").read_text())["settings"]["from"]
    assert started_from == (pretrain["model"] if pretrain["used"] else str(tiny_encoder_dir))
    assert summary["pool_rows"] == 106
    assert [r["round"] for r in summary["rounds"]] == [1, 2]
    for record in summary["rounds"]:
        assert record["pairs"] > 0 and record["steps"] == 2
        assert sum(record["kept_per_label"].values()) == record["kept"] <= 106
        # the accuracy of this round's own model on the evaluation texts
        assert record["eval_accuracy"] == pytest.approx(_zero_shot_accuracy(record["model"], config), abs=1e-9)
        pairs = pq.read_table(run / f"round_{record['round']}" / "pairs").to_pylist()
        assert len(pairs) == record["pairs"]
        assert all(p["positive"].startswith("This topic is talk about ") for p in pairs)
        assert len({p["anchor"] for p in pairs}) == len(pairs)  # one label per category
    labels_1, labels_2 = (np.load(run / f"round_{r}" / "pseudo_labels.npy") for r in (1, 2))
    assert summary["rounds"][0]["labels_changed"] is None  # nothing to compare round 1 with
    assert summary["rounds"][1]["labels_changed"] == pytest.approx(float(np.mean(labels_1 != labels_2)))
    schemes = [e["scheme"] for e in summary["evaluations"] if e["stage"] == "untrained"]
    assert schemes == ["labels only, 4 labels", "labels only, 4 labels as 5 strings", "prompt, 4 labels",
                       "prompt, 4 labels as 5 strings"]
    assert summary["final"]["accuracy"] == summary["rounds"][-1]["eval_accuracy"]
    for name in ("metrics.json", "manifest.json", "report.md", "plots/accuracy_per_round.png",
                 "plots/pairs_per_round.png", "plots/confusion_final.png", "round_2/model/config.json"):
        assert (run / name).is_file(), name
    assert "| round 2 |" in (run / "report.md").read_text()
    out = capsys.readouterr().out
    assert "round 1" in out and "wcsbert" in out

    again = run_wcsbert(config)
    out = capsys.readouterr().out
    for stage in ("corpus", "pretrain", "round 1", "round 2"):
        assert f"{stage}: done in an earlier run" in out
    assert again["rounds"] == summary["rounds"] and again["pretrain"] == summary["pretrain"]
    assert again["timings_s"]["rounds"] < summary["timings_s"]["rounds"]

    # one more round: the finished rounds are kept, only round 3 runs
    more = run_wcsbert(config.model_copy(update={"rounds": config.rounds.model_copy(update={"rounds": 3})}))
    out = capsys.readouterr().out
    assert "round 1: done in an earlier run" in out and "round 3: done" not in out
    assert more["rounds"][:2] == summary["rounds"] and more["rounds"][2]["round"] == 3


def test_text_pool_trains_only_on_its_half(ray_session, tiny_encoder_dir, tmp_path):
    pool_file = _labelled_file(tmp_path / "pool.jsonl", copies=6)
    config = _config(tmp_path, tiny_encoder_dir, **{
        "pretrain.enabled": "false", "rounds.rounds": "1", "output.name": "texts", "pool.source": "texts",
        "pool.half": "first", "pool.split_seed": "0", "pool.texts": f"{{path: {pool_file}, label_column: label}}",
        "pool.max_rows": "null",
        "evaluation.half": "second", "evaluation.texts.path": str(pool_file), "evaluation.baselines": "false",
        "rounds.pseudo_labels": "prototypes", "evaluation.prototype_iterations": "3"})
    summary = run_wcsbert(config)
    assert summary["rounds"][0]["pseudo_labels"] == "prototypes"
    assert json.loads((tmp_path / "runs" / "texts" / "label_prototypes.json").read_text())["iterations"] == 3
    data = load_texts(TextSource(path=str(pool_file), label_column="label"))
    first, second = data.split_halves(0)
    # the final model's pool prototypes, as saved, classify the evaluation half with the reported accuracy
    prototypes = _unit(np.load(tmp_path / "runs" / "texts" / "label_prototypes.npy"))
    nearest = (_unit(_encoder(summary["final_model"], config).encode(second.texts)) @ prototypes.T).argmax(axis=1)
    by_prototypes = np.mean([config.labels.names[i] == label for i, label in zip(nearest, second.labels)])
    assert summary["final"]["prototypes"]["accuracy"] == pytest.approx(float(by_prototypes), abs=1e-9)
    assert summary["corpus"] is None and summary["pretrain"] is None
    assert summary["pool_rows"] == len(first) and f"{len(second)} rows" in summary["evaluation_set"]
    pairs = pq.read_table(tmp_path / "runs" / "texts" / "round_1" / "pairs").to_pylist()
    assert pairs and {p["anchor"] for p in pairs} <= set(first.texts)
    assert not {p["anchor"] for p in pairs} & set(second.texts)


def test_missing_evaluation_set_is_reported_not_fatal(tmp_path):
    from contrastext.pipelines.wcsbert import load_eval_set

    config = load_config(WCSBertConfig, overrides=[f"evaluation.texts.path={tmp_path / 'absent.csv'}"])
    eval_set, reason = load_eval_set(config, tmp_path)
    assert eval_set is None and "not found" in reason


def test_config_rejects_text_pool_without_texts_and_unknown_aliases():
    with pytest.raises(ValueError, match="pool.texts"):
        load_config(WCSBertConfig, overrides=["pool.source=texts", "pool.texts=null"])
    with pytest.raises(ValueError, match="not in names"):
        load_config(WCSBertConfig, overrides=["labels.aliases={Nope: [x]}"])
