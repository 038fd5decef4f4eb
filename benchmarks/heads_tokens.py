"""How many tokens a text is read at, and a head between the prompts and the prototypes, on the guard record's
label sets: accuracy of the untrained model and of one self-training round, each scored with every head.

    python benchmarks/heads_tokens.py [--sets 20ng agnews ...] [--seed 0] [--rows 800] [--tokens 128 256 512]

For each set (the pool and evaluation texts of ``guard_record.py``, the pool's labels never read) the class
self-trains one round (``WCSBert(rounds=1, guard=False)``: shipped settings, a round trains on 64 tokens).
The untrained and the trained encoder then read the pool and the evaluation texts at each token limit, and
the evaluation texts are classified by label vectors between the prompt head (weight 0) and the prototype
head (weight 1): each label string's vector is the renormalised ``(1 - w) · prompt + w · prototype``.
Writes ``benchmarks/results/heads_tokens.json`` (rows of other sets and seeds kept).
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

RESULT = REPO_ROOT / "benchmarks" / "results" / "heads_tokens.json"
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def head_accuracies(encoder, label_set, template: str, pool: list[str], texts: list[str], gold: np.ndarray,
                    tokens: int) -> dict[str, float]:
    """Accuracy on ``texts`` of each weight's head, the prototypes made from ``pool``, both read at ``tokens``."""
    from contrastext.methods.wcsbert.heads import LabelHead
    from contrastext.vectors import unit_rows
    from contrastext.zeroshot import label_scores

    prompts = LabelHead.from_prompts(encoder, label_set, [template])
    prototypes = prompts.prototypes(encoder.encode(pool, batch_size=64, max_length=tokens))
    embeddings = encoder.encode(texts, batch_size=64, max_length=tokens)
    accuracy = {}
    for weight in WEIGHTS:
        vectors = unit_rows((1 - weight) * unit_rows(prompts.vectors) + weight * unit_rows(prototypes.vectors))
        predicted = label_scores(embeddings, vectors, prompts.owner, prompts.n_labels).argmax(axis=1)
        accuracy[str(weight)] = float((predicted == gold).mean())
    return accuracy


def run(name: str, seed: int, rows: int, tokens: list[int]) -> dict:
    from contrastext import WCSBert
    from contrastext.models import TextEncoder
    from contrastext.zeroshot import LabelSet

    spec = SETS[name]
    pool, evaluation = pool_and_eval(spec, spec.pool_rows or rows, spec.pool_rows or rows, seed)
    names = evaluation.label_names
    aliases = {k: v for k, v in spec.aliases.items() if k in names}
    gold = np.array([names.index(label) for label in evaluation.labels])
    started = time.perf_counter()
    trained = WCSBert(rounds=1, guard=False, template=spec.template).fit(pool.texts, names, aliases)
    row = {"set": name, "seed": seed, "labels": len(names), "pool": len(pool), "eval": len(evaluation),
           "train_s": round(time.perf_counter() - started, 1)}
    label_set = LabelSet.build(names, aliases)
    for stage, encoder in (("untrained", TextEncoder.from_pretrained("bundled:minilm")), ("round 1", trained.encoder_)):
        for limit in tokens:
            row[f"{stage}, {limit}"] = head_accuracies(encoder, label_set, spec.template, pool.texts,
                                                       evaluation.texts, gold, limit)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["20ng", "20ng_names", "20ng_10", "20ng_comp_talk", "agnews",
                                                       "agnews_sports_rare", "vital", "vital_rest", "bbcsport",
                                                       "bbcsport_as_written"], choices=list(SETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", type=int, default=800, help="pool and evaluation texts of each set")
    parser.add_argument("--tokens", nargs="+", type=int, default=[128, 256, 512])
    args = parser.parse_args()
    earlier = json.loads(RESULT.read_text())["rows"] if RESULT.exists() else []
    rows = [row for row in earlier if (row["set"], row["seed"]) not in {(s, args.seed) for s in args.sets}]
    for name in args.sets:
        rows.append(run(name, args.seed, args.rows, args.tokens))
        RESULT.write_text(json.dumps({"weights": list(WEIGHTS), "rows": rows}, indent=1) + "\n")
    table = []
    for row in rows:
        for key, accuracy in row.items():
            if isinstance(accuracy, dict):
                best = max(accuracy, key=accuracy.get)
                table.append([row["set"], row["seed"], key, *(f"{accuracy[str(w)]:.3f}" for w in WEIGHTS),
                              f"{best} ({accuracy[best]:.3f})"])
    print(format_table(table, headers=["set", "seed", "model, tokens", *(f"w={w}" for w in WEIGHTS), "best"]))


if __name__ == "__main__":
    main()
