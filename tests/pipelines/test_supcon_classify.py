"""The supcon_classify job end to end: tiny encoder on a small file; bundled MiniLM on real 20 Newsgroups."""

import gzip
import json

import pytest

from contrastext.config import ClassifierConfig, EncoderConfig, LossConfig, OutputConfig, TrainConfig
from contrastext.metrics.classification import embedding_silhouette
from contrastext.models import TextEncoder
from contrastext.models.classifier import TextClassifier
from contrastext.methods.supcon.config import LabelledTextData, SupconClassifyConfig, VariantConfig
from contrastext.methods.supcon.settings import ClassifyLoss
from contrastext.pipelines.supcon_classify import load_labelled_data, run_supcon_classify
from conftest import shared_data

pytestmark = [pytest.mark.ray, pytest.mark.slow]

WORDS = {"sci.space": "orbit rocket launch", "rec.autos": "engine wheel brake",
         "talk.misc": "opinion debate vote", "misc.forsale": "price offer shipping"}


def _data(tmp_path) -> LabelledTextData:
    for split, n in (("train", 8), ("test", 3)):
        with gzip.open(tmp_path / f"{split}.jsonl.gz", "wt") as f:
            for label, words in WORDS.items():
                for i in range(n):
                    f.write(json.dumps({"label": label, "text": f"Subject: {i}\n\n{words} {split} {i}"}) + "\n")
    return LabelledTextData(root=str(tmp_path), train_file="train.jsonl.gz", test_file="test.jsonl.gz",
                            null_groups=["talk.misc", "misc.forsale"])


def _train(model: str, max_length: int, lr: float = 2e-5) -> TrainConfig:
    return TrainConfig(objective="classify", loss=LossConfig(name="focal"), batch_size=8, optimizer={"lr": lr},
                       encoder=EncoderConfig(model=model, pooling="mean", normalize=False, max_length=max_length),
                       classifier=ClassifierConfig(samples_per_class=4, head_lr=0.05),
                       checkpoint_every_steps=None, log_every_steps=2)


