"""Helpers shared by the benchmarks: the real texts they run on, timing, and result files."""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CONTRASTEXT_DATA", REPO_ROOT.parent / "shared" / "data"))
AG_NEWS_TEST = DATA_DIR / "ag_news" / "test.csv"
# Set to 1 to get synthetic rows instead of an exit when AG News is absent (dry runs on a bare clone).
SYNTHETIC_IF_MISSING = "BENCHMARK_SYNTHETIC_IF_MISSING"


def ag_news_rows(limit: int) -> list[tuple[str, str]]:
    """(title, description) of the first ``limit`` AG News test rows; exits with a reason if absent."""
    if not AG_NEWS_TEST.is_file():
        if os.environ.get(SYNTHETIC_IF_MISSING) == "1":
            print(f"{AG_NEWS_TEST} absent: synthetic texts", file=sys.stderr)
            return synthetic_rows(limit)
        sys.exit(f"benchmark needs {AG_NEWS_TEST} (set CONTRASTEXT_DATA to the folder holding ag_news/)")
    rows = []
    with open(AG_NEWS_TEST, newline="", encoding="utf-8") as f:
        for _, title, description in csv.reader(f):
            rows.append((title.strip(), description.replace("\\", " ").strip()))
            if len(rows) == limit:
                break
    return rows


def synthetic_rows(limit: int) -> list[tuple[str, str]]:
    """Deterministic news-like (title, description) rows of varied length, for runs without the data."""
    topics = ["markets", "football", "elections", "chips", "storms", "vaccines", "rockets", "banks"]
    verbs = ["rise", "fall", "surprise", "stall", "recover", "expand", "slow", "split"]
    rows = []
    for i in range(limit):
        topic, verb = topics[i % len(topics)], verbs[(i * 3) % len(verbs)]
        words = (f"{topics[(i + k) % len(topics)]} {verbs[(i + 2 * k) % len(verbs)]}" for k in range(4 + i % 20))
        body = " ".join(words)
        rows.append((f"{topic.title()} {verb} in week {i}", f"Analysts say {body}."))
    return rows


def best_of(repeats: int, run: Callable[[], float]) -> tuple[float, list[float]]:
    """Run ``run`` (returns seconds) ``repeats`` times; the median is what we compare."""
    times = [run() for _ in range(repeats)]
    return statistics.median(times), times


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def write_result(name: str, result: dict) -> Path:
    out = Path(os.environ.get("BENCHMARK_OUT", REPO_ROOT / "runs" / "benchmarks")) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    return out
