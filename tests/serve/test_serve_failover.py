"""Serve under load loses the node of one embedding replica: the other answers, and the replica comes back.

A cluster of a head with no CPUs (Serve's controller and the one HTTP proxy run there) and two 2-CPU worker
nodes; the embedding deployment has two replicas, one per worker node (``max_replicas_per_node=1``), and
the node killed is one that does not hold the (single, CPU-less) ingress replica. A paced stream
of POST /v1/embed requests runs while the node of one replica is killed and then replaced. Requests are
sorted by when they ran: finished before the kill (must all succeed), in flight or started while Serve had
not yet noticed the death ("during": counted and bounded), started after it noticed (must all succeed,
through the re-scheduling of the second replica on the new node and after it).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import requests

from contrastext.serve.config import ServeConfig
from serve_harness import free_port, running_app

pytestmark = [pytest.mark.multinode, pytest.mark.slow]

APP = "contrastext"
ENCODER = "encoder-tiny"
RATE = 7.0  # requests started per second, all clients together
# Each replica gathers requests for up to BATCH_WAIT_S before a forward pass (the tiny model itself takes
# milliseconds), so at the kill the dying replica holds the requests of its last seconds, except when its
# batch has just been answered and no request has reached it since (a chance of about 1 / (RATE * BATCH_WAIT_S)).
BATCH_WAIT_S = 2.0
CLIENTS = 24  # client threads: enough for RATE at up to 3 s per request
MAX_REQUESTS = 600
LOAD_LIMIT_S = 120.0  # the load stops by itself after this, whatever happened
AFTER_REQUESTS = 40  # requests that must run after the second replica is back before the load stops
HTTP_TIMEOUT_S = 30.0
MAX_FAILED_DURING = 0  # the ingress re-sends a request whose replica died once, to another replica


@dataclass
class Outcome:
    started: float
    ended: float
    status: int | str  # 200, or the HTTP status and the start of the answer, or the client-side error's type


class PacedLoad:
    """POST /v1/embed from a thread pool at ``RATE`` requests/s, until ``stop()``, ``MAX_REQUESTS`` or the limit."""

    def __init__(self, url: str):
        self.url = url + "v1/embed"
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()
        self._issued = 0
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=CLIENTS, thread_name_prefix="load")
        self.t0 = time.monotonic()
        self._futures = [self._pool.submit(self._client) for _ in range(CLIENTS)]

    def _ticket(self) -> int | None:
        with self._lock:
            if self._stop.is_set() or self._issued >= MAX_REQUESTS or time.monotonic() - self.t0 > LOAD_LIMIT_S:
                return None
            self._issued += 1
            return self._issued - 1

    def _client(self) -> None:
        session = requests.Session()
        while (ticket := self._ticket()) is not None:
            delay = self.t0 + ticket / RATE - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                return
            started = time.monotonic()
            try:
                response = session.post(self.url, json={"texts": [f"request {ticket}", "a second text"]},
                                        timeout=HTTP_TIMEOUT_S)
                status: int | str = response.status_code
                if status != 200:
                    status = f"{status} {response.text[:160]}"
                elif len(response.json()["embeddings"]) != 2:
                    status = "bad-answer"
            except requests.RequestException as error:
                status = type(error).__name__
            with self._lock:
                self.outcomes.append(Outcome(started, time.monotonic(), status))

    def ok_count(self, since: float = 0.0) -> int:
        with self._lock:
            return sum(1 for o in self.outcomes if o.status == 200 and o.started >= since)

    def started_since(self, since: float) -> int:
        with self._lock:
            return sum(1 for o in self.outcomes if o.started >= since)

    @property
    def exhausted(self) -> bool:
        return all(f.done() for f in self._futures)

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for future in self._futures:
            future.result(timeout=HTTP_TIMEOUT_S + 10)
        self._pool.shutdown()
        return sorted(self.outcomes, key=lambda o: o.started)


def gcs_address() -> str:
    """This cluster's address, for the state API (on its own it asks the newest Ray on the host, maybe another)."""
    import ray

    return ray.get_runtime_context().gcs_address


def live_actors(class_name: str) -> list:
    """The live actors of a class (Ray's state API: ``node_id``, ``actor_id``)."""
    from ray.util.state import list_actors

    return list_actors(address=gcs_address(), filters=[("class_name", "=", class_name), ("state", "=", "ALIVE")])


def replica_actors(deployment: str) -> list:
    return live_actors(f"ServeReplica:{APP}:{deployment}")


def replica_nodes(deployment: str) -> list[str]:
    return [actor.node_id for actor in replica_actors(deployment)]


