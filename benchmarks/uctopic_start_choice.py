"""UCTopic: can a label-free score choose the start model, untrained or a pretraining checkpoint?

    python benchmarks/uctopic_start_choice.py [--models M1 M2 ...] [--sets conll_test,...] [--max-instances 2000]

Each candidate phrase encoder (the untrained one first, then the checkpoints of
``benchmarks/uctopic_pretrain_curve.py``, read from its result unless ``--models`` names them) encodes every
entity set of ``benchmarks/uctopic_entities.py`` and clusters it (k-means, k = the number of types). Each
candidate's clusters get the label-free scores that choose CCL's epoch (``methods.uctopic.ccl``), with the
untrained model as the anchor, and the gold NMI. A rule picks, per set, the candidate its score ranks first;
its loss is the NMI it gives up against the best candidate. Results: ``runs/benchmarks/uctopic_start_choice.json``.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import write_result  # noqa: E402
from uctopic_entities import CONLL, ENTITY_SETS  # noqa: E402

from contrastext.console import configure_console  # noqa: E402
from contrastext.report import format_table  # noqa: E402

RULES = ("silhouette", "context_silhouette", "start_silhouette", "anchored_silhouette")


def score_set(entity_set, models: list[str], encoders: dict, args: argparse.Namespace) -> list[dict]:
    """Every candidate's row of the job's start choice (``choose_start``) on one entity set."""
    from contrastext.methods.uctopic.ccl import choose_start
    from contrastext.methods.uctopic.phrases import read_conll_entities
    from contrastext.methods.uctopic.sources import sample_instances

    found = read_conll_entities(str(CONLL / entity_set.file), list(entity_set.labels),
                                documents=entity_set.documents)
    instances = sample_instances(found, args.max_instances, args.seed)
    gold = [inst.label for inst in instances]
    _, rows = choose_start(instances, models, len(set(gold)),
                           lambda model: encoders[model].encode(instances, batch_size=64), gold=gold, seed=args.seed)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=None,
                        help="candidates, the untrained one first (default: the pretraining curve's)")
    parser.add_argument("--sets", default=",".join(s.name for s in ENTITY_SETS))
    parser.add_argument("--max-instances", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="the entity sample and k-means seed (0: the job's)")
    args = parser.parse_args()
    configure_console()
    from contrastext.methods.uctopic.encoder import PhraseEncoder

    if args.models is None:
        curve = json.load(open("runs/benchmarks/uctopic_pretrain_curve.json"))["curve"]
        args.models = [point["model"] for point in curve]
    encoders = {model: PhraseEncoder.from_pretrained(model, max_length=64) for model in args.models}
    wanted = args.sets.split(",")
    results = {}
    for entity_set in ENTITY_SETS:
        if entity_set.name in wanted:
            results[entity_set.name] = score_set(entity_set, args.models, encoders, args)
            print(f"{entity_set.name}: " + ", ".join(f"{row['gold_nmi']:.3f}" for row in results[entity_set.name]),
                  flush=True)
    table = []
    for rule in ("untrained", *RULES, "oracle"):
        losses, nmis = [], []
        for rows in results.values():
            best = max(row["gold_nmi"] for row in rows)
            if rule == "untrained":
                chosen = rows[0]
            elif rule == "oracle":
                chosen = max(rows, key=lambda row: row["gold_nmi"])
            else:
                chosen = max(rows, key=lambda row: row[rule])
            losses.append(best - chosen["gold_nmi"])
            nmis.append(chosen["gold_nmi"])
        table.append([rule, f"{np.mean(nmis):.3f}", f"{np.mean(losses):.3f}", f"{np.max(losses):.3f}"])
    print(format_table(table, headers=["rule", "mean NMI", "mean loss", "worst loss"]))
    print(f"wrote {write_result('uctopic_start_choice' + (f'_seed{args.seed}' if args.seed else ''), {'seed': args.seed, 'models': args.models, 'sets': results, 'rules': table})}")


if __name__ == "__main__":
    main()
