"""Zero-shot accuracy of the self-training job, option by option, on three label sets.

    python benchmarks/zeroshot.py [--datasets agnews 20ng vital] [--variants untrained base calibration ...]
                                  [--best calibration,crops] [--pool-rows 2000] [--eval-rows 1000]
                                  [--rounds 2] [--encoder bundled:mpnet] [--set KEY=VALUE ...]
                                  [--out runs/zeroshot] [--verbose]

Each row is one run of the ``wcsbert_selftrain`` job (``run_wcsbert``, no Wikipedia pretraining) with the
bundled MiniLM: it self-trains on a seeded sample of one half of the texts (labels never read) and is
scored on a sample of the other half (``--encoder`` self-trains another model: its runs go under a folder
of its own name, its results to ``zeroshot_<encoder>.json``); the figures are the kept model's accuracy with
its prompts and with the head delivered with it (the guard chooses both), the time that of the run that made it.

- agnews: the AG News test set, ``configs/wcsbert_agnews_half.yaml`` (World / Sports / Business / Sci/Tech);
- 20ng: 20 Newsgroups with readable group names, ``configs/wcsbert_20ng_readable.yaml``;
- vital: the Vital-article topics, the job's default data.

Variants: ``untrained`` (no round), ``base`` (the rounds with every option off), one option alone each
(``calibration``, ``templates``: the dataset's prompt ensembled with "This text is about {label}.", ``crops``,
``same_label``), ``best``: the options named by ``--best`` together, ``default``: the shipped settings
(same-label pairs on), and ``probe``, the one row that reads labels to train (a reference, see
``labelled_probe``). Each run also reports, per round, how many of the pool's pseudo-labels and of the
items kept for training were right (``pool_label_quality``: gold labels read after the run). A run
whose folder under ``--out`` is complete is read back, not redone (the job's stages resume).

The guard's and the heads' record across many more label sets (subsets, other names, skewed resamplings),
with every round and head a run could deliver, is ``benchmarks/guard_record.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import DATA_DIR, REPO_ROOT, write_result  # noqa: E402

from contrastext.config import load_config  # noqa: E402
from contrastext.methods.wcsbert.config import WCSBertConfig  # noqa: E402
from contrastext.report import format_table  # noqa: E402

DATASETS = {
    "agnews": REPO_ROOT / "configs" / "wcsbert_agnews_half.yaml",
    "20ng": REPO_ROOT / "configs" / "wcsbert_20ng_readable.yaml",
    "vital": None,
}
SECOND_PROMPT = "This text is about {label}."
OPTIONS = {
    "calibration": ["rounds.calibration.enabled=true"],
    # the dataset's own prompt (the pairs' positives, as without the option) ensembled with a second one
    "templates": ["labels.template='{label}'", "labels.templates=[{template!r}, " + repr(SECOND_PROMPT) + "]"],
    "crops": ["rounds.text_positives.crops=true"],
    "same_label": ["rounds.text_positives.same_label=true"],
}


#: the options the shipped settings turn on, turned off for every variant that does not name them
DEFAULT_ON = {"same_label": "rounds.text_positives.same_label=false"}
VARIANTS = ["untrained", "base", *OPTIONS, "best", "default", "probe"]


def variant_overrides(variant: str, best: list[str], template: str) -> list[str]:
    """The job settings of ``variant``; ``template``: the dataset's own prompt."""
    if variant in ("untrained", "probe"):  # the plain zero-shot model: no round, the prompts delivered
        return ["rounds.rounds=0", "rounds.heads=[prompts]"]
    if variant == "default":
        return []
    options = {"base": [], "best": best}.get(variant, [variant])
    return [off for option, off in DEFAULT_ON.items() if option not in options] + [
        setting.replace("{template!r}", repr(template)) for option in options for setting in OPTIONS[option]]


def _pool_gold(run: Path, config: WCSBertConfig) -> tuple[list[str], np.ndarray, list[int]]:
    """The run's pool texts (as stored: a text's first ``max_words`` words), their gold label ids (-1 where
    a text is not found in the labelled file; read only by this benchmark) and their page ids."""
    import pyarrow.parquet as pq

    from contrastext.data.sources import load_texts

    def key(text: str) -> str:
        return " ".join(text.split()[:config.pool.max_words])

    labelled = load_texts(config.evaluation.texts, data_dir=config.data_dir)
    if config.pool.half is not None:
        labelled = labelled.split_halves(config.pool.split_seed)[config.pool.half == "second"]
    gold_of = {key(t): config.labels.names.index(label) for t, label in zip(labelled.texts, labelled.labels)}
    pages = pq.read_table(run / "pool" / "pages.parquet", columns=["page_id", "text"])
    pool = [key(t) for t in pages.column("text").to_pylist()]
    return pool, np.array([gold_of.get(t, -1) for t in pool]), pages.column("page_id").to_pylist()


