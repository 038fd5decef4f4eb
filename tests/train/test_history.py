"""history.jsonl: records kept locally as reports come, the stored file written at checkpoints and at the end."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from contrastext import storage
from contrastext.train import history as history_module
from contrastext.train.history import (
    HISTORY_FILE,
    HistoryCallback,
    HistoryRunEnd,
    read_history,
)

RUN_CONTEXT = SimpleNamespace(run_name="fake-run")  # the callback never looks into it


def _metrics(step: int, workers: int = 2) -> list[dict]:
    return [{"step": step, "loss": 1.0 / step, "rows_trained": 4, "rank": rank} for rank in range(workers)]


def _checkpoint(step: int):
    return SimpleNamespace(path=f"/runs/fake/checkpoint_step{step:09d}")


@pytest.fixture
def history_writes(monkeypatch):
    """Every write of a history.jsonl, through any storage call that could make one."""
    writes: list[str] = []
    for name in ("write_bytes", "write_text", "upload_file"):
        original = getattr(storage, name)

        def counted(location, *args, _original=original, **kwargs):
            if str(location).endswith(HISTORY_FILE):
                writes.append(str(location))
            return _original(location, *args, **kwargs)

        monkeypatch.setattr(storage, name, counted)
    return writes


@pytest.fixture(autouse=True)
def scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTRASTEXT_SCRATCH", str(tmp_path / "scratch"))
    return tmp_path / "scratch"


def test_reports_without_checkpoints_write_nothing_until_one_carries_a_checkpoint(tmp_path, history_writes):
    run_dir = str(tmp_path / "run")
    callback = HistoryCallback(run_dir)
    stored = tmp_path / "run" / HISTORY_FILE

    for step in range(1, 1001):
        callback.after_report(RUN_CONTEXT, _metrics(step), None)
    assert history_writes == []
    assert not stored.exists()
    # the records are on the controller's local disk meanwhile, one line each
    assert len(callback.local_path.read_text().splitlines()) == 1000

    callback.after_report(RUN_CONTEXT, _metrics(1001), _checkpoint(1001))
    assert history_writes == [storage.join(run_dir, HISTORY_FILE)]
    records = read_history(run_dir)
    assert [r["step"] for r in records] == list(range(1, 1002))
    assert all(r["rows_trained"] == 8 and r["rank"] == 0 for r in records)  # rank 0's, rows summed
    assert records[-1]["checkpoint"].endswith("checkpoint_step000001001")
    assert "checkpoint" not in records[0]

    for step in range(1002, 1011):  # back to no writes until the next checkpoint
        callback.after_report(RUN_CONTEXT, _metrics(step), None)
    assert len(history_writes) == 1


def test_the_end_of_the_run_writes_the_remaining_records(tmp_path, history_writes, scratch):
    run_dir = str(tmp_path / "run")
    callback = HistoryCallback(run_dir)
    ends = [c for c in callback.callbacks() if isinstance(c, HistoryRunEnd)]
    assert callback.callbacks()[0] is callback and len(ends) == 1 and ends[0].history is callback

    callback.after_report(RUN_CONTEXT, _metrics(1), None)
    callback.after_report(RUN_CONTEXT, _metrics(2), _checkpoint(2))
    callback.after_report(RUN_CONTEXT, _metrics(3), None)
    callback.after_report(RUN_CONTEXT, _metrics(4), None)
    assert [r["step"] for r in read_history(run_dir)] == [1, 2]

    ends[0].after_controller_finish(result=SimpleNamespace(metrics={}, checkpoint=None, error=None))
    assert [r["step"] for r in read_history(run_dir)] == [1, 2, 3, 4]
    assert len(history_writes) == 2
    assert callback.local_path is None and list(scratch.iterdir()) == []  # the scratch file is gone

    ends[0].before_controller_abort()  # a second end (or an end with nothing new) writes nothing
    assert len(history_writes) == 2


def test_an_aborted_run_writes_its_records_too(tmp_path):
    run_dir = str(tmp_path / "run")
    callback, end = HistoryCallback(run_dir).callbacks()
    for step in (1, 2, 3):
        callback.after_report(RUN_CONTEXT, _metrics(step), None)
    end.before_controller_abort()
    assert [r["step"] for r in read_history(run_dir)] == [1, 2, 3]


def test_a_run_started_over_an_existing_history_keeps_the_old_records_first(tmp_path, history_writes):
    run_dir = str(tmp_path / "run")
    old = [{"step": 5, "resumed_from_step": 0}, {"step": 10, "resumed_from_step": 0, "checkpoint": "c10"}]
    # the last line without its newline: the first new record must still start a line of its own
    storage.write_text(storage.join(run_dir, HISTORY_FILE), "\n".join(json.dumps(r) for r in old))
    history_writes.clear()

    callback, end = HistoryCallback(run_dir).callbacks()
    callback.after_report(RUN_CONTEXT, [{"step": 15, "resumed_from_step": 10}], None)
    assert history_writes == []  # the old file is read, not rewritten
    callback.after_report(RUN_CONTEXT, [{"step": 20, "resumed_from_step": 10}], _checkpoint(20))
    assert [r["step"] for r in read_history(run_dir)] == [5, 10, 15, 20]
    callback.after_report(RUN_CONTEXT, [{"step": 22, "resumed_from_step": 10}], None)
    end.after_controller_finish(result=None)
    records = read_history(run_dir)
    assert records[:2] == old
    assert [r["step"] for r in records] == [5, 10, 15, 20, 22]


def test_the_callbacks_travel_together_to_the_controller(tmp_path):
    """Ray pickles RunConfig.callbacks as one list: the end hook must still point at the same recorder."""
    import ray.cloudpickle

    callback, end = ray.cloudpickle.loads(ray.cloudpickle.dumps(HistoryCallback(str(tmp_path / "run")).callbacks()))
    assert end.history is callback
    callback.after_report(RUN_CONTEXT, _metrics(1), None)
    end.after_controller_finish(result=None)
    assert [r["step"] for r in read_history(str(tmp_path / "run"))] == [1]


def test_the_run_end_hook_is_one_ray_train_calls(tmp_path):
    """The hooks used exist on Ray Train's controller callback interface, and ours is not a UserCallback
    (those only get after_report and after_exception)."""
    import ray.train
    from ray.train.v2._internal.execution.callback import ControllerCallback

    assert hasattr(ControllerCallback, "after_controller_finish")
    assert hasattr(ControllerCallback, "before_controller_abort")
    end = HistoryRunEnd(HistoryCallback(str(tmp_path)))
    assert isinstance(end, ControllerCallback) and not isinstance(end, ray.train.UserCallback)
    assert history_module.HistoryCallback.__mro__[1] is ray.train.UserCallback


def test_a_record_is_rank_0s_metrics_with_row_counts_summed():
    from contrastext.train.history import merge_worker_metrics

    merged = merge_worker_metrics([
        {"step": 3, "loss": 0.5, "rows_trained": 10, "rows_skipped": 1, "skipped_reasons": {"empty text": 1}},
        {"step": 3, "loss": 0.5, "rows_trained": 6, "rows_skipped": 2, "skipped_reasons": {"empty text": 2},
         "eval_accuracy": 0.9},  # only rank 0 evaluates; another worker's own metric is not kept
    ])
    assert merged == {"step": 3, "loss": 0.5, "rows_trained": 16, "rows_skipped": 3,
                      "skipped_reasons": {"empty text": 3}}
