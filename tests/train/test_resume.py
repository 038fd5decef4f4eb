"""Kill a fit after it wrote a checkpoint, run it again with the same name: it continues from that step."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from contrastext.config import EncoderConfig, OutputConfig, TrainConfig
from contrastext.train import fit
from contrastext.train.checkpoint import checkpoint_step
from contrastext.train.in_process import newest_checkpoint

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROWS = 240
REPO_SRC = Path(__file__).resolve().parents[2] / "src"


def _config(encoder_dir) -> TrainConfig:
    return TrainConfig(encoder=EncoderConfig(model=str(encoder_dir), max_length=16), batch_size=4,
                       checkpoint_every_steps=5, keep_checkpoints=3, log_every_steps=5, shuffle_buffer_rows=0)


def _rows():
    return [{"anchor": f"anchor text {i}", "positive": f"positive text {i}"} for i in range(ROWS)]


FIRST_RUN = textwrap.dedent("""
    import sys, time, json
    import ray, ray.data
    from contrastext.config import TrainConfig, OutputConfig, RayConfig
    from contrastext.runtime import init_ray
    from contrastext.train import fit

    config = TrainConfig.model_validate_json(sys.argv[1])
    init_ray(RayConfig(num_cpus=3))

    def slow_step(model):  # runs on the first worker after every step: a slow run, so the kill lands mid-run
        time.sleep(0.5)
        return {}

    rows = [{"anchor": f"anchor text {i}", "positive": f"positive text {i}"} for i in range(%d)]
    fit(ray.data.from_items(rows), config.model_copy(update={"eval_every_steps": 1}),
        OutputConfig(storage_path=sys.argv[2], name="resumable"), rows=len(rows), eval_fn=slow_step)
""" % ROWS)


def _checkpointed_steps(run_dir: Path) -> list[int]:
    return sorted(json.loads(p.read_text())["step"] for p in run_dir.glob("checkpoint_step*/progress.json"))


# on a worker group, as the product trains by default; an in-process run going on (in either mode) from where
# it stopped: tests/train/test_in_process.py
def test_killed_fit_resumes_from_its_last_checkpoint(ray_session, tiny_encoder_dir, tmp_path):
    import ray.data

    config = _config(tiny_encoder_dir).model_copy(update={"in_process": False})
    script = tmp_path / "first_run.py"
    script.write_text(FIRST_RUN)
    env = {**os.environ, "PYTHONPATH": f"{REPO_SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen([sys.executable, str(script), config.model_dump_json(), str(tmp_path)],
                               env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = tmp_path / "resumable"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and not _checkpointed_steps(run_dir):
            assert process.poll() is None, "the first run ended before writing a checkpoint"
            time.sleep(0.5)
        time.sleep(1.0)  # let the controller record the checkpoint it just received
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    # the killed driver's workers are Ray's: they train on until Ray sees the driver gone, so wait until no
    # new checkpoint has come for a few seconds
    reached, quiet_since = _checkpointed_steps(run_dir), time.monotonic()
    while time.monotonic() - quiet_since < 5 and time.monotonic() < deadline + 60:
        time.sleep(0.5)
        now = _checkpointed_steps(run_dir)
        if now != reached:
            reached, quiet_since = now, time.monotonic()
    assert reached, "no checkpoint was written before the deadline"
    total = ROWS // config.batch_size
    assert max(reached) < total, "the first run finished before it was killed; nothing to resume"

    named = checkpoint_step(newest_checkpoint(str(run_dir)))  # the newest its history names
    result = fit(ray.data.from_items(_rows()), config, OutputConfig(storage_path=str(tmp_path), name="resumable"))

    resumed = result.metrics["resumed_from_step"]
    assert resumed in reached and resumed > 0
    assert resumed >= named  # Ray's own record may hold a checkpoint the history had not yet been written with
    assert result.steps == total
    assert max(_checkpointed_steps(run_dir)) == total