def test_two_phase_job_writes_comparison_report_plots_and_skips_finished_variants(ray_session, tiny_encoder_dir,
                                                                                   tmp_path, capsys):
    # A random-weight encoder needs a far higher rate than a pretrained one (2e-5 barely moves it) and the
    # head needs steps: the balanced batches hold 'other' (two groups) twice as often as each named label,
    # so an undertrained head calls every test row 'other' (accuracy 0.5, as 4 steps at 2e-5 did; 8 steps at
    # 1e-3 reached 0.5 / 0.75; 16 steps at 1e-3 got 9 to 12 of the 12 test rows right from run to run, since
    # the first warm-up step trains at rate 0 and CPU float sums vary; 32 steps get at least 11).
    config = SupconClassifyConfig(
        data=_data(tmp_path),
        variants=[VariantConfig(name="focal_ntxent", loss=ClassifyLoss(ntxent_weight=1.0), epochs=8),
                  VariantConfig(name="then_head", start_from="focal_ntxent", freeze_encoder=True,
                                reset_head=True, epochs=8)],
        train=_train(str(tiny_encoder_dir), 16, lr=1e-3), tsne_rows=10,
        output=OutputConfig(storage_path=str(tmp_path / "runs"), name="job"))
    comparison = run_supcon_classify(config)

    run_dir = tmp_path / "runs" / "job"
    assert comparison["data"]["labels"] == ["rec.autos", "sci.space", "other"]
    assert comparison["data"]["train_label_counts"] == {"rec.autos": 8, "sci.space": 8, "other": 16}
    first, second = comparison["variants"]["focal_ntxent"], comparison["variants"]["then_head"]
    assert first["steps"] == second["steps"] == 32  # 32 rows in batches of 8, 8 epochs each
    data = load_labelled_data(config.data)
    untrained = TextEncoder.from_pretrained(str(tiny_encoder_dir), max_length=16).encode(data.test.texts)
    untrained_silhouette = embedding_silhouette(untrained, data.test.labels)  # 0.32 on this seed
    for metrics in (first, second):
        assert metrics["rows"] == 12 and metrics["null_label"] == "other"
        # each label has its own keywords: at most one test row wrong (majority 'other' alone scores 0.5)
        assert metrics["accuracy"] >= 11 / 12 and metrics["macro_f1"] >= 0.9, metrics
        # supervised NT-Xent pulled same-label rows together (0.63 against 0.32 before training)
        assert metrics["silhouette"] > untrained_silhouette + 0.2, (metrics["silhouette"], untrained_silhouette)
        assert set(metrics["per_class_auprc"]) == {"rec.autos", "sci.space", "other"}
    # phase 2 keeps phase 1's encoder: same embeddings, hence the same silhouette; only the head differs
    assert second["silhouette"] == pytest.approx(first["silhouette"], abs=1e-5)
    phase1 = TextClassifier.load(run_dir / "focal_ntxent" / "model")
    phase2 = TextClassifier.load(run_dir / "then_head" / "model")
    texts = ["orbit rocket", "engine brake"]
    assert phase1.predict(texts).embeddings == pytest.approx(phase2.predict(texts).embeddings, abs=1e-5)
    assert not (phase1.head.weight == phase2.head.weight).all()
    assert (run_dir / "plots" / "tsne_then_head.png").stat().st_size > 1000
    assert comparison["best"] == "focal_ntxent"  # a tie on macro-F1 and AUPRC goes to the first variant
    saved = json.loads((run_dir / "comparison.json").read_text())
    assert saved["variants"]["then_head"]["macro_f1"] == pytest.approx(second["macro_f1"])
    assert "| then_head |" in (run_dir / "report.md").read_text()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["job"] == "supcon_classify" and manifest["counts"]["train_rows"] == 32
    assert "best by macro-F1" in capsys.readouterr().out

    again = run_supcon_classify(config)
    out = capsys.readouterr().out
    assert out.count("done in an earlier run with these settings, skipped") == 2 and "training" not in out
    assert again["variants"]["then_head"]["macro_f1"] == pytest.approx(second["macro_f1"])
    # a variant that starts from another one is made with that one's settings too
    markers = {name: json.loads((run_dir / name / "done.json").read_text()) for name in ("focal_ntxent", "then_head")}
    assert markers["then_head"]["settings"]["start_from"] == markers["focal_ntxent"]["settings"]
    # another setting of the second variant: it alone is trained again, from scratch, and its results replaced
    shorter = config.model_copy(update={"variants": [config.variants[0], config.variants[1].model_copy(
        update={"epochs": 4})]})
    changed = run_supcon_classify(shorter)
    out = capsys.readouterr().out
    assert "focal_ntxent: done in an earlier run" in out and "then_head: training" in out
    assert "then_head was made with other settings (train.epochs)" in out
    assert changed["variants"]["focal_ntxent"]["steps"] == 32 and changed["variants"]["then_head"]["steps"] == 16
    assert json.loads((run_dir / "then_head" / "metrics.json").read_text())["steps"] == 16


@pytest.mark.integration
def test_bundled_minilm_on_real_20_newsgroups(ray_session, tmp_path):
    path = shared_data("20newsgroups/20ng_bydate_train.jsonl.gz")
    config = SupconClassifyConfig(
        data=LabelledTextData(root=str(path.parents[1]), train_per_class=4, test_per_class=3),
        variants=[VariantConfig(name="focal_ntxent", loss=ClassifyLoss(ntxent_weight=1.0), epochs=2)],
        train=_train("bundled:minilm", 32).model_copy(update={"batch_size": 16}), tsne=False,
        output=OutputConfig(storage_path=str(tmp_path), name="20ng"))
    comparison = run_supcon_classify(config)
    metrics = comparison["variants"]["focal_ntxent"]
    assert len(comparison["data"]["labels"]) == 20 and metrics["rows"] == 60
    assert metrics["steps"] == 10  # 80 rows, 20 groups of 4, batches of 16, 2 epochs
    # ten steps on 80 rows lift the new head well above chance (0.05 for 20 labels): 12 of 60 right, measured
    # twice (the messages cleaned as `cleaning: newsgroups` does); three test texts per group do not yet form
    # clusters (silhouette about 0)
    assert metrics["accuracy"] == pytest.approx(12 / 60, abs=0.05)
    assert metrics["auprc"] == pytest.approx(0.372, abs=0.05)
    assert metrics["silhouette"] == pytest.approx(-0.038, abs=0.03)
