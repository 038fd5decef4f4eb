"""The encoders' self-trained table on the docs page is generated from the benchmark's summary JSON."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import encoders_selftrained  # noqa: E402


def test_the_page_is_the_summary_rendered():
    summary = json.loads(encoders_selftrained.SUMMARY.read_text(encoding="utf-8"))
    assert encoders_selftrained.PAGE.read_text(encoding="utf-8") == encoders_selftrained.render_page(summary)
    assert {row["encoder"] for row in summary["rows"]} == set(summary["encoders"])


def test_a_row_shows_the_delivered_model_and_its_time_against_the_first_encoder():
    row = {"dataset": "agnews", "untrained": 0.7, "untrained_prototypes": 0.8, "delivered": 0.85, "round": 1,
           "head": "prompts", "prototypes": 0.86, "untrained_seconds": 10.0}
    summary = {"pool_rows": 800, "eval_rows": 500, "rounds": 1, "datasets": ["agnews"],
               "rows": [row | {"encoder": "small", "seconds": 100.0}, row | {"encoder": "big", "seconds": 800.0}]}
    page = encoders_selftrained.render_page(summary)
    assert "| AG News (4 labels) | `big` | 0.700 | 0.800 | **0.850** (round 1, prompts head) | 0.860 | 800 | 8.0× |" in page
    assert "| 100 | 1.0× |" in page
