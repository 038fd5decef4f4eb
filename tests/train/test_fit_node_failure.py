"""A fit whose worker's node dies mid-run: Ray Train restarts the worker elsewhere, from the last checkpoint."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings, TrainConfig
from contrastext.models import TextEncoder
from contrastext.train import fit, planned_steps
from contrastext.train.history import read_history

pytestmark = [pytest.mark.multinode, pytest.mark.slow]

ROWS = 160
EVAL_EVERY_STEPS = 5
EVAL_PAUSE_S = 0.3  # a slow evaluation hook paces the fit, so the node dies while training is under way


def _pairs(n: int) -> list[dict]:
    topics = ["physics", "football", "opera", "banking", "volcanoes", "poetry", "surgery", "chess"]
    return [{"anchor": f"{topics[i % 8]} question {i}", "positive": f"about {topics[i % 8]} answer {i}"}
            for i in range(n)]


def _train_worker_node(cluster_address: str) -> str | None:
    """The node of the (single) live Ray Train worker actor, or None while there is none."""
    from ray.util.state import list_actors

    # the cluster's own address: other Ray instances on this host would make "auto" ambiguous
    actors = list_actors(address=cluster_address,
                         filters=[("class_name", "=", "RayTrainWorker"), ("state", "=", "ALIVE")])
    return actors[0].node_id if actors else None


class NodeKiller(threading.Thread):
    """Waits until the run has a checkpoint on record, then removes the node its training worker runs on."""

    def __init__(self, cluster, run_dir: str, finished: threading.Event, timeout_s: float = 240.0):
        super().__init__(daemon=True)
        self.cluster, self.run_dir, self.finished, self.timeout_s = cluster, run_dir, finished, timeout_s
        self.started = time.monotonic()
        self.killed_after_s: float | None = None
        self.killed_node: str | None = None
        self.checkpoint_step: int | None = None
        self.resumed_after_s: float | None = None  # from the removal to the first report of the restored worker
        self.resumed_node: str | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = self.started + self.timeout_s
            while time.monotonic() < deadline and not self.finished.is_set():
                checkpoints = [r["step"] for r in read_history(self.run_dir) if r.get("checkpoint")]
                node_id = _train_worker_node(self.cluster.address) if checkpoints else None
                node = next((w for w in self.cluster.workers if w.node_id == node_id), None)
                if node is not None:
                    self.cluster.remove_worker(node)
                    killed = time.monotonic()
                    self.killed_after_s = killed - self.started
                    self.killed_node, self.checkpoint_step = node_id, max(checkpoints)
                    break
                time.sleep(0.2)
            while self.killed_node and time.monotonic() < deadline and not self.finished.is_set():
                if any(r["resumed_from_step"] > 0 for r in read_history(self.run_dir)):
                    self.resumed_after_s = time.monotonic() - killed
                    self.resumed_node = _train_worker_node(self.cluster.address)
                    return
                time.sleep(0.5)
        except Exception as error:  # noqa: BLE001 -- raised by the test, in its own thread
            self.error = error


def test_fit_survives_the_loss_of_its_workers_node(fresh_cluster, s3_bucket, tiny_encoder_dir, tmp_path):
    import ray.data

    def paced_eval(model) -> dict[str, float]:
        time.sleep(EVAL_PAUSE_S)
        anchor, positive = model.encode(["physics question 1", "about physics answer 1"])
        return {"pair_cosine": float(anchor @ positive / (np.linalg.norm(anchor) * np.linalg.norm(positive)))}

    rows = _pairs(ROWS)
    config = TrainConfig(encoder=EncoderConfig(model=str(tiny_encoder_dir), max_length=16), batch_size=4,
                         scaling=ScalingSettings(num_workers=1, cpus_per_worker=1), max_failures=2,
                         checkpoint_every_steps=10, keep_checkpoints=2, log_every_steps=EVAL_EVERY_STEPS,
                         eval_every_steps=EVAL_EVERY_STEPS, shuffle_buffer_rows=0)
    output = OutputConfig(storage_path=s3_bucket + "/runs", name="node-loss")
    total = planned_steps(ROWS, config)
    assert total == 40

    finished = threading.Event()
    killer = NodeKiller(fresh_cluster, output.run_dir(), finished)
    started = time.monotonic()
    killer.start()
    try:
        result = fit(ray.data.from_items(rows, override_num_blocks=8), config, output, rows=ROWS,
                     eval_fn=paced_eval, export_model_to=tmp_path / "model")
    finally:
        finished.set()
        killer.join(timeout=30)
    seconds = time.monotonic() - started
    print(f"planned {total} steps; node {killer.killed_node} removed after {killer.killed_after_s} s "
          f"(last checkpoint then: step {killer.checkpoint_step}); restored worker reported "
          f"{killer.resumed_after_s} s later; fit took {seconds:.1f} s")

    if killer.error is not None:
        raise killer.error
    assert killer.killed_node is not None, "the fit ended before its worker's node could be removed"
    # the fit finished by itself, on the surviving node
    assert killer.resumed_node in fresh_cluster.worker_node_ids()
    assert result.steps == total
    assert result.checkpoint_path.endswith(f"checkpoint_step{total:09d}")
    history = result.history
    assert history == read_history(output.run_dir())
    assert history[-1]["step"] == total
    # the reports before the failure come from a fresh start, the ones after it from a checkpoint
    resumed = [r for r in history if r["resumed_from_step"] > 0]
    assert resumed, "no report came from a worker restored from a checkpoint"
    first_resumed = history.index(resumed[0])
    assert all(r["resumed_from_step"] == 0 for r in history[:first_resumed])
    resumed_at = resumed[0]["resumed_from_step"]
    checkpointed_before = {r["step"] for r in history[:first_resumed] if r.get("checkpoint")}
    assert resumed_at >= killer.checkpoint_step and resumed_at in checkpointed_before
    assert all(r["resumed_from_step"] == resumed_at for r in history[first_resumed:])
    assert resumed_at < total
    # training went on from the restored step, not from 0
    assert resumed[0]["step"] > resumed_at
    assert np.isfinite(history[-1]["eval_pair_cosine"])
    print(f"resumed at step {resumed_at}")

    # what was learned is intact: the exported model loads, and its weights moved from the initial ones
    trained = TextEncoder.load(result.model_path)
    texts = ["physics question 1", "opera"]
    embeddings = trained.encode(texts)
    assert np.isfinite(embeddings).all()
    assert not np.allclose(embeddings, TextEncoder.load(tiny_encoder_dir).encode(texts))
