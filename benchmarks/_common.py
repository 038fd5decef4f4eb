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


def ag_news_rows(limit: int) -> list[tuple[str, str]]:
    """(title, description) of the first ``limit`` AG News test rows; exits with a reason if absent."""
    path = DATA_DIR / "ag_news" / "test.csv"
    if not path.is_file():
        sys.exit(f"benchmark needs {path} (set CONTRASTEXT_DATA to the folder holding ag_news/)")
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for _, title, description in csv.reader(f):
            rows.append((title.strip(), description.replace("\\", " ").strip()))
            if len(rows) == limit:
                break
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
