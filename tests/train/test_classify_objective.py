"""The classify objective of the shared loop: config checks, rows, head in checkpoints, resume, 2 workers."""

import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from contrastext.config import (ClassifierConfig, EncoderConfig, LossConfig, OutputConfig, ScalingSettings,
                                TrainConfig)
from contrastext.models.classifier import TextClassifier
from contrastext.train import build_objective, fit
from contrastext.train.batches import SkippedRows
from contrastext.train.objectives import ClassificationObjective, classification_rows

TOPICS = ["physics", "football", "opera", "banking", "volcanoes"]


def _rows(per_label: dict[int, int]) -> list[dict]:
    return [{"text": f"{TOPICS[label]} note number {i}", "label": label}
            for label, n in per_label.items() for i in range(n)]


def _config(encoder_dir: Path, **overrides) -> TrainConfig:
    base = dict(objective="classify", loss=LossConfig(name="focal_supcon", params={"ntxent_weight": 1.0}),
                encoder=EncoderConfig(model=str(encoder_dir), max_length=16), columns=("text", "label"),
                classifier=ClassifierConfig(num_labels=5, samples_per_class=2), batch_size=4,
                checkpoint_every_steps=None, log_every_steps=1)
    return TrainConfig(**{**base, **overrides})


def test_config_checks_loss_and_batch_size():
    with pytest.raises(ValidationError, match="does not suit objective"):
        TrainConfig(objective="classify", loss=LossConfig(name="mnr"))
    with pytest.raises(ValidationError, match="does not suit objective"):
        TrainConfig(loss=LossConfig(name="focal"))
    with pytest.raises(ValidationError, match="multiple of"):
        TrainConfig(objective="classify", loss=LossConfig(name="focal"), batch_size=10,
                    classifier=ClassifierConfig(samples_per_class=4))
    with pytest.raises(ValueError, match="num_labels"):
        build_objective(TrainConfig(objective="classify", loss=LossConfig(name="focal")))


def test_rows_are_validated_counted_and_sorted():
    skipped = SkippedRows()
    batches = [{"text": np.array(["b text", "", "a text", "c text", "d text", "e text"], dtype=object),
                "label": np.array([1, 0, 1, 7, "x", 0], dtype=object)}]
    rows = classification_rows(batches, "text", "label", 3, skipped)
    assert rows == [("e text", 0), ("a text", 1), ("b text", 1)]
    assert skipped.reasons == {"empty or non-text text": 1, "label not an integer in [0, 3)": 2}
    with pytest.raises(KeyError, match="train.columns"):
        classification_rows([{"sentence": np.array(["x"])}], "text", "label", 3, SkippedRows())


def test_resume_restores_the_saved_head_even_when_reset_was_asked(tiny_encoder_dir, tmp_path):
    torch.manual_seed(3)
    saved = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=5).save(tmp_path / "ckpt")
    head = TextClassifier.load(saved).head.weight.detach().clone()
    config = _config(tiny_encoder_dir, classifier=ClassifierConfig(num_labels=5, samples_per_class=2,
                                                                   reset_head=True))
    torch.manual_seed(4)
    resumed = build_objective(config).build_model(str(saved), resuming=True)
    torch.testing.assert_close(resumed.head.weight, head)
    torch.manual_seed(4)
    fresh = build_objective(config).build_model(str(saved), resuming=False)
    assert not torch.allclose(fresh.head.weight, head)


def test_frozen_encoder_gives_the_optimiser_only_the_head(tiny_encoder_dir):
    config = _config(tiny_encoder_dir, classifier=ClassifierConfig(num_labels=5, samples_per_class=2,
                                                                   freeze_encoder=True, head_lr=0.01))
    objective = build_objective(config)
    model = objective.build_model(str(tiny_encoder_dir), resuming=False)
    groups = objective.param_groups(model)
    assert len(groups) == 1 and groups[0]["lr"] == 0.01
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in model.head.parameters()}


