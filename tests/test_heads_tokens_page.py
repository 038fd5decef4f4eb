"""The token-limit and head-blend table on the docs page is generated from the benchmark's JSON."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import heads_tokens  # noqa: E402


def test_the_page_is_the_json_rendered():
    summary = json.loads(heads_tokens.RESULT.read_text(encoding="utf-8"))
    assert heads_tokens.PAGE.read_text(encoding="utf-8") == heads_tokens.render_page(summary)


def test_a_line_shows_each_weight_and_marks_the_best():
    summary = {"weights": [0.0, 0.5, 1.0], "rows": [{"set": "agnews", "seed": 0, "labels": 4, "train_s": 9.0,
                                                     "untrained, 128": {"0.0": 0.7, "0.5": 0.8, "1.0": 0.75}}]}
    assert "| agnews | 0 | untrained, 128 | 0.700 | **0.800** | 0.750 |" in heads_tokens.render_page(summary)