def pool_label_quality(run: Path, config: WCSBertConfig, rounds: int) -> list[dict]:
    """For rounds 1..``rounds``, how right the teacher's pseudo-labels were against the pool's gold labels,
    which only this benchmark reads, after the run: over the whole pool, and over the items kept for training."""
    import pyarrow.parquet as pq

    from contrastext.data.h5store import H5Corpus

    pool, gold, page_ids = _pool_gold(run, config)
    row_of_text = {t: i for i, t in enumerate(pool)}
    row_of_page = {page: i for i, page in enumerate(page_ids)}
    # a round's labels are in the order of the pool's stored embeddings
    order = np.array([row_of_page[int(i)] for ids, _ in H5Corpus(run / "round_0" / "embeddings").iter_chunks()
                      for i in ids])
    known = gold >= 0
    out = []
    for r in range(1, rounds + 1):
        labels = np.full(len(pool), -1)
        labels[order] = np.load(run / f"round_{r}" / "pseudo_labels.npy")
        anchors = pq.read_table(run / f"round_{r}" / "pairs").column("anchor").to_pylist()
        kept = np.array(sorted({row_of_text[a] for a in anchors if a in row_of_text}), dtype=int)
        out.append({"round": r, "pool_right": round(float(np.mean(labels[known] == gold[known])), 4),
                    "kept": int(len(kept)),
                    "kept_right": round(float(np.mean(labels[kept] == gold[kept])), 4) if len(kept) else None,
                    "pool_matched": round(float(known.mean()), 4)})
    return out


def labelled_probe(run: Path, config: WCSBertConfig) -> float:
    """The one figure that reads labels to train: a logistic regression on the untrained model's embeddings
    of the pool, fitted to the pool's gold labels, scored on the evaluation set. It tells how well the frozen
    encoder separates the labels at all: a reference for the label-free rows, not one of them."""
    from sklearn.linear_model import LogisticRegression

    from contrastext.data.paths import data_root
    from contrastext.methods.wcsbert.evaluation import load_eval_set
    from contrastext.methods.wcsbert.read_length import settle_read_length

    pool, gold, _ = _pool_gold(run, config)
    known = gold >= 0
    config, _ = settle_read_length(config, str(run / "pool" / "pages.parquet"))  # what the run read (seeded)
    encoder = config.encoder.load()
    features = np.asarray(encoder.encode([t for t, k in zip(pool, known) if k], batch_size=64))
    eval_set, reason = load_eval_set(config, data_root(config.data_dir))
    if eval_set is None:
        raise SystemExit(f"probe: {reason}")
    probe = LogisticRegression(max_iter=2000).fit(features, gold[known])
    predicted = probe.predict(eval_set.evaluator.embed(encoder))
    return float(np.mean(predicted == eval_set.evaluator.label_ids))


def run_one(dataset: str, variant: str, args: argparse.Namespace) -> dict:
    from contrastext.pipelines.wcsbert import run_wcsbert

    out = run_folder(args, dataset)
    sets = ["pretrain.enabled=false", "pool.source=texts", f"pool.max_rows={args.pool_rows}",
            f"evaluation.max_rows={args.eval_rows}", f"rounds.rounds={args.rounds}", "plots=false",
            "evaluation.baselines=false", f"data_dir={DATA_DIR}", f"output.storage_path={out}",
            f"output.name={variant}"]
    if args.encoder:
        sets.append(f"encoder.model={args.encoder}")
    template = load_config(WCSBertConfig, DATASETS[dataset]).labels.template
    sets += variant_overrides(variant, args.best, template) + args.set
    config = load_config(WCSBertConfig, DATASETS[dataset], overrides=sets)
    if variant == "probe":  # on the pool of the untrained run
        run_one(dataset, "untrained", args)
        return probe_row(dataset, args, config)
    timing = out / variant / "zeroshot_seconds.json"  # the run's own time, kept for read-backs
    started = time.perf_counter()
    summary = run_wcsbert(config)
    if not timing.is_file():
        timing.write_text(json.dumps({"seconds": round(time.perf_counter() - started, 1)}))
    seconds = json.loads(timing.read_text())["seconds"]
    rounds = summary["rounds"]
    return {"dataset": dataset, "variant": variant, "accuracy": summary["final"]["accuracy"],
            "macro_f1": summary["final"]["macro_f1"], "chosen_round": summary["chosen_round"],
            "round_accuracy": [r.get("eval_accuracy") for r in rounds],
            "text_pairs": [r.get("text_pairs", 0) for r in rounds],
            "pseudo_labels": pool_label_quality(out / variant, config, len(rounds)),
            "head": summary.get("chosen_head"),
            "delivered": (summary["final"].get("delivered") or {}).get("accuracy", summary["final"]["accuracy"]),
            "prototypes": (summary["final"].get("prototypes") or {}).get("accuracy"),
            "seconds": seconds, "overrides": sets}


