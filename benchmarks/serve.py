"""Serving throughput: /v1/classify with dynamic batching vs batching off, 8 concurrent clients, loopback.

    python benchmarks/serve.py [--requests 2000] [--clients 8] [--memory-requests 10000] [--threads 2]
                               [--precision auto|fp32|bf16] [--access-log] [--use-gpu]

One application serves the bundled MiniLM twice: model "batched" (dynamic batching, ``serve.batcher``)
and model "unbatched" (one forward pass per request). Each phase sends the same fixed count of one-text
classification requests (real AG News texts, the four AG News labels) from ``--clients`` threads;
the phases alternate ``--rounds`` times, so machine noise hits both alike. The figure is the ratio of
requests/s, batched over unbatched (target ≥ 1.8), with the requests per batch the batched replica
formed (their distribution, and the share of the phase its model thread was busy) and the machine's
load average. Then the batched replica keeps answering until it has served ``--memory-requests``
requests; its resident memory then must be within 10% of what it was after ``--memory-first`` (1,000)
requests (no leak). ``--requests 0`` runs the memory check alone. The app's topics model is switched off.

    python benchmarks/serve.py --compare-backends torch,onnx-int8 [--requests 1000 --rounds 3]

serves the model once per backend (same batching) and compares their /v1/embed requests/s, phases
alternating; the first backend is the base of the ratios.

    python benchmarks/serve.py --compare-auth [--requests 1000 --rounds 3]

serves the model in two applications on one server, one open and one that asks for a bearer token (its
per-token rate limiter on, set too high to refuse anything), and compares their /v1/embed requests/s,
phases alternating: the cost of authentication (target ≤ 2%).
``--use-gpu`` puts both replicas on a GPU; on a one-GPU machine they share it.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from collections import Counter

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import requests  # noqa: E402

from _common import ag_news_rows, write_result  # noqa: E402
from contrastext.models import DEFAULT_MODEL  # noqa: E402
from contrastext.report import format_table  # noqa: E402

LABELS = ["World", "Sports", "Business", "Sci/Tech"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(url: str, model: str, texts: list[str], count: int, clients: int, route: str = "classify",
         headers: dict[str, str] | None = None) -> dict:
    """Send ``count`` one-text requests to ``route`` (classify or embed) from ``clients`` threads; every
    answer is checked, latencies kept."""
    latencies: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    next_index = iter(range(count))

    def client() -> None:
        session = requests.Session()
        session.headers.update(headers or {})
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            body = {"texts": [texts[i % len(texts)]], "model": model}
            if route == "classify":
                body["labels"] = LABELS
            start = time.perf_counter()
            response = session.post(url + f"v1/{route}", json=body, timeout=120)
            elapsed = time.perf_counter() - start
            with lock:
                if response.status_code != 200 or not _answered(route, response.json()):
                    failures.append(f"{response.status_code}: {response.text[:200]}")
                latencies.append(elapsed)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} of {count} requests failed, e.g. {failures[0]}")
    ms = np.asarray(latencies) * 1000
    return {"requests": count, "seconds": seconds, "requests_per_s": count / seconds,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def _answered(route: str, body: dict) -> bool:
    if route == "classify":
        return body["results"][0]["label"] in LABELS
    return len(body["embeddings"]) == 1 and len(body["embeddings"][0]) == body["dimension"]


def alternate(targets: dict[str, tuple[str, str, dict]], args: argparse.Namespace,
              texts: list[str]) -> dict[str, list[dict]]:
    """/v1/embed phases of each target (url, model, headers): a warm-up each, then ``--rounds`` rounds in which
    the targets take turns, so machine noise hits all alike."""
    for url, model, headers in targets.values():  # warm-up: exports (cached), model threads, connections
        load(url, model, texts, 4 * args.clients, args.clients, route="embed", headers=headers)
    phases: dict[str, list[dict]] = {name: [] for name in targets}
    for _ in range(args.rounds):
        for name, (url, model, headers) in targets.items():
            phases[name].append(load(url, model, texts, args.requests, args.clients, route="embed", headers=headers))
            print(f"{name}: {phases[name][-1]['requests_per_s']:.1f} requests/s", flush=True)
    return phases


def rate_table(phases: dict[str, list[dict]], labels: dict[str, str], args: argparse.Namespace) -> dict[str, float]:
    """Prints each target's median requests/s against the first target's; returns the medians."""
    rate = {name: float(statistics.median(p["requests_per_s"] for p in runs)) for name, runs in phases.items()}
    base = next(iter(phases))
    rows = [[labels[name], f"{rate[name]:.1f}", f"{rate[name] / rate[base]:.3f}×",
             f"{statistics.median(p['p50_ms'] for p in runs):.1f} / {statistics.median(p['p99_ms'] for p in runs):.1f}"]
            for name, runs in phases.items()]
    print(format_table(rows, headers=[f"/v1/embed, {args.clients} clients, {args.requests} requests/phase, "
                                      f"{args.rounds} rounds", "requests/s", f"vs {base}", "p50 / p99 ms"]))
    return rate


def compare_backends(args: argparse.Namespace, texts: list[str]) -> None:
    """/v1/embed requests/s of one replica per backend (both batched alike), phases alternating."""
    from ray import serve

    from contrastext.serve.app import start_serve
    from contrastext.serve.config import ServeConfig

    backends = args.compare_backends.split(",")
    common = {"model": args.model, "max_length": 128, "num_cpus": 1, "torch_threads": args.threads,
              "precision": args.precision, "batching": {"enabled": True, "max_batch_size": args.max_batch_size,
                                                        "batch_wait_timeout_s": args.batch_wait_ms / 1000}}
    names = {backend: backend.replace("-", "_") for backend in backends}
    config = ServeConfig(port=free_port(), app_name="serve-backends", limits={"request_timeout_s": 120},
                         models={names[b]: {**common, "backend": b} for b in backends}, topics={"enabled": False},
                         access_log=args.access_log)
    url = start_serve(config)
    try:
        phases = alternate({b: (url, names[b], {}) for b in backends}, args, texts)
        used = {b: replica_info(config.app_name, names[b]).get("backend", b) for b in backends}
    finally:
        serve.shutdown()
    rate = rate_table(phases, {b: f"{b} (runs on {used[b]})" for b in backends}, args)
    base = rate[backends[0]]
    result = {"route": "embed", "requests_per_phase": args.requests, "clients": args.clients, "rounds": args.rounds,
              "torch_threads": args.threads, "backends": backends, "used": used, "requests_per_s": rate,
              "ratios": {b: rate[b] / base for b in backends}, "phases": phases}
    print(f"written to {write_result('serve_backends', result)}")


def share_gpus(replicas: int) -> None:
    """Start a local Ray on which ``replicas`` one-GPU replicas fit, even on a machine with fewer GPUs.

    Each served model asks Ray for a whole GPU, so on one GPU the second replica would never start. Ray is
    told of as many GPUs as there are replicas and leaves CUDA_VISIBLE_DEVICES alone, so each replica sees
    the real GPU. Ray refuses more GPUs than CUDA_VISIBLE_DEVICES names, so that is unset: the replicas
    then use the machine's first GPU.
    """
    import torch

    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    if os.environ.get("RAY_ADDRESS") or torch.cuda.device_count() >= replicas:
        return
    os.environ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1"
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    init_ray(RayConfig(), num_gpus=replicas)


def replica_info(app_name: str, model: str) -> dict:
    from ray import serve

    return serve.get_deployment_handle(f"encoder-{model}", app_name).info.remote().result(timeout_s=60)


def serve_until(url: str, app_name: str, model: str, texts: list[str], target: int, clients: int) -> dict:
    """Send requests until the replica has served ``target``; returns its info then."""
    while True:
        info = replica_info(app_name, model)
        missing = target - info["requests"]
        if missing <= 0:
            return info
        load(url, model, texts, missing, clients)


def throughput_report(args: argparse.Namespace, phases: dict[str, list[dict]], batching: dict) -> dict:
    """Print the throughput table; returns the result record."""

    def median(model: str, key: str) -> float:
        return float(statistics.median(p[key] for p in phases[model]))

    ratio = median("batched", "requests_per_s") / median("unbatched", "requests_per_s")
    rows = [[f"{model}: requests/s", median(model, "requests_per_s")] for model in ("unbatched", "batched")]
    rows += [[f"{model}: p50 / p99 ms", f"{median(model, 'p50_ms'):.1f} / {median(model, 'p99_ms'):.1f}"]
             for model in ("unbatched", "batched")]
    rows += [["precision of forward passes / access log", f"{batching['precision']} / "
                                                          f"{'on' if args.access_log else 'off'}"],
             ["ratio batched / unbatched (target ≥ 1.8)", ratio],
             ["mean requests per batch", batching["mean_batch_size"]],
             ["batch sizes (size: batches)", " ".join(f"{k}:{v}" for k, v in batching["batch_sizes"].items())],
             ["batched model thread busy", f"{100 * batching['busy_share']:.0f}%"],
             ["load average (1 min) before / after", " / ".join(f"{x:.2f}" for x in batching["load"])]]
    print(format_table(rows, headers=[f"/v1/classify, {args.clients} clients, {args.requests} requests/phase",
                                      "value"]), flush=True)
    return {"requests_per_phase": args.requests, "clients": args.clients, "rounds": args.rounds,
            "max_batch_size": args.max_batch_size, "batch_wait_ms": args.batch_wait_ms,
            "torch_threads": args.threads, "precision": batching["precision"], "access_log": args.access_log,
            "use_gpu": args.use_gpu,
            "mean_requests_per_batch": batching["mean_batch_size"],
            "batching": batching, "phases": phases,
            "ratio_batched_over_unbatched": ratio, "memory": None}


def compare_auth(args: argparse.Namespace, texts: list[str]) -> None:
    """/v1/embed requests/s of an open application and of one that checks a bearer token, phases alternating."""
    from ray import serve

    from contrastext.runtime import init_ray
    from contrastext.serve.app import build_app
    from contrastext.serve.auth import new_token
    from contrastext.serve.config import ServeConfig

    model = {"model": args.model, "max_length": 128, "num_cpus": 1, "torch_threads": args.threads,
             "precision": args.precision, "backend": args.backend,
             "batching": {"enabled": True, "max_batch_size": args.max_batch_size,
                          "batch_wait_timeout_s": args.batch_wait_ms / 1000}}
    port = free_port()
    token, entry = new_token("benchmark", "read")
    variants = {"open": {}, "token": {"Authorization": f"Bearer {token}"}}
    configs = {name: ServeConfig(port=port, app_name=f"serve-auth-{name}", route_prefix=f"/{name}",
                                 limits={"request_timeout_s": 120}, models={"minilm": model},
                                 topics={"enabled": False}, access_log=args.access_log,
                                 auth={"requests_per_s": 1e6, "burst": 10**6}) for name in variants}
    init_ray(configs["open"].ray)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    for name, config in configs.items():
        if name == "token":
            os.environ["CONTRASTEXT_API_TOKENS"] = entry
        try:
            serve.run(build_app(config, "127.0.0.1"), name=config.app_name, route_prefix=config.route_prefix)
        finally:
            os.environ.pop("CONTRASTEXT_API_TOKENS", None)
    urls = {name: f"http://127.0.0.1:{port}/{name}/" for name in variants}
    refused = requests.post(urls["token"] + "v1/embed", json={"texts": ["x"]}, timeout=60).status_code
    assert refused == 401, f"the token application answered {refused} without a token"
    try:
        phases = alternate({name: (urls[name], "minilm", headers) for name, headers in variants.items()}, args,
                           texts)
    finally:
        serve.shutdown()
    rate = rate_table(phases, {name: name for name in variants}, args)
    cost = 1 - rate["token"] / rate["open"]
    print(f"authentication costs {100 * cost:.1f}% of the open application's requests/s (target ≤ 2%)")
    result = {"route": "embed", "requests_per_phase": args.requests, "clients": args.clients, "rounds": args.rounds,
              "torch_threads": args.threads, "backend": args.backend, "requests_per_s": rate, "cost": cost,
              "phases": phases}
    print(f"written to {write_result('serve_auth', result)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase and round")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--memory-requests", type=int, default=10_000,
                        help="requests the batched replica serves before its memory is compared (0: skip)")
    parser.add_argument("--memory-first", type=int, default=1000,
                        help="requests served when the first memory reading is taken")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--batch-wait-ms", type=float, default=5.0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads per replica")
    parser.add_argument("--backend", choices=["torch", "onnx", "onnx-int8", "auto"], default="torch",
                        help="the replicas' inference backend (torch: the figures this benchmark has always given)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                        help="the replicas' precision (auto: bf16 where the CPU has native bf16)")
    parser.add_argument("--access-log", action="store_true",
                        help="keep Serve's per-request log lines (off by default here: on 2 cores they cost "
                             "CPU the replicas need, and the same for both phases)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--use-gpu", action="store_true", help="both replicas on a GPU")
    parser.add_argument("--compare-backends", default=None, metavar="torch,onnx-int8",
                        help="instead: /v1/embed requests/s of one replica per backend (the first is the base)")
    parser.add_argument("--compare-auth", action="store_true",
                        help="instead: /v1/embed requests/s of an open application and of one asking for a token")
    args = parser.parse_args()
    if args.compare_auth:
        return compare_auth(args, [f"{title}. {body}" for title, body in ag_news_rows(2000)])
    if args.compare_backends:
        return compare_backends(args, [f"{title}. {body}" for title, body in ag_news_rows(2000)])

    from ray import serve

    from contrastext.serve.app import start_serve
    from contrastext.serve.config import ServeConfig

    texts = [f"{title}. {body}" for title, body in ag_news_rows(2000)]
    common = {"model": args.model, "max_length": 128, "num_cpus": 1, "torch_threads": args.threads,
              "precision": args.precision, "use_gpu": args.use_gpu, "backend": args.backend}
    config = ServeConfig(
        port=free_port(), app_name="serve-benchmark",
        models={"batched": {**common, "batching": {"enabled": True, "max_batch_size": args.max_batch_size,
                                                   "batch_wait_timeout_s": args.batch_wait_ms / 1000}},
                "unbatched": {**common, "batching": {"enabled": False}}},
        limits={"request_timeout_s": 120}, topics={"enabled": False}, access_log=args.access_log,
    )
    if args.use_gpu:
        share_gpus(replicas=2)
    url = start_serve(config)
    try:
        for model in ("batched", "unbatched"):  # warm-up: model threads, label-set cache, connections
            load(url, model, texts, 4 * args.clients, args.clients)
        phases: dict[str, list[dict]] = {"batched": [], "unbatched": []}
        result: dict = {"memory": None}
        if args.requests > 0:
            load_before = os.getloadavg()[0]
            sizes: Counter = Counter()
            busy = seconds = 0.0
            for _ in range(args.rounds):
                for model in ("unbatched", "batched"):
                    before = replica_info(config.app_name, model)
                    phases[model].append(load(url, model, texts, args.requests, args.clients))
                    after = replica_info(config.app_name, model)
                    if model == "batched":
                        sizes.update({int(k): v - before["batch_sizes"].get(k, 0)
                                      for k, v in after["batch_sizes"].items()})
                        busy += after["busy_seconds"] - before["busy_seconds"]
                        seconds += phases[model][-1]["seconds"]
                    print(f"{model}: {phases[model][-1]['requests_per_s']:.1f} requests/s", flush=True)
            sizes = Counter({k: v for k, v in sizes.items() if v > 0})
            batches = sum(sizes.values())
            batching = {"mean_batch_size": sum(k * v for k, v in sizes.items()) / max(1, batches),
                        "batch_sizes": dict(sorted(sizes.items())), "busy_share": busy / max(seconds, 1e-9),
                        "load": [load_before, os.getloadavg()[0]]}
            batching["precision"] = replica_info(config.app_name, "batched")["precision"]
            result = throughput_report(args, phases, batching)
            print(f"written to {write_result('serve', result)}", flush=True)

        if args.memory_requests > args.memory_first:
            at_1k = serve_until(url, config.app_name, "batched", texts, args.memory_first, args.clients)
            print(f"memory: {at_1k['rss_bytes'] / 2**20:.1f} MiB after {at_1k['requests']} requests", flush=True)
            at_end = serve_until(url, config.app_name, "batched", texts, args.memory_requests, args.clients)
            print(f"memory: {at_end['rss_bytes'] / 2**20:.1f} MiB after {at_end['requests']} requests", flush=True)
            memory = {"requests_first": at_1k["requests"], "rss_mib_first": at_1k["rss_bytes"] / 2**20,
                      "requests_last": at_end["requests"], "rss_mib_last": at_end["rss_bytes"] / 2**20,
                      "growth_ratio": at_end["rss_bytes"] / at_1k["rss_bytes"]}
            result["memory"] = memory
            print(format_table([
                [f"replica RSS MiB after {memory['requests_first']:,} requests", memory["rss_mib_first"]],
                [f"replica RSS MiB after {memory['requests_last']:,} requests", memory["rss_mib_last"]],
                ["RSS growth ratio (target ≤ 1.10)", memory["growth_ratio"]],
            ], headers=["batched replica memory", "value"]))
    finally:
        serve.shutdown()
    print(f"written to {write_result('serve', result)}")


if __name__ == "__main__":
    main()
