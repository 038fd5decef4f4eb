"""UCTopic's CCL on many entity sets, each with its real types: NMI/ACC of the start model, of every CCL epoch,
and of what each label-free rule delivers, against the oracle epoch (the best by gold NMI).

    python benchmarks/uctopic_entities.py [--sets conll_test,conll_dev_misc] [--epochs 3] [--max-instances 2000]
                                          [--seeds 0] [--model bundled:minilm] [--out runs/uctopic_entities]
                                          [--set finetune.positives=topic] [--name uctopic_entities]

The sets come from CoNLL-2003 (``../shared/data/ner/conll2003``): the test split with PER/LOC/ORG (the set the
job's defaults were first run on), the test and dev splits with MISC too, and slices of the train split's
documents with other type subsets, so that a rule is not designed on one set. Each set is clustered with k =
its number of types. Every rule's choice is read from the same epochs: ``start`` (no CCL), ``last`` and the
label-free scores of ``contrastext.methods.uctopic.ccl``. Every epoch is run (``finetune.min_loss`` off) and the
job's stop at a fit with nothing left to learn is replayed from the fits' losses. The untrained encoder is also
scored on the same entities with the span in context alone (``phrase_vectors: in_context``, the vectors before the
phrase alone was added). Results go to ``runs/benchmarks/<name>.json``.

The record of the shipped settings, ``benchmarks/results/uctopic_entities.json``, and its docs page,
``docs/generated/uctopic_entities.md``, take a run's sets with ``--record`` (or earlier runs' result files with
``--record-from FILE ...``; ``--page-only`` writes the page again). Only runs of the shipped settings go in: no
``--set``, the untrained encoder as the start.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import DATA_DIR, REPO_ROOT, write_result  # noqa: E402

from contrastext.console import configure_console  # noqa: E402
from contrastext.report import format_table  # noqa: E402

CONLL = DATA_DIR / "ner" / "conll2003"
RULES = ("start", "last", "anchored_silhouette", "context_silhouette", "start_silhouette", "silhouette")
RECORD = REPO_ROOT / "benchmarks" / "results" / "uctopic_entities.json"
PAGE = REPO_ROOT / "docs" / "generated" / "uctopic_entities.md"
EPOCH_KEYS = ("epoch", "gold_nmi", "gold_acc", "loss", "silhouette", "context_silhouette", "start_silhouette",
              "anchored_silhouette", "start_agreement")


@dataclass(frozen=True)
class EntitySet:
    name: str
    file: str
    labels: tuple[str, ...]
    documents: tuple[int, int] | None = None  # [first, end) CoNLL documents


ENTITY_SETS = (
    EntitySet("conll_test", "eng.testb", ("PER", "LOC", "ORG")),
    EntitySet("conll_test_misc", "eng.testb", ("PER", "LOC", "ORG", "MISC")),
    EntitySet("conll_dev", "eng.testa", ("PER", "LOC", "ORG")),
    EntitySet("conll_dev_misc", "eng.testa", ("PER", "LOC", "ORG", "MISC")),
    EntitySet("train_docs_0_236_misc", "eng.train", ("PER", "LOC", "ORG", "MISC"), (0, 236)),
    EntitySet("train_docs_236_472_per_loc_org", "eng.train", ("PER", "LOC", "ORG"), (236, 472)),
    EntitySet("train_docs_472_708_loc_org", "eng.train", ("LOC", "ORG"), (472, 708)),
    EntitySet("train_docs_708_945_per_org_misc", "eng.train", ("PER", "ORG", "MISC"), (708, 945)),
    EntitySet("dev_per_loc", "eng.testa", ("PER", "LOC")),
    EntitySet("train_docs_0_472_org_misc", "eng.train", ("ORG", "MISC"), (0, 472)),
)


def run_set(entity_set: EntitySet, args: argparse.Namespace, seed: int) -> dict:
    from contrastext.config import load_config
    from contrastext.methods.uctopic.config import UCTopicConfig
    from contrastext.pipelines.uctopic import run_uctopic

    documents = f"[{entity_set.documents[0]},{entity_set.documents[1]}]" if entity_set.documents else "null"
    overrides = [f"model={args.model}", f"seed={seed}", f"train.seed={seed}",
                 f"finetune.data.conll={CONLL / entity_set.file}",
                 f"finetune.data.labels=[{','.join(entity_set.labels)}]",
                 f"finetune.data.conll_documents={documents}", f"finetune.data.max_instances={args.max_instances}",
                 f"finetune.epochs={args.epochs}", f"finetune.topics.n_topics={len(entity_set.labels)}",
                 f"output.storage_path={args.out}", f"output.name={entity_set.name}-seed{seed}",
                 "finetune.min_loss=null", *args.overrides]  # every epoch runs: the stop rule is replayed
    config = load_config(UCTopicConfig, REPO_ROOT / "configs" / "uctopic_conll.yaml", overrides)
    summary = run_uctopic(config)
    epochs = summary["epochs"]
    picks = {"start": epochs[0], "last": epochs[-1], "delivered": epochs[summary["chosen_epoch"]]}
    for rule in RULES[2:]:
        picks[rule] = max(epochs, key=lambda r, key=rule: (r[key], -r["epoch"]))
    oracle = max(epochs, key=lambda r: r["gold_nmi"])
    untrained = None
    if args.model != args.untrained:  # the same instances, clustered the same way, with the untrained encoder
        untrained = untrained_scores(config, args.untrained)
    # the untrained encoder with the span in context alone, the phrase vectors before the phrase alone was added
    in_context = untrained_scores(config, args.untrained, vectors="in_context")
    return {"set": entity_set.name, "seed": seed, "select_by": summary["select_by"], "untrained_in_context": in_context,
            "instances": summary["counts"]["instances"],
            "k": summary["k"], "epochs": epochs, "oracle_nmi": oracle["gold_nmi"], "untrained": untrained,
            "picks": {rule: {"epoch": row["epoch"], "nmi": row["gold_nmi"], "acc": row["gold_acc"]}
                      for rule, row in picks.items()}}


def untrained_scores(config, model: str, vectors: str | None = None) -> dict[str, float]:
    from contrastext.methods.uctopic.encoder import PhraseEncoder
    from contrastext.pipelines.uctopic import entity_clustering

    data = config.finetune.data
    evaluation = config.evaluation.model_copy(update={
        "conll": data.conll, "labels": data.labels, "conll_documents": data.conll_documents,
        "max_instances": data.max_instances, "k": config.finetune.topics.n_topics})
    encoder = PhraseEncoder.from_pretrained(model, max_length=config.max_length, backend=config.train.encoder.backend,
                                            vectors=vectors or config.phrase_vectors)
    scores = entity_clustering(encoder, evaluation, config)
    return {"nmi": scores["nmi"], "acc": scores["acc"]}


def _nmi_acc(scores: dict) -> str:
    return f"{scores['nmi']:.3f} / {scores['acc']:.3f}"


def rule_table(results: list[dict]) -> tuple[list[list], dict]:
    """Per rule: mean loss against the oracle, worst drop below the start model, how often it beat the start."""
    rows, record = [], {}
    for rule in RULES:
        losses = [r["oracle_nmi"] - r["picks"][rule]["nmi"] for r in results]
        gains = [r["picks"][rule]["nmi"] - r["picks"]["start"]["nmi"] for r in results]
        record[rule] = {"mean_loss": statistics.mean(losses), "max_loss": max(losses),
                        "mean_gain": statistics.mean(gains), "worst_gain": min(gains)}
        rows.append([rule, f"{record[rule]['mean_loss']:.4f}", f"{record[rule]['max_loss']:.4f}",
                     f"{record[rule]['mean_gain']:+.4f}", f"{record[rule]['worst_gain']:+.4f}"])
    return rows, record


def record_row(result: dict) -> dict:
    """What the record keeps of one set's run: the scores of every epoch, not the run's folders."""
    return {"set": result["set"], "seed": result["seed"], "k": result["k"], "instances": result["instances"],
            "untrained_in_context": result["untrained_in_context"],
            "epochs": [{key: row.get(key) for key in EPOCH_KEYS} for row in result["epochs"]]}


def add_to_record(runs: list[dict]) -> dict:
    """The sets of ``runs`` (result files of the shipped settings) into the record, replacing the same set and
    seed; writes the record and its page."""
    from contrastext.methods.uctopic.config import FinetuneSettings

    shipped_epochs = FinetuneSettings.model_fields["epochs"].default
    for run in runs:
        if (run["settings"] or run["model"] != "bundled:minilm" or run["max_instances"] != 2000
                or run["epochs"] != shipped_epochs):
            sys.exit(f"the record holds the shipped settings ({shipped_epochs} CCL epochs) from the untrained encoder, "
                     f"2,000 entities a set; this run had {run['settings'] or run['model']}, {run['epochs']} epochs, "
                     f"{run['max_instances']} entities")
    rows = json.loads(RECORD.read_text())["rows"] if RECORD.exists() else []
    new = [record_row(result) for run in runs for result in run["results"]]
    replaced = {(row["set"], row["seed"]) for row in new}
    rows = sorted([row for row in rows if (row["set"], row["seed"]) not in replaced] + new,
                  key=lambda row: (row["seed"], [s.name for s in ENTITY_SETS].index(row["set"])))
    record = {"epochs": max(len(row["epochs"]) - 1 for row in rows), "rows": rows}
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    PAGE.write_text(render_page(record), encoding="utf-8")
    return record


def shipped_choice(epochs: list[dict]) -> dict:
    """The epoch the job delivers, replayed: the epochs stop before the first fit whose mean loss is under
    ``finetune.min_loss``, and the best of those before it by ``finetune.select_by`` is delivered."""
    from contrastext.methods.epochs import chosen_epoch
    from contrastext.methods.uctopic.ccl import learned_nothing
    from contrastext.methods.uctopic.config import FinetuneSettings

    fields = FinetuneSettings.model_fields
    min_loss, select_by = fields["min_loss"].default, fields["select_by"].default
    kept = [epochs[0]]
    for row in epochs[1:]:
        if learned_nothing(row["loss"], min_loss):
            break
        kept.append(row)
    return chosen_epoch(kept, select_by)


def _chosen(select_by: str):
    from contrastext.methods.epochs import chosen_epoch

    return lambda epochs: chosen_epoch(epochs, select_by)


#: label-free ways to pick the delivered epoch, compared on the record (the first two read no score)
PAGE_RULES = {
    "the start model (no CCL)": lambda epochs: epochs[0],
    "epoch 1": lambda epochs: epochs[min(1, len(epochs) - 1)],
    "the last epoch": _chosen("last"),
    "own silhouette": _chosen("silhouette"),
    "`anchored_silhouette` over every epoch": _chosen("anchored_silhouette"),
    "**shipped**: stop at a fit with nothing left to learn, then `anchored_silhouette`": shipped_choice,
}


def render_page(record: dict) -> str:
    """One line per set and draw (NMI / ACC of the untrained encoder, of each epoch and of what was delivered),
    then each epoch rule's loss against the best epoch and its gain over the start and the untrained encoder."""
    rows, epochs = record["rows"], record["epochs"]
    lines = ["Generated by `python benchmarks/uctopic_entities.py` from `benchmarks/results/uctopic_entities.json`: "
             "CCL with the shipped settings from the bundled MiniLM, 2,000 entities a set, k = its number of types. "
             "NMI / ACC against the types, which no rule reads; the best epoch's NMI in bold. Every epoch was run; "
             "delivered is the job's rule replayed on them.", "",
             "| set | draw | k | untrained, span in context | start (epoch 0) | "
             + " | ".join(f"epoch {e}" for e in range(1, epochs + 1)) + " | delivered |",
             "|---|---|---|---|---|" + "---|" * epochs + "---|"]
    for row in rows:
        best = max(e["gold_nmi"] for e in row["epochs"])
        cells = [(f"**{e['gold_nmi']:.3f}**" if e["gold_nmi"] == best else f"{e['gold_nmi']:.3f}")
                 + f" / {e['gold_acc']:.3f}" for e in row["epochs"]]
        cells += [""] * (epochs + 1 - len(cells))
        delivered = shipped_choice(row["epochs"])
        lines.append(f"| {row['set']} | {row['seed']} | {row['k']} | {_nmi_acc(row['untrained_in_context'])} | "
                     + " | ".join(cells) + f" | {delivered['gold_nmi']:.3f} (epoch {delivered['epoch']}) |")
    draws = sorted({row["seed"] for row in rows})
    lines += ["", f"Each rule over the {len(rows)} runs (NMI; loss: the best epoch's minus the chosen one's; the mean "
              "loss on each draw too, since `finetune.min_loss` was set on draw 0):", "",
              "| rule | " + " | ".join(f"mean loss, draw {d}" for d in draws) + " | mean loss | worst loss | "
              "mean gain over the start | worst gain over the start | mean gain over the untrained span in context |",
              "|---|" + "---|" * (len(draws) + 5)]
    for name, rule in PAGE_RULES.items():
        chosen = [rule(row["epochs"])["gold_nmi"] for row in rows]
        losses = [max(e["gold_nmi"] for e in row["epochs"]) - c for row, c in zip(rows, chosen)]
        gains = [c - row["epochs"][0]["gold_nmi"] for row, c in zip(rows, chosen)]
        over = [c - row["untrained_in_context"]["nmi"] for row, c in zip(rows, chosen)]
        by_draw = [statistics.mean(loss for loss, row in zip(losses, rows) if row["seed"] == d) for d in draws]
        lines.append(f"| {name} | " + " | ".join(f"{loss:.3f}" for loss in by_draw)
                     + f" | {statistics.mean(losses):.3f} | {max(losses):.3f} | "
                     f"{statistics.mean(gains):+.3f} | {min(gains):+.3f} | {statistics.mean(over):+.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(s.name for s in ENTITY_SETS))
    parser.add_argument("--epochs", type=int, default=3, help="CCL epochs (the job's default: 3)")
    parser.add_argument("--max-instances", type=int, default=2000)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--model", default="bundled:minilm", help="the start model (e.g. a pretrained one)")
    parser.add_argument("--untrained", default="bundled:minilm",
                        help="scored beside the start model when --model is another one")
    parser.add_argument("--out", default="runs/uctopic_entities")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the finetune stage for every set, e.g. finetune.positives=topic")
    parser.add_argument("--name", default="uctopic_entities", help="the result file's name")
    parser.add_argument("--record", action="store_true", help="add the sets run to the record of the shipped "
                                                               "settings and write its docs page")
    parser.add_argument("--record-from", nargs="+", metavar="FILE", help="add earlier runs' result files to the "
                                                                         "record, run nothing")
    parser.add_argument("--page-only", action="store_true", help="write the docs page from the record, run nothing")
    args = parser.parse_args()
    if args.page_only:
        PAGE.write_text(render_page(json.loads(RECORD.read_text())), encoding="utf-8")
        return
    if args.record_from:
        add_to_record([json.loads(Path(path).read_text()) for path in args.record_from])
        print(f"wrote {RECORD} and {PAGE}")
        return
    configure_console()
    if not CONLL.is_dir():
        sys.exit(f"benchmark needs {CONLL} (set CONTRASTEXT_DATA to the folder holding ner/conll2003/)")
    wanted = args.sets.split(",")
    unknown = set(wanted) - {s.name for s in ENTITY_SETS}
    if unknown:
        sys.exit(f"unknown sets {sorted(unknown)}; known: {[s.name for s in ENTITY_SETS]}")
    results = [run_set(s, args, int(seed)) for seed in args.seeds.split(",")
               for s in ENTITY_SETS if s.name in wanted]

    per_set = [[r["set"], r["seed"], r["instances"], r["k"], _nmi_acc(r["untrained_in_context"])]
               + ([_nmi_acc(r["untrained"])] if r["untrained"] else [])
               + [_nmi_acc(r["picks"]["start"]), _nmi_acc(r["picks"]["last"]),
                  f"{_nmi_acc(r['picks']['delivered'])} (epoch {r['picks']['delivered']['epoch']})",
                  f"{r['oracle_nmi']:.3f}"] for r in results]
    start = "start (pretrained)" if args.model != args.untrained else "untrained"
    print(format_table(per_set, headers=["set", "seed", "entities", "k", "untrained, in context",
                                         *(["untrained"] if args.model != args.untrained else []), start,
                                         f"CCL epoch {args.epochs}", f"delivered ({results[0]['select_by']})",
                                         "oracle NMI"]))
    rows, record = rule_table(results)
    print(format_table(rows, headers=["rule", "mean loss vs oracle", "max loss", "mean gain vs start",
                                      "worst gain vs start"]))
    run = {"sets": [asdict(s) for s in ENTITY_SETS if s.name in wanted], "epochs": args.epochs,
           "max_instances": args.max_instances, "model": args.model, "settings": args.overrides,
           "results": results, "rules": record}
    print(f"wrote {write_result(args.name, run)}")
    if args.record:
        add_to_record([run])
        print(f"wrote {RECORD} and {PAGE}")


if __name__ == "__main__":
    main()
