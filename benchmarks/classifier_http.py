"""A classifier trained over HTTP on AG News: time to first use, its rounds, and its accuracy against the base.

    python benchmarks/classifier_http.py [--texts 2000] [--rounds 2] [--dev 200] [--eval-rows N] [--out FILE]

One application on loopback serves the bundled MiniLM (model "minilm", the default) with classifiers on
(registry in a temporary folder). ``--texts`` rows of the AG News test set, drawn with ``--seed``, are sent
without their labels to ``POST /v1/classifiers`` as classifier "agnews" (labels World, Sports, Business,
Sci/Tech with the template and aliases of ``configs/wcsbert_agnews_half.yaml``; texts read as that config's
evaluation set reads them: title and description joined with a space), with ``--dev`` other rows as its
labelled dev set. The script polls ``GET /v1/classifiers/agnews`` until it is ready, then classifies every
remaining row (none trained on or in dev; ``--eval-rows`` caps them) through ``POST /v1/classify`` twice:
with ``model: agnews`` and with the base model (zero-shot with the same labels, template and aliases).

Reported: seconds from the POST to the first successful classification by the new model, per round its
seconds, pseudo-labels kept per label and dev accuracy (and dev accuracy before training), and accuracy of
new vs base on the held-out rows. The table is printed; the JSON goes to ``--out`` (default
``runs/benchmarks/classifier_http.json``).

The local Ray gets ``--ray-cpus`` logical CPUs (default 6): the served model (1) and the classifier replica (1)
hold theirs for the whole run, the training's Ray Train worker takes ``classifiers.cpus_per_worker`` (2) and
Ray Data needs some to feed it. A ``RAY_ADDRESS`` other than ``local`` is joined as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import requests
import yaml
from _common import DATA_DIR, REPO_ROOT, write_result

from contrastext.models import DEFAULT_MODEL
from contrastext.report import format_table

AG_NEWS_CONFIG = REPO_ROOT / "configs" / "wcsbert_agnews_half.yaml"
NAME = "agnews"
BASE = "minilm"
CHUNK = 256  # texts per /v1/classify request (the app's limits.max_texts_per_request default)
TIMEOUT_S = 300


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ag_news_setup() -> tuple[dict, object]:
    """The labels block (names, aliases, template) and the labelled AG News test set, as the config reads it."""
    from contrastext.config import load_config
    from contrastext.data.sources import load_texts
    from contrastext.methods.wcsbert.config import WCSBertConfig

    if not (DATA_DIR / "ag_news" / "test.csv").is_file():
        raise SystemExit(f"benchmark needs {DATA_DIR / 'ag_news' / 'test.csv'} (set CONTRASTEXT_DATA)")
    config = load_config(WCSBertConfig, AG_NEWS_CONFIG)
    labels = yaml.safe_load(AG_NEWS_CONFIG.read_text())["labels"]
    return labels, load_texts(config.evaluation.texts, data_dir=DATA_DIR)


def classify(session: requests.Session, url: str, body: dict, texts: list[str]) -> list[str]:
    """Best label per text, ``CHUNK`` texts per request."""
    out: list[str] = []
    for start in range(0, len(texts), CHUNK):
        response = session.post(url + "v1/classify", json={**body, "texts": texts[start:start + CHUNK]},
                                timeout=TIMEOUT_S)
        if response.status_code != 200:
            raise RuntimeError(f"/v1/classify {body.get('model')}: {response.status_code} {response.text[:300]}")
        out += [r["label"] for r in response.json()["results"]]
    return out


def accuracy(predicted: list[str], truth: list[str]) -> float:
    return float(np.mean(np.asarray(predicted) == np.asarray(truth)))


def start_ray(cpus: int) -> None:
    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    address = os.environ.get("RAY_ADDRESS")
    if address and address != "local":
        init_ray(RayConfig(), verbose=False)
    else:  # a fresh local Ray of a known size
        init_ray(RayConfig(num_cpus=cpus), verbose=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000, help="unlabelled training texts")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dev", type=int, default=200, help="labelled dev rows, at least 1 (scored after each round)")
    parser.add_argument("--eval-rows", type=int, default=None, help="held-out rows classified (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="which rows are training texts, dev and held out")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="the served base model")
    parser.add_argument("--ray-cpus", type=int, default=6, help="logical CPUs of the local Ray")
    parser.add_argument("--poll-s", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None, help="JSON file (default: runs/benchmarks/)")
    args = parser.parse_args()
    if args.dev < 1:
        parser.error("--dev must be at least 1")

    labels, data = ag_news_setup()
    names, aliases, template = labels["names"], labels.get("aliases") or {}, labels["template"]
    order = np.random.default_rng(args.seed).permutation(len(data))
    train_rows = order[:args.texts]
    dev_rows = order[args.texts:args.texts + args.dev]
    held_rows = order[args.texts + args.dev:][:args.eval_rows]
    if len(held_rows) == 0:
        raise SystemExit(f"no rows left to evaluate on: {len(data)} rows, {args.texts} + {args.dev} used")
    train, dev, held = data.subset(train_rows), data.subset(dev_rows), data.subset(held_rows)

    from ray import serve

    from contrastext.serve import classifier_job
    from contrastext.serve.app import start_serve
    from contrastext.serve.config import ServeConfig

    registry = Path(tempfile.mkdtemp(prefix="classifier-http-"))
    config = ServeConfig(
        port=free_port(), app_name="classifier-http-benchmark", access_log=False,
        models={BASE: {"model": args.model, "num_cpus": 1, "torch_threads": 2}},
        topics={"enabled": False}, limits={"request_timeout_s": TIMEOUT_S},
        classifiers={"storage_path": str(registry), "max_texts": max(5000, args.texts),
                     "max_dev_texts": max(1000, args.dev), "max_rounds": max(5, args.rounds), "num_cpus": 1},
    )
    start_ray(args.ray_cpus)
    load_before = os.getloadavg()[0]
    url = start_serve(config)
    session = requests.Session()
    try:
        base_body = {"model": BASE, "labels": names, "aliases": aliases, "template": template}
        classify(session, url, base_body, held.texts[:8])  # warm-up: the base replica and its label cache
        body = {"name": NAME, "labels": names, "aliases": aliases, "template": template, "texts": train.texts,
                "dev": {"texts": dev.texts, "labels": dev.labels}, "rounds": args.rounds}
        posted = time.perf_counter()
        created = session.post(url + "v1/classifiers", json=body, timeout=TIMEOUT_S)
        if created.status_code != 202:
            raise RuntimeError(f"POST /v1/classifiers: {created.status_code} {created.text[:500]}")
        seen_round = 0
        while True:
            status = session.get(f"{url}v1/classifiers/{NAME}", timeout=TIMEOUT_S).json()
            if status["round"] != seen_round:
                seen_round = status["round"]
                done = status["rounds_done"][-1]
                print(f"round {seen_round}: {done['seconds']:.0f} s, kept {done['kept_per_label']}, "
                      f"dev accuracy {done['dev_accuracy']:.3f}", flush=True)
            if status["state"] == "failed":
                raise RuntimeError(f"training failed: {status.get('reason')}")
            if status["state"] == "ready":
                break
            time.sleep(args.poll_s)
        ready_s = time.perf_counter() - posted
        first = classify(session, url, {"model": NAME}, held.texts[:CHUNK])
        first_s = time.perf_counter() - posted
        print(f"ready {ready_s:.1f} s after the POST; first classification {first_s:.1f} s", flush=True)

        start = time.perf_counter()
        new = first + classify(session, url, {"model": NAME}, held.texts[CHUNK:])
        new_s = (first_s - ready_s) + time.perf_counter() - start  # its first request loads the model
        start = time.perf_counter()
        base = classify(session, url, base_body, held.texts)
        base_s = time.perf_counter() - start
        new_acc, base_acc = accuracy(new, held.labels), accuracy(base, held.labels)
        load_after = os.getloadavg()[0]
    finally:
        for name in classifier_job.active():
            classifier_job.stop(name)
        serve.shutdown()
        shutil.rmtree(registry, ignore_errors=True)

    rounds = status["rounds_done"]
    rows = [["training texts / dev / held-out rows", f"{len(train)} / {len(dev)} / {len(held)}"],
            ["POST → ready, s", f"{ready_s:.1f}"],
            ["POST → first classification by the new model, s", f"{first_s:.1f}"]]
    rows += [[f"round {r['round']}: seconds / steps / pairs", f"{r['seconds']:.1f} / {r['steps']} / {r['pairs']}"]
             for r in rounds]
    rows += [[f"round {r['round']}: kept per label",
              " ".join(f"{label}:{r['kept_per_label'].get(label, 0)}" for label in names)] for r in rounds]
    rows += [["dev accuracy untrained", status["dev_accuracy_untrained"]]]
    rows += [[f"dev accuracy after round {r['round']}", r["dev_accuracy"]] for r in rounds]
    rows += [[f"held-out accuracy, base {BASE} (zero-shot)", base_acc],
             [f"held-out accuracy, new {NAME}", new_acc],
             ["held-out texts/s, base / new", f"{len(held) / base_s:.1f} / {len(held) / new_s:.1f}"],
             ["load average (1 min) before / after", f"{load_before:.2f} / {load_after:.2f}"]]
    print(format_table(rows, headers=[f"classifier over HTTP: AG News, {args.texts} texts, {args.rounds} rounds",
                                      "value"]), flush=True)
    result = {"texts": len(train), "dev": len(dev), "held_out": len(held), "rounds": args.rounds,
              "seed": args.seed, "base_model": args.model, "labels": names, "aliases": aliases,
              "template": template, "post_to_ready_s": ready_s, "post_to_first_classification_s": first_s,
              "rounds_done": rounds, "dev_accuracy_untrained": status["dev_accuracy_untrained"],
              "held_out_accuracy": {"base": base_acc, "new": new_acc},
              "held_out_seconds": {"base": base_s, "new": new_s},
              "training": {k: status.get(k) for k in ("created", "started", "finished", "version",
                                                      "guard_untrained", "chosen_round", "stop_reason")},
              "load_average": [load_before, load_after], "ray_cpus": args.ray_cpus}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
        print(f"written to {args.out}")
    else:
        print(f"written to {write_result('classifier_http', result)}")


if __name__ == "__main__":
    main()
