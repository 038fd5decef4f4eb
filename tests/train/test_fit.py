"""The shared Ray Train fit on a tiny random encoder: 1 and 2 workers, checkpoints, malformed rows."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from contrastext.config import EncoderConfig, LossConfig, OptimizerConfig, OutputConfig, ScalingSettings, TrainConfig
from contrastext.models import TextEncoder
from contrastext.train import fit, planned_steps

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _pairs(n: int) -> list[dict]:
    topics = ["physics", "football", "opera", "banking", "volcanoes", "poetry", "surgery", "chess"]
    return [{"anchor": f"{topics[i % 8]} question {i}", "positive": f"about {topics[i % 8]} answer {i}"}
            for i in range(n)]


# 32 (anchor, positive) pairs of distinct two-word texts; an anchor shares no word with any positive, so
# only training can tie each anchor to its own positive
_COLOURS = ["red", "blue", "green", "yellow", "purple", "orange", "black", "white"]
_ANIMALS = ["fox", "horse", "eagle", "shark", "tiger", "rabbit", "whale", "spider"]
_CITIES = ["london", "paris", "tokyo", "cairo", "lima", "oslo", "delhi", "sydney"]
_INSTRUMENTS = ["piano", "violin", "guitar", "drum", "flute", "harp", "trumpet", "cello"]
MEMO_ANCHORS = [f"{_COLOURS[i % 8]} {_ANIMALS[(i // 8 + i) % 8]}" for i in range(32)]
MEMO_POSITIVES = [f"{_CITIES[i % 8]} {_INSTRUMENTS[(3 * (i // 8) + i) % 8]}" for i in range(32)]


def _cosines(encoder: TextEncoder, anchors: list[str], positives: list[str]) -> np.ndarray:
    a = encoder.encode(anchors)
    p = encoder.encode(positives)
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    p = p / np.linalg.norm(p, axis=1, keepdims=True)
    return a @ p.T


def retrieval_at_1(encoder: TextEncoder, anchors: list[str], positives: list[str]) -> float:
    """The share of anchors whose nearest positive (cosine) is their own."""
    return float(np.mean(_cosines(encoder, anchors, positives).argmax(axis=1) == np.arange(len(anchors))))


def set_mnr_loss(encoder: TextEncoder, anchors: list[str], positives: list[str], scale: float = 20.0) -> float:
    """MNR cross-entropy of each anchor against all the positives of the set (not one batch), no dropout."""
    logits = scale * _cosines(encoder, anchors, positives)
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-log_softmax.diagonal().mean())


def _config(encoder_dir: Path, **overrides) -> TrainConfig:
    base = dict(encoder=EncoderConfig(model=str(encoder_dir), max_length=32), batch_size=8, epochs=1,
                checkpoint_every_steps=None, log_every_steps=2, shuffle_buffer_rows=64)
    return TrainConfig(**{**base, **overrides})


def test_two_workers_train_with_shared_negatives_and_export_a_loadable_model(ray_session, tiny_encoder_dir,
                                                                                tmp_path):
    import ray.data

    rows = _pairs(64)
    config = _config(tiny_encoder_dir, scaling=ScalingSettings(num_workers=2), optimizer=OptimizerConfig(lr=1e-2),
                     loss=LossConfig(name="mnr", params={"scale": 20.0, "symmetric": True}))
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="two"),
                 export_model_to=tmp_path / "model")

    assert result.steps == planned_steps(len(rows), config) == 4  # 32 rows per worker, batches of 8
    assert result.metrics["rows_trained"] == result.rows_trained == 64  # summed over both workers
    assert [h["step"] for h in result.history] == [2, 4, 4]  # log windows, then the epoch-end checkpoint
    assert "loss" not in result.metrics and np.isfinite(result.last_loss)  # no step left after step 4's window
    assert result.history[-1]["checkpoint"].endswith("checkpoint_step000000004")
    # what the four steps learned: the loss of every anchor against all 64 positives falls (3.4 -> 0.3 in a
    # single process), and each anchor's nearest positive is its own
    anchors, positives = [r["anchor"] for r in rows], [r["positive"] for r in rows]
    start = TextEncoder.load(tiny_encoder_dir)
    trained = TextEncoder.load(result.model_path)
    before, after = set_mnr_loss(start, anchors, positives), set_mnr_loss(trained, anchors, positives)
    assert after < 0.5 * before, (before, after)
    assert retrieval_at_1(trained, anchors, positives) == 1.0
    checkpoints = sorted(p.name for p in (tmp_path / "two").glob("checkpoint_step*"))
    assert checkpoints == ["checkpoint_step000000004"]
    progress = json.loads((tmp_path / "two" / checkpoints[0] / "progress.json").read_text())
    assert progress == {"step": 4, "epoch": 1, "batch_in_epoch": 0}


@pytest.mark.parametrize("in_process", [False, True], ids=["worker group", "in process"])
def test_mnr_memorises_32_pairs(ray_session, tiny_encoder_dir, tmp_path, in_process):
    """Training must learn: every anchor retrieves its own positive among all 32, and the loss collapses.

    The 32 pairs are fed as 60 passes (each pass in a fresh order) in one epoch; batches of 32 distinct
    pairs are then exactly one pass each, so every step sees all 31 other positives as negatives.
    """
    import ray.data

    assert len(set(MEMO_ANCHORS)) == len(set(MEMO_POSITIVES)) == 32
    assert not {w for t in MEMO_ANCHORS for w in t.split()} & {w for t in MEMO_POSITIVES for w in t.split()}
    before = retrieval_at_1(TextEncoder.load(tiny_encoder_dir), MEMO_ANCHORS, MEMO_POSITIVES)
    assert before <= 0.25  # the random encoder does not already know the pairs

    passes = 60
    rng = np.random.default_rng(0)
    rows = [{"anchor": MEMO_ANCHORS[i], "positive": MEMO_POSITIVES[i]}
            for _ in range(passes) for i in rng.permutation(32)]
    config = _config(tiny_encoder_dir, batch_size=32, shuffle_buffer_rows=0, log_every_steps=5,
                     optimizer=OptimizerConfig(lr=1e-2, warmup_ratio=0.1),
                     loss=LossConfig(name="mnr", params={"scale": 20.0}), in_process=in_process)
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="memo"),
                 export_model_to=tmp_path / "model", eval_fn=lambda model: {"pid": os.getpid()})
    assert (result.metrics["eval_pid"] == os.getpid()) is in_process  # trained here, or on a worker

    assert result.steps == passes
    windows = result.window_losses  # one per 5 steps, read from the run's history.jsonl
    assert windows == [h["loss"] for h in result.history if h["step"] % 5 == 0 and "rows_trained" not in h]
    assert len(windows) == passes // 5 == len(result.window_rows_per_s)
    assert result.rows_trained == passes * 32 and result.rows_skipped == 0
    assert result.steady_rows_per_s > 0 and min(windows) <= result.mean_loss <= max(windows)
    assert result.last_loss == windows[-1]
    after = retrieval_at_1(TextEncoder.load(result.model_path), MEMO_ANCHORS, MEMO_POSITIVES)
    assert after == 1.0, (before, after, windows)
    first, last = windows[0], windows[-1]
    assert 0 < last <= 0.2 * first, windows  # a cross-entropy, down by at least 80 % from its first window


def test_an_epoch_end_with_no_step_left_reports_no_loss(ray_session, tiny_encoder_dir, tmp_path):
    """Three steps an epoch, a window every two: epoch 0 closes with step 3 still to report, epoch 1 closes
    right after the window of step 6 and so has no loss to report (not a loss of 0)."""
    import ray.data

    config = _config(tiny_encoder_dir, epochs=2, loss=LossConfig(name="mnr"))
    result = fit(ray.data.from_items(_pairs(24)), config, OutputConfig(storage_path=str(tmp_path), name="ends"))

    assert [(h["step"], "rows_trained" in h, "loss" in h) for h in result.history] == [
        (2, False, True), (3, True, True), (4, False, True), (6, False, True), (6, True, False)]
    assert all(h["loss"] > 0 for h in result.history if "loss" in h)
    windows = [h["loss"] for h in result.history if "rows_per_s" in h]
    assert result.window_losses == windows
    assert result.last_loss == windows[-1]
    assert result.mean_loss == pytest.approx(sum(windows) / 3)


def test_malformed_rows_are_counted_and_skipped(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    rows = _pairs(16) + [{"anchor": "", "positive": "empty anchor"}, {"anchor": "no positive", "positive": None},
                         {"anchor": "  ", "positive": "blank anchor"}]
    result = fit(ray.data.from_items(rows), _config(tiny_encoder_dir),
                 OutputConfig(storage_path=str(tmp_path), name="bad-rows"))
    assert result.metrics["rows_skipped"] == result.rows_skipped == 3
    assert result.metrics["skipped_reasons"] == {"empty or non-text anchor": 2, "empty or non-text positive": 1}
    assert result.metrics["rows_trained"] == 16 and result.steps == 2


def test_supervised_ntxent_trains_on_text_label_rows(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    rows = [{"text": f"{t} item {i}", "label": t} for i, t in enumerate(["sport", "science", "art", "law"] * 8)]
    config = _config(tiny_encoder_dir, columns=("text", "label"), loss=LossConfig(name="supcon"),
                     max_steps=3, checkpoint_every_steps=2, keep_checkpoints=5)
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="sup"))
    assert result.steps == 3
    assert np.isfinite(result.last_loss)
    names = sorted(p.name for p in (tmp_path / "sup").glob("checkpoint_step*"))
    assert names == ["checkpoint_step000000002", "checkpoint_step000000003"]


def test_missing_column_is_reported_by_name(ray_session, tiny_encoder_dir):
    """Checked where the workers read their rows, without a fit (a fit's worker error reaching the driver with
    its message is checked by the group-column test below)."""
    import ray.data

    from contrastext.train.batches import SkippedRows, epoch_batches

    config = _config(tiny_encoder_dir)
    with pytest.raises(KeyError, match=r"no column\(s\) \['anchor', 'positive'\]; it has \['answer', 'question'\]"):
        list(epoch_batches(ray.data.from_items([{"question": "a", "answer": "b"}] * 4), config, 0, 0, SkippedRows()))


def test_group_column_rows_carry_their_group_and_share_batches(ray_session):
    import ray.data

    from contrastext.train.batches import SkippedRows, epoch_batches

    rows = [{"anchor": f"a{i}", "positive": f"p{i}", "group": i % 2} for i in range(6)]
    rows.append({"anchor": "a6", "positive": "p6", "group": None})
    config = TrainConfig(loss=LossConfig(name="ntxent"), group_column="group", batch_size=8, shuffle_buffer_rows=0)
    batches = list(epoch_batches(ray.data.from_items(rows), config, 0, 0, SkippedRows()))
    assert len(batches) == 1  # a shared group id is not a duplicate
    assert sorted(batches[0]) == sorted([(f"a{i}", f"p{i}", i % 2) for i in range(6)] + [("a6", "p6", -1)])


def test_ntxent_with_groups_trains_and_a_missing_group_column_is_named(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    rows = [{**row, "group": i % 3} for i, row in enumerate(_pairs(16))]
    config = _config(tiny_encoder_dir, loss=LossConfig(name="ntxent"), group_column="group")
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="groups"))
    assert result.steps == 2 and result.metrics["rows_trained"] == 16
    assert np.isfinite(result.last_loss)
    with pytest.raises(Exception, match="no group column 'group'"):
        fit(ray.data.from_items(_pairs(8)), config, OutputConfig(storage_path=str(tmp_path), name="no-groups"))


def test_group_column_needs_a_pair_loss_that_masks_negatives():
    with pytest.raises(ValueError, match="group_column needs"):
        TrainConfig(loss=LossConfig(name="supcon"), group_column="group")
    assert TrainConfig(loss=LossConfig(name="mnr"), group_column="label").group_column == "label"


@pytest.mark.parametrize("in_process", [False, True], ids=["worker group", "in process"])
def test_a_dataset_of_many_blocks_trains_as_its_rows_are_ordered(ray_session, tiny_encoder_dir, tmp_path,
                                                                 in_process):
    """Blocks that finish out of order (the later ones first) still reach the worker in the dataset's order, so
    a seed gives the same model whatever the blocks' timing: the model equals one trained on the same rows
    in one block. Without ``preserve_order`` the late blocks come after the others, and the model differs."""
    import ray.data

    def first_blocks_late(batch: dict) -> dict:  # defined here: Ray's workers cannot import a test module
        """Holds each block back the longer the earlier its rows: finished blocks come out in reverse order."""
        import time

        time.sleep(0.15 * (7 - int(min(batch["i"])) // 8))
        return batch

    rows = [{**row, "i": i} for i, row in enumerate(_pairs(64))]
    config = _config(tiny_encoder_dir, optimizer=OptimizerConfig(lr=1e-2), in_process=in_process)
    texts = [row["anchor"] for row in rows[:16]]
    vectors = []
    for name, dataset, train in (
            ("one_block", ray.data.from_items(rows, override_num_blocks=1), config),
            ("late_blocks", ray.data.from_items(rows).repartition(8).map_batches(first_blocks_late), config),
            ("late_blocks_unordered", ray.data.from_items(rows).repartition(8).map_batches(first_blocks_late),
             config.model_copy(update={"preserve_order": False}))):
        result = fit(dataset, train, OutputConfig(storage_path=str(tmp_path), name=name),
                     export_model_to=tmp_path / f"{name}_model")
        assert result.rows_trained == 64
        vectors.append(TextEncoder.load(result.model_path).encode(texts))
    start = TextEncoder.load(tiny_encoder_dir).encode(texts)
    assert not np.allclose(vectors[0], start, atol=1e-4)  # it trained
    np.testing.assert_allclose(vectors[1], vectors[0], rtol=0, atol=1e-6)
    assert not np.allclose(vectors[2], vectors[0], atol=1e-4)  # the blocks' timing decides without it