def encoder_slug(args: argparse.Namespace) -> str | None:
    """The encoder given by ``--encoder`` as a file name (None: the job's own)."""
    return args.encoder.replace(":", "_").replace("/", "_") if args.encoder else None


def run_folder(args: argparse.Namespace, dataset: str) -> Path:
    """Where a dataset's runs go: under the encoder's name when one is given, so encoders never share a run."""
    slug = encoder_slug(args)
    return args.out / slug / dataset if slug else args.out / dataset


def probe_row(dataset: str, args: argparse.Namespace, config: WCSBertConfig) -> dict:
    """The labelled probe on the pool of the untrained run, timed on its own."""
    started = time.perf_counter()
    accuracy = labelled_probe(run_folder(args, dataset) / "untrained", config)
    return {"dataset": dataset, "variant": "probe", "accuracy": accuracy, "macro_f1": None, "chosen_round": "-",
            "round_accuracy": [], "text_pairs": [], "pseudo_labels": [],
            "seconds": round(time.perf_counter() - started, 1), "overrides": []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--best", type=lambda s: [o for o in s.split(",") if o], default=["calibration"],
                        help="comma-separated options combined in the `best` row")
    parser.add_argument("--pool-rows", type=int, default=2000)
    parser.add_argument("--eval-rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--encoder", default=None, help="the model to self-train (a spec such as "
                        "bundled:mpnet; default: the job's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="one more job setting for every run (repeatable), e.g. rounds.train.max_steps=20")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "zeroshot")
    parser.add_argument("--verbose", action="store_true", help="print Ray's own logs too")
    args = parser.parse_args()
    from contrastext.console import configure_console

    configure_console(verbose=args.verbose)  # a line per stage; Ray's logs go to its log folder
    unknown = sorted(set(args.best) - set(OPTIONS))
    if unknown:
        parser.error(f"--best: unknown options {unknown}; choose from {sorted(OPTIONS)}")
    args.out = args.out.resolve()

    rows: list[dict] = []
    result_name = "zeroshot" + (f"_{encoder_slug(args)}" if args.encoder else "")
    result = {"pool_rows": args.pool_rows, "eval_rows": args.eval_rows, "rounds": args.rounds, "best": args.best,
              "encoder": args.encoder or WCSBertConfig().encoder.model, "settings": args.set, "rows": rows}
    for dataset in args.datasets:
        for variant in args.variants:
            rows.append(run_one(dataset, variant, args))
            write_result(result_name, result)  # after every run: a stopped benchmark keeps what it measured
            delivered = rows[-1].get("delivered")
            print(f"zeroshot: {dataset} {variant}: accuracy {rows[-1]['accuracy']:.4f}"
                  + (f", delivered {delivered:.4f}" if delivered is not None else "")
                  + f" ({rows[-1]['seconds']:.0f} s)", flush=True)
    headers = ["dataset", "variant", "accuracy (prompts)", "delivered (its head)", "macro F1", "kept round",
               "per round",
               "pseudo-labels right: kept / pool, per round", "s"]
    table = format_table([[r["dataset"], r["variant"] + (f" ({'+'.join(args.best)})" if r["variant"] == "best" else ""),
                           f"{r['accuracy']:.4f}", "-" if r.get("delivered") is None else f"{r['delivered']:.4f}",
                           "-" if r["macro_f1"] is None else f"{r['macro_f1']:.4f}",
                           r["chosen_round"], " ".join(f"{a:.3f}" for a in r["round_accuracy"] if a is not None) or "-",
                           " ".join(f"{q['kept_right']:.3f}/{q['pool_right']:.3f}" for q in r["pseudo_labels"]
                                    if q["kept_right"] is not None) or "-",
                           f"{r['seconds']:.0f}"] for r in rows], headers)
    print(table)
    print(f"written to {write_result(result_name, result)}")


if __name__ == "__main__":
    main()
