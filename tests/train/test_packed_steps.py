"""A fit whose batches keep a key from repeating plans as many steps as the packer makes, so its learning-rate
schedule ends with the last batch. Planned from the row count alone, the schedule of a CCL fit reached zero
with a fifth of its batches still to train."""

import math

import pytest

import contrastext.methods.uctopic.objective  # noqa: F401  (registers the phrase objective)
from contrastext.config import EncoderConfig, LossConfig, OptimizerConfig, OutputConfig, ScalingSettings, TrainConfig
from contrastext.train import fit, planned_steps
from contrastext.train import objectives
from contrastext.train.batches import SkippedRows
from contrastext.train.objectives import build_objective


def _phrase_rows(repeated: int, unique: int) -> list[dict]:
    """``repeated`` pairs of one mention key, then ``unique`` pairs of keys of their own."""
    rows = []
    for i in range(repeated + unique):
        key = "paris" if i < repeated else f"city{i}"
        sentence = f"{key} hosted the meeting number {i}"
        rows.append({"anchor": sentence, "anchor_start": 0, "anchor_end": len(key), "anchor_mask": False,
                     "positive": f"we flew to {key} on day {i}", "positive_start": 11,
                     "positive_end": 11 + len(key), "positive_mask": False, "key": key, "topic": -1})
    return rows


def _phrase_config(encoder: str = "unused", **overrides) -> TrainConfig:
    base = dict(objective="phrase", encoder=EncoderConfig(model=encoder, max_length=32), batch_size=4, epochs=1,
                checkpoint_every_steps=None, log_every_steps=1, shuffle_buffer_rows=0,
                loss=LossConfig(name="mnr", params={"temperature": 0.05}))
    return TrainConfig(**{**base, **overrides})


def _packed(objective, dataset) -> int:
    return sum(1 for _ in objective.batches(dataset, 0, 0, 1, SkippedRows()))


@pytest.mark.ray
def test_phrase_steps_are_the_packed_batches_not_rows_over_batch_size(ray_session):
    import ray.data

    rows = _phrase_rows(repeated=8, unique=16)
    dataset = ray.data.from_items(rows)
    objective = build_objective(_phrase_config())
    # the eight "paris" pairs cannot share a batch: at least eight batches where 24 / 4 would plan six
    assert _packed(objective, dataset) >= 8 > planned_steps(len(rows), objective.config) == 6
    assert objective.planned_steps(dataset, len(rows)) == _packed(objective, dataset)
    two_epochs_two_workers = build_objective(_phrase_config(epochs=2, scaling=ScalingSettings(num_workers=2)))
    assert two_epochs_two_workers.planned_steps(dataset, len(rows)) == 2 * math.ceil(_packed(objective, dataset) / 2)
    unpacked = build_objective(_phrase_config(no_duplicates=False))
    assert unpacked.planned_steps(dataset, len(rows)) == 6


@pytest.mark.ray
def test_pair_fits_without_repeated_strings_plan_their_packed_batches(ray_session):
    import ray.data

    # category pairs of pages: one category on eight pages, the rest on one page each
    rows = [{"anchor": "Living people" if i < 8 else f"Births in {1900 + i}", "positive": f"Category {i}"}
            for i in range(24)]
    dataset = ray.data.from_items(rows)
    config = TrainConfig(encoder=EncoderConfig(model="unused"), batch_size=4, epochs=1, shuffle_buffer_rows=0,
                         loss=LossConfig(name="mnr"))
    packed = build_objective(config)
    assert _packed(packed, dataset) >= 8 > planned_steps(len(rows), config) == 6
    assert packed.planned_steps(dataset, len(rows)) == _packed(packed, dataset)
    for unpacked in (config.model_copy(update={"no_duplicates": False}),  # batches of rows as they come
                     config.model_copy(update={"loss": LossConfig(name="supcon"), "columns": ("anchor", "label")})):
        assert build_objective(unpacked).planned_steps(dataset, len(rows)) == 6


@pytest.mark.ray
def test_a_large_dataset_is_planned_from_a_sample_of_its_rows(ray_session, monkeypatch):
    import ray.data

    monkeypatch.setattr(objectives, "PLAN_SAMPLE_ROWS", 12)
    rows = _phrase_rows(repeated=8, unique=40)  # the first 12 rows repeat a key more than the rest
    dataset = ray.data.from_items(rows)
    objective = build_objective(_phrase_config())
    in_sample, whole = _packed(objective, ray.data.from_items(rows[:12])), _packed(objective, dataset)
    planned = objective.planned_steps(dataset, len(rows))
    assert planned == math.ceil(in_sample * 48 / 12) != whole  # read from the sample, scaled to all 48 rows


@pytest.mark.ray
def test_no_row_is_read_where_max_steps_binds_anyway(ray_session):
    import ray.data

    rows = _phrase_rows(repeated=8, unique=16)
    objective = build_objective(_phrase_config(max_steps=5))  # 24 rows / 4 a batch: six steps at the fewest
    dataset = ray.data.from_items(rows).map(lambda row: 1 / 0)  # reading a row would fail
    assert objective.planned_steps(dataset, len(rows)) == 5
    assert build_objective(_phrase_config(max_steps=7)).planned_steps(ray.data.from_items(rows), len(rows)) == 7


@pytest.mark.ray
@pytest.mark.slow
def test_a_phrase_fit_trains_the_steps_it_planned(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    rows = _phrase_rows(repeated=8, unique=16)
    config = _phrase_config(str(tiny_encoder_dir), in_process=True,
                            optimizer=OptimizerConfig(lr=1e-3, warmup_ratio=0.1))
    planned = build_objective(config).planned_steps(ray.data.from_items(rows), len(rows))
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="packed"))
    assert result.steps == planned > planned_steps(len(rows), config)
    assert result.rows_trained == len(rows)