@pytest.mark.ray
@pytest.mark.slow
def test_fit_trains_head_and_encoder_and_resumes_from_a_checkpoint_with_its_head(ray_session, tiny_encoder_dir,
                                                                                  tmp_path):
    import ray.data

    rows = _rows({0: 6, 1: 6, 2: 4, 3: 4, 4: 4}) + [{"text": "", "label": 1}, {"text": "bad label", "label": 9}]
    config = _config(tiny_encoder_dir, max_steps=3, checkpoint_every_steps=2, keep_checkpoints=4)
    output = OutputConfig(storage_path=str(tmp_path), name="clf")
    first = fit(ray.data.from_items(rows), config, output)
    assert first.steps == 3
    assert first.metrics["rows_skipped"] == 2
    assert first.metrics["skipped_reasons"] == {"empty or non-text text": 1, "label not an integer in [0, 5)": 1}
    checkpoint_model = tmp_path / "clf" / "checkpoint_step000000003" / "model"
    assert TextClassifier.has_head(checkpoint_model)
    head_at_step_3 = TextClassifier.load(checkpoint_model).head.weight.detach().clone()

    # 24 good rows in 12 groups of 2 -> 6 batches of 4 per epoch; the second run goes on from step 3
    longer = config.model_copy(update={"max_steps": None, "epochs": 2})
    second = fit(ray.data.from_items(rows), longer, output, export_model_to=tmp_path / "model")
    assert second.metrics["resumed_from_step"] == 3 and second.steps == 12
    trained = TextClassifier.load(second.model_path)
    start = TextClassifier.from_pretrained(tiny_encoder_dir, num_labels=5)
    assert trained.num_labels == 5
    assert not torch.allclose(trained.head.weight, head_at_step_3)
    # every step is checkpointed once, epoch ends included (step 6 ends epoch 0 and is a multiple of 2)
    kept = sorted(p.name for p in (tmp_path / "clf").glob("checkpoint_step*"))
    assert kept == [f"checkpoint_step{s:09d}" for s in (6, 8, 10, 12)]
    texts = ["physics note number 1", "opera"]
    assert not np.allclose(trained.encoder.encode(texts), start.encoder.encode(texts))


def _record_batches_loop(loop_config: dict) -> None:
    """A Ray Train worker that only runs the objective's batching for two epochs and writes what it got."""
    import ray.train

    config = TrainConfig.model_validate(loop_config["train"])
    context = ray.train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    objective = build_objective(config)
    shard = ray.train.get_dataset_shard("train")
    epochs = [list(objective.batches(shard, epoch, rank, world, SkippedRows())) for epoch in range(2)]
    Path(loop_config["out"], f"rank{rank}.json").write_text(json.dumps(epochs))


@pytest.mark.ray
@pytest.mark.slow
def test_two_workers_get_disjoint_balanced_batches_covering_every_row(ray_session, tiny_encoder_dir, tmp_path):
    """The real objective's batching inside a 2-worker Ray Train run, with the dataset config fit uses."""
    import ray.cloudpickle
    import ray.data
    import ray.train
    from ray.train.torch import TorchTrainer

    from contrastext.train.fit import data_config

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    counts = {0: 8, 1: 8, 2: 8, 3: 6, 4: 10}
    rows = _rows(counts)
    config = _config(tiny_encoder_dir, batch_size=8, classifier=ClassifierConfig(num_labels=5, samples_per_class=4),
                     scaling=ScalingSettings(num_workers=2))
    objective = build_objective(config)
    assert isinstance(objective, ClassificationObjective) and not objective.split_dataset
    trainer = TorchTrainer(
        _record_batches_loop, train_loop_config={"train": config.model_dump(mode="json"), "out": str(tmp_path)},
        scaling_config=ray.train.ScalingConfig(num_workers=2),
        run_config=ray.train.RunConfig(name="dp", storage_path=str(tmp_path / "ray")),
        datasets={"train": ray.data.from_items(rows).repartition(4)}, dataset_config=data_config(objective))
    trainer.fit()
    per_rank = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    planned = objective.planned_steps(ray.data.from_items(rows), len(rows))
    for epoch in range(2):
        epoch_batches = [ranks[epoch] for ranks in per_rank]
        assert len(epoch_batches[0]) == len(epoch_batches[1]) == planned  # same step count on both workers
        trained = Counter(tuple(row) for batches in epoch_batches for batch in batches for row in batch)
        assert sorted(trained) == sorted((r["text"], r["label"]) for r in rows)  # every row ...
        assert set(trained.values()) == {1}  # ... exactly once, on one worker
        for batches in epoch_batches:
            for batch in batches:
                per_label = Counter(label for _, label in batch)
                # groups of k=4 same-label rows; a class of 6 or 10 rows gives one remainder group of 2
                assert all(n % 4 in (0, 2) for n in per_label.values())
    assert per_rank[0][0] != per_rank[0][1]  # reshuffled every epoch