def resent_calls(ingress_actor_id: str) -> int:
    """Model calls the ingress sent again because their replica was lost (its warnings, on its stderr)."""
    from ray.util.state import get_log

    return "".join(get_log(address=gcs_address(), actor_id=ingress_actor_id, suffix="err")).count("; sending it again")


def running_replicas() -> int:
    """Replicas of the encoder deployment the Serve controller counts as running (what routers are told)."""
    from ray import serve

    status = serve.status().applications[APP].deployments[ENCODER]
    return status.replica_states.get("RUNNING", 0)


def wait_for(condition, timeout_s: float, what: str, load: PacedLoad | None = None) -> float:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline or (load is not None and load.exhausted):
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic()


def test_serve_survives_the_loss_of_a_replicas_node(fresh_cluster, tiny_encoder_dir):
    started = time.monotonic()
    cluster = fresh_cluster
    config = ServeConfig(
        port=free_port(), proxy_location="HeadOnly", access_log=False,
        models={"tiny": {"model": str(tiny_encoder_dir), "replicas": 2, "max_replicas_per_node": 1,
                         "num_cpus": 1, "torch_threads": 1, "precision": "fp32",
                         "batching": {"max_batch_size": 32, "batch_wait_timeout_s": BATCH_WAIT_S}}},
        topics={"enabled": False},
        limits={"request_timeout_s": HTTP_TIMEOUT_S - 5},
    )
    with running_app(config) as url:
        # --- placement: controller and proxy on the CPU-less head, one encoder replica per worker node
        workers = set(cluster.worker_node_ids())
        # (the state API may lag Serve by a moment)
        wait_for(lambda: len(replica_nodes(ENCODER)) == 2 and len(replica_actors("Ingress")) == 1, 60,
                 "the replica actors in Ray's state API")
        nodes = replica_nodes(ENCODER)
        assert len(nodes) == 2 and len(set(nodes)) == 2 and set(nodes) <= workers, (nodes, workers)
        assert running_replicas() == 2
        head = cluster.cluster.head_node.node_id
        assert [a.node_id for a in live_actors("ServeController")] == [head]
        assert [a.node_id for a in live_actors("ProxyActor")] == [head]
        ingress = replica_actors("Ingress")
        assert len(ingress) == 1
        ingress_nodes = [ingress[0].node_id]
        # the node to kill holds an encoder replica and not the (single) ingress replica
        victim_id = next(n for n in nodes if n not in ingress_nodes)
        victim = next(w for w in cluster.workers if w.node_id == victim_id)
        assert requests.get(url + "healthz", timeout=HTTP_TIMEOUT_S).status_code == 200

        load = PacedLoad(url)
        try:
            wait_for(lambda: load.ok_count() >= 24, 60, "24 answers before the kill", load)
            t_kill = time.monotonic()
            cluster.remove_worker(victim)
            # the controller notices the death and stops counting that replica as running
            t_detected = wait_for(lambda: running_replicas() < 2, 60, "Serve to notice the dead replica", load)
            cluster.restore()  # a new worker node: the second replica is scheduled there
            t_recovered = wait_for(lambda: running_replicas() == 2 and len(set(replica_nodes(ENCODER))) == 2, 90,
                                   "the second replica to run again", load)
            wait_for(lambda: load.started_since(t_recovered) >= AFTER_REQUESTS, 60,
                     f"{AFTER_REQUESTS} requests after recovery", load)
        finally:
            outcomes = load.stop()
        resent = resent_calls(ingress[0].actor_id)

    where = "head" if ingress_nodes[0] == head else "surviving worker"
    before = [o for o in outcomes if o.ended < t_kill]
    during = [o for o in outcomes if o.ended >= t_kill and o.started < t_detected]
    after = [o for o in outcomes if o.started >= t_detected]
    failed = {name: [o.status for o in group if o.status != 200]
              for name, group in (("before", before), ("during", during), ("after", after))}
    recovered_after = [o for o in after if o.started >= t_recovered]
    print(f"\nfailover: {len(outcomes)} requests sent, {len(failed['during'])} failed during the failover "
          f"(of {len(during)}), {len(failed['after'])} failed after it (of {len(after)}); {resent} calls resent "
          f"by the ingress; dead replica dropped {t_detected - t_kill:.1f} s after the kill, 2 replicas again "
          f"{t_recovered - t_kill:.1f} s after it; ingress on the {where} node; "
          f"test {time.monotonic() - started:.0f} s")

    for status in sorted(set(failed["during"])):
        print(f"  during: {failed['during'].count(status)} x {status}")
    assert not failed["before"], failed["before"]
    assert not failed["after"], failed["after"]
    assert len(failed["during"]) <= MAX_FAILED_DURING, failed["during"]
    assert len(recovered_after) >= AFTER_REQUESTS and len(outcomes) <= MAX_REQUESTS
