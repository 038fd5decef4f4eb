"""In-process fits (``TrainConfig.in_process``): when they apply, and the checkpoints and history they keep.

That they learn is shown by ``test_fit.py``'s memorisation test, run both ways."""

import json
import os

import pytest

from contrastext import storage
from contrastext.config import IN_PROCESS_ENV, EncoderConfig, OutputConfig, ScalingSettings, TrainConfig
from contrastext.train.checkpoint import checkpoint_step
from contrastext.train.history import HISTORY_FILE, read_history
from contrastext.train.in_process import RAY_SNAPSHOT_FILE, InProcessRun, newest_checkpoint


def _checkpoint(tmp_path, step: int):
    folder = tmp_path / f"made_{step}"
    (folder / "model").mkdir(parents=True)
    (folder / "progress.json").write_text(json.dumps({"step": step}))
    return folder


def test_unset_it_follows_the_environment_for_one_cpu_worker_only(monkeypatch):
    monkeypatch.setenv(IN_PROCESS_ENV, "1")
    assert TrainConfig().trains_in_process()
    assert not TrainConfig(scaling=ScalingSettings(num_workers=2)).trains_in_process()
    assert not TrainConfig(scaling=ScalingSettings(use_gpu=True)).trains_in_process()
    assert not TrainConfig(max_failures=2).trains_in_process()
    assert not TrainConfig(in_process=False).trains_in_process()
    monkeypatch.setenv(IN_PROCESS_ENV, "0")
    assert not TrainConfig().trains_in_process()
    assert TrainConfig(in_process=True).trains_in_process()


def test_asked_for_with_more_than_one_cpu_worker_or_retries_it_is_refused():
    for other in ({"scaling": ScalingSettings(num_workers=2)}, {"scaling": ScalingSettings(use_gpu=True)},
                  {"max_failures": 1}):
        with pytest.raises(ValueError, match="in_process trains on one CPU worker"):
            TrainConfig(in_process=True, **other)


def test_unset_it_is_left_out_of_a_dump_and_set_it_survives_one():
    assert "in_process" not in TrainConfig().model_dump(mode="json")
    assert TrainConfig.model_validate(TrainConfig(in_process=False).model_dump()).in_process is False


def test_checkpoints_are_stored_then_named_by_the_history_and_the_oldest_dropped(tmp_path):
    run_dir = str(tmp_path / "run")
    run = InProcessRun(run_dir, keep_checkpoints=2)
    assert newest_checkpoint(run_dir) is None
    for step in (5, 10, 15):
        run.report({"step": step, "loss": 1.0 / step}, _checkpoint(tmp_path, step), f"checkpoint_step{step:09d}")
    run.report({"step": 17, "loss": 0.01}, None, "")
    assert [r["step"] for r in read_history(run_dir)] == [5, 10, 15]  # the last one waits for finish()
    run.finish()

    history = read_history(run_dir)
    assert [r["step"] for r in history] == [5, 10, 15, 17]
    assert [r.get("checkpoint") is not None for r in history] == [True, True, True, False]
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint_step*")) == [
        "checkpoint_step000000010", "checkpoint_step000000015"]
    assert checkpoint_step(newest_checkpoint(run_dir)) == 15


def test_what_an_interrupted_run_left_unnamed_is_not_resumed_from_and_goes_at_the_next_start(tmp_path):
    run_dir = tmp_path / "run"
    run = InProcessRun(str(run_dir), keep_checkpoints=3)
    run.report({"step": 5}, _checkpoint(tmp_path, 5), "checkpoint_step000000005")
    # a copy cut short by a kill: the folder is there, the record naming it never written
    (run_dir / "checkpoint_step000000010" / "model").mkdir(parents=True)
    # and a worker-group run's record of its checkpoints, which would name ones this run prunes
    (run_dir / RAY_SNAPSHOT_FILE).write_text("{}")
    assert checkpoint_step(newest_checkpoint(str(run_dir))) == 5

    InProcessRun(str(run_dir), keep_checkpoints=3)
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint_step000000005", HISTORY_FILE]


def test_on_a_bucket_it_resumes_a_history_that_names_checkpoints_without_a_scheme(s3_bucket, tmp_path):
    run_dir = f"{s3_bucket}/runs/in-process"
    run = InProcessRun(run_dir, keep_checkpoints=2)
    run.report({"step": 5}, _checkpoint(tmp_path, 5), "checkpoint_step000000005")
    stored = read_history(run_dir)
    assert stored[0]["checkpoint"] == f"{run_dir}/checkpoint_step000000005"
    # a worker-group run's history names its checkpoint by its path in the bucket's filesystem
    stored[0]["checkpoint"] = stored[0]["checkpoint"].split("://", 1)[1]
    storage.write_text(storage.join(run_dir, HISTORY_FILE), json.dumps(stored[0]) + "\n")
    assert newest_checkpoint(run_dir) == f"{run_dir}/checkpoint_step000000005"


