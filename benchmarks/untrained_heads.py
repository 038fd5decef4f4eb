"""Which head the guard delivers an untrained model with (``WCSBert(rounds=0)``), against the better of the two
on labelled texts, over the guard record's label sets and resamplings of each (other pool and evaluation seeds).

    python benchmarks/untrained_heads.py [--sets agnews 20ng ...] [--seeds 0 1] [--pool-rows 1000] [--eval-rows 800]

Seed 0 is the guard record's own sample of each set; other seeds draw other pools and evaluation texts from
the same halves. The pool's labels are never read; the evaluation texts' labels score both heads. Writes
``benchmarks/results/untrained_heads.json``, keeping its rows for the sets and seeds not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import REPO_ROOT  # noqa: E402
from guard_record import SETS, pool_and_eval  # noqa: E402

from contrastext.report import format_table  # noqa: E402

RESULT = REPO_ROOT / "benchmarks" / "results" / "untrained_heads.json"


def run(name: str, seed: int, args) -> dict:
    from contrastext import WCSBert

    spec = SETS[name]
    pool, evaluation = pool_and_eval(spec, spec.pool_rows or args.pool_rows, spec.pool_rows or args.eval_rows, seed)
    names = evaluation.label_names
    aliases = {k: v for k, v in spec.aliases.items() if k in names}
    started = time.perf_counter()
    # 128 tokens and the two heads this record compares, as when the recorded figures were made
    model = WCSBert(rounds=0, template=spec.template, max_length=128, heads=["prompts", "prototypes"]).fit(
        pool.texts, names, aliases)
    seconds = time.perf_counter() - started
    gold = np.array([names.index(label) for label in evaluation.labels])
    embeddings = model.encoder_.encode(evaluation.texts, batch_size=64)
    delivered = model.head.scores(embeddings).argmax(1)
    accuracy = {model.chosen_head_: float((delivered == gold).mean())}
    other = "prompts" if model.chosen_head_ == "prototypes" else "prototypes"
    alone = WCSBert(rounds=0, template=spec.template, heads=[other], max_length=128).fit(pool.texts, names, aliases)  # the other head
    accuracy[other] = float((alone.head.scores(embeddings).argmax(1) == gold).mean())
    guard = model.guard_round_0_ or {}
    row = {"set": name, "seed": seed, "labels": len(names), "pool": len(pool), "eval": len(evaluation),
           "guard_heads": guard.get("guard_heads"), "chosen": model.chosen_head_,
           "accuracy": accuracy, "delivered": float((delivered == gold).mean()),
           "oracle": max(accuracy.values()), "seconds": round(seconds, 1)}
    row["loss"] = round(row["oracle"] - row["delivered"], 4)
    print(f"  {name} seed {seed}: guard {guard.get('guard_heads')} → {row['chosen']}; "
          f"prompts {accuracy['prompts']:.4f}, prototypes {accuracy['prototypes']:.4f}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--pool-rows", type=int, default=1000)
    parser.add_argument("--eval-rows", type=int, default=800)
    args = parser.parse_args()
    rows = [run(name, seed, args) for seed in args.seeds for name in args.sets
            if not SETS[name].selection]  # a selection setting changes nothing without a round
    sizes = {"pool_rows": args.pool_rows, "eval_rows": args.eval_rows}
    earlier = json.loads(RESULT.read_text()) if RESULT.exists() else {}
    if {k: earlier.get(k) for k in sizes} == sizes:  # an earlier run's rows for the sets and seeds not run now
        ran = {(row["set"], row["seed"]) for row in rows}
        rows = [row for row in earlier["rows"] if (row["set"], row["seed"]) not in ran  # sets still measured
                and row["set"] in SETS and not SETS[row["set"]].selection] + rows
    elif earlier:
        print(f"{RESULT.name} held rows of other sizes ({ {k: earlier.get(k) for k in sizes} }): replaced")
    if not rows:
        raise SystemExit("no decision to record: every set asked for needs a round")
    rows.sort(key=lambda row: (row["seed"], list(SETS).index(row["set"])))
    losses = np.array([row["loss"] for row in rows])
    prompts_loss = np.array([row["oracle"] - row["accuracy"]["prompts"] for row in rows])
    summary = {**sizes, "decisions": len(rows), "mean_loss": float(losses.mean()), "worst_loss": float(losses.max()),
               "mean_loss_prompts_only": float(prompts_loss.mean()),
               "prototypes_chosen": sum(row["chosen"] == "prototypes" for row in rows),
               "below_prompts": sum(row["delivered"] < row["accuracy"]["prompts"] for row in rows),
               "worst_below_prompts": float(max(0.0, *(row["accuracy"]["prompts"] - row["delivered"] for row in rows))),
               "rows": rows}
    RESULT.write_text(json.dumps(summary, indent=2) + "\n")
    print(format_table([[r["set"], r["seed"], " / ".join(f"{v:.3f}" for v in (r["guard_heads"] or {}).values()),
                         r["chosen"], f"{r['accuracy']['prompts']:.4f}", f"{r['accuracy']['prototypes']:.4f}",
                         f"{r['loss']:.4f}"] for r in rows],
                       headers=["set", "seed", "guard prompts / prototypes", "chosen", "prompts", "prototypes",
                                "loss"]))
    print(f"{len(rows)} decisions: mean loss {summary['mean_loss']:.4f} (prompts only {summary['mean_loss_prompts_only']:.4f}), "
          f"worst {summary['worst_loss']:.4f}")


if __name__ == "__main__":
    main()
