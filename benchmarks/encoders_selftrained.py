"""Encoders self-trained side by side: the WC-SBERT job with each encoder on each label set, untrained and
after its rounds, with the time each run took; the table is written for the docs.

    python benchmarks/encoders_selftrained.py [--encoders bundled:minilm bundled:mpnet] [--datasets agnews vital]
                                              [--pool-rows 800] [--eval-rows 500] [--rounds 1]
                                              [--out runs/zeroshot_encoders]

Each cell is one run of ``benchmarks/zeroshot.py``'s ``untrained`` and ``default`` variants with
``--encoder``: the job's shipped settings on a seeded pool of one half of the texts (labels never read), scored
on a sample of the other half. Runs already complete under ``--out`` are read back, not redone. The summary
goes to ``benchmarks/results/encoders_selftrained.json`` and the table to
``docs/generated/encoders_selftrained.md`` (``tests/test_encoders_page.py`` checks that one is the other).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import REPO_ROOT  # noqa: E402

SUMMARY = REPO_ROOT / "benchmarks" / "results" / "encoders_selftrained.json"
PAGE = REPO_ROOT / "docs" / "generated" / "encoders_selftrained.md"
DATASET_NAMES = {"agnews": "AG News (4 labels)", "20ng": "20 Newsgroups, readable names (20)",
                 "vital": "Vital topics (11)"}


def render_page(summary: dict) -> str:
    """The markdown table of ``summary`` (what ``main`` writes to PAGE)."""
    lines = [f"Pool {summary['pool_rows']} texts, {summary['eval_rows']} evaluation rows, "
             f"{summary['rounds']} round(s); accuracy on the evaluation rows.", "",
             "| label set | encoder | untrained | untrained, pool prototypes | self-trained, delivered "
             "| its pool prototypes | seconds | × the first encoder's time |", "|---|---|---|---|---|---|---|---|"]
    for dataset in summary["datasets"]:
        rows = [row for row in summary["rows"] if row["dataset"] == dataset]
        base = rows[0]["seconds"]
        for row in rows:
            lines.append(
                f"| {DATASET_NAMES.get(dataset, dataset)} | `{row['encoder']}` | {row['untrained']:.3f} | "
                f"{row['untrained_prototypes']:.3f} | **{row['delivered']:.3f}** (round {row['round']}, "
                f"{row['head']} head) | {row['prototypes']:.3f} | {row['seconds']:.0f} | {row['seconds'] / base:.1f}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoders", nargs="+", default=["bundled:minilm", "bundled:mpnet"])
    parser.add_argument("--datasets", nargs="+", default=["agnews", "vital"], choices=list(DATASET_NAMES))
    parser.add_argument("--pool-rows", type=int, default=800)
    parser.add_argument("--eval-rows", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "zeroshot_encoders")
    parser.add_argument("--verbose", action="store_true", help="print Ray's own logs too")
    args = parser.parse_args()
    from contrastext.console import configure_console
    from zeroshot import run_one

    configure_console(verbose=args.verbose)
    args.out, args.best, args.set = args.out.resolve(), [], []
    rows = []
    for dataset in args.datasets:
        for encoder in args.encoders:
            args.encoder = encoder
            untrained, trained = (run_one(dataset, variant, args) for variant in ("untrained", "default"))
            rows.append({"dataset": dataset, "encoder": encoder, "untrained": untrained["accuracy"],
                         "untrained_prototypes": untrained["prototypes"], "delivered": trained["delivered"],
                         "round": trained["chosen_round"], "head": trained["head"],
                         "prototypes": trained["prototypes"], "seconds": trained["seconds"],
                         "untrained_seconds": untrained["seconds"]})
            print(f"{dataset} {encoder}: {untrained['accuracy']:.4f} → {trained['delivered']:.4f} "
                  f"({trained['seconds']:.0f} s)", flush=True)
    summary = {"pool_rows": args.pool_rows, "eval_rows": args.eval_rows, "rounds": args.rounds,
               "datasets": args.datasets, "encoders": args.encoders, "rows": rows}
    SUMMARY.parent.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text(json.dumps(summary, indent=1) + "\n")
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(render_page(summary))
    print(render_page(summary))
    print(f"{SUMMARY.relative_to(REPO_ROOT)} and {PAGE.relative_to(REPO_ROOT)} written")


if __name__ == "__main__":
    main()