@pytest.mark.ray
def test_an_in_process_fit_runs_here_leaves_the_worker_group_layout_and_the_callers_state(ray_session,
                                                                                          tiny_encoder_dir, tmp_path):
    import ray.data
    import torch

    from contrastext.train import fit

    threads, random_state = torch.get_num_threads(), torch.get_rng_state()
    torch.set_num_threads(2)  # the caller's; the fit's worker takes cpus_per_worker (1) and seeds torch
    rows = [{"anchor": f"question number {i}", "positive": f"answer {i} to it"} for i in range(48)]
    config = TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=8,
                         epochs=3, checkpoint_every_steps=6, keep_checkpoints=2, log_every_steps=3,
                         shuffle_buffer_rows=0, in_process=True, scaling=ScalingSettings(cpus_per_worker=1))
    try:
        result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(tmp_path), name="small"),
                     export_model_to=tmp_path / "model", eval_fn=lambda model: {"pid": os.getpid()})
        assert torch.get_num_threads() == 2 and torch.equal(torch.get_rng_state(), random_state)
    finally:
        torch.set_num_threads(threads)

    run_dir = tmp_path / "small"
    assert {r["eval_pid"] for r in result.history if "eval_pid" in r} == {os.getpid()}
    assert not (run_dir / RAY_SNAPSHOT_FILE).exists()  # Ray Train's controller never ran
    assert result.steps == 18 and result.rows_trained == 3 * 48 and len(result.window_losses) == 6
    assert result.checkpoint_path.endswith("checkpoint_step000000018")
    assert sorted(p.name for p in run_dir.glob("checkpoint_step*")) == [
        "checkpoint_step000000012", "checkpoint_step000000018"]
    assert (run_dir / HISTORY_FILE).exists() and (tmp_path / "model" / "config.json").exists()


@pytest.mark.ray
def test_a_longer_in_process_fit_goes_on_from_the_last_checkpoint(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    from contrastext.train import fit

    rows = [{"anchor": f"question number {i}", "positive": f"answer {i} to it"} for i in range(48)]
    config = TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=8,
                         max_steps=4, checkpoint_every_steps=2, keep_checkpoints=2, log_every_steps=2,
                         shuffle_buffer_rows=0, in_process=True)
    output = OutputConfig(storage_path=str(tmp_path), name="longer")
    first = fit(ray.data.from_items(rows), config, output)
    assert first.steps == 4 and first.metrics["resumed_from_step"] == 0
    second = fit(ray.data.from_items(rows), config.model_copy(update={"max_steps": 6}), output)
    assert second.metrics["resumed_from_step"] == 4 and second.steps == 6
    assert [r["step"] for r in second.history if r.get("checkpoint")] == [2, 4, 6]


@pytest.mark.ray
def test_a_fit_goes_on_in_the_other_mode_and_back(ray_session, tiny_encoder_dir, tmp_path):
    """Worker group → in process → worker group on one run folder: each goes on from the last checkpoint (the
    last one too, although the in-process run pruned checkpoints Ray Train's own record named)."""
    import ray.data

    from contrastext.train import fit

    rows = [{"anchor": f"question number {i}", "positive": f"answer {i} to it"} for i in range(48)]
    config = TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=8,
                         checkpoint_every_steps=2, keep_checkpoints=1, log_every_steps=2, shuffle_buffer_rows=0)
    output = OutputConfig(storage_path=str(tmp_path), name="both")
    resumed = []
    for in_process, steps in ((False, 2), (True, 4), (False, 6)):
        result = fit(ray.data.from_items(rows), config.model_copy(update={"in_process": in_process,
                                                                          "max_steps": steps}), output)
        assert result.steps == steps
        resumed.append(result.metrics["resumed_from_step"])
    assert resumed == [0, 2, 4]
    assert checkpoint_step(newest_checkpoint(str(tmp_path / "both"))) == 6
    # the in-process run pruned the worker group's step-2 checkpoint (the worker group that came after prunes
    # only its own: the in-process run's step 4 stays until an in-process start prunes by the history)
    kept = sorted(p.name for p in (tmp_path / "both").glob("checkpoint_step*"))
    assert kept == ["checkpoint_step000000004", "checkpoint_step000000006"]
