"""How far self-training could go with a perfect teacher: the job's ``WCSBert`` trained on the pool's gold labels
(every pool text kept), against the same run with its own pseudo-labels.

    python benchmarks/perfect_teacher.py [--set agnews] [--pool-rows 2000] [--eval-rows 1000] [--rounds 2]
                                         [--teachers own gold]

Both runs use the job's settings (``method_of``: the prototype teacher, the label prompts, same-label text
pairs, a round's training) and a label set of ``benchmarks/guard_record.py`` (its seeded pool from one half of
the texts, evaluation texts from the other).
With ``gold``, each round's pairs are built from the pool's gold labels instead of the teacher's; nothing else
changes. After each round: the accuracy of the prompt head on the evaluation texts, and of a labelled probe (a
logistic regression fitted to the whole pool's gold labels on that round's embeddings): what the encoder
separates at all. The teacher's share of right labels on the pool, and on the texts it keeps, is printed as it
goes. Results: ``runs/benchmarks/perfect_teacher.json``.
"""

from __future__ import annotations

import argparse
import os
import time
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("CONTRASTEXT_TRAIN_IN_PROCESS", "1")

import numpy as np  # noqa: E402
from _common import write_result  # noqa: E402
from guard_record import SETS, pool_and_eval  # noqa: E402


def run(teacher: str, args: argparse.Namespace) -> dict:
    from sklearn.linear_model import LogisticRegression

    from contrastext.config import load_config
    from contrastext.methods.wcsbert.config import WCSBertConfig
    from contrastext.methods.wcsbert.heads import LabelHead
    from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
    from contrastext.pipelines.wcsbert import method_of

    spec = SETS[args.set]
    pool, evaluation = pool_and_eval(spec, spec.pool_rows or args.pool_rows, spec.pool_rows or args.eval_rows)
    names = evaluation.label_names
    index = {label: i for i, label in enumerate(names)}
    pool_gold = np.array([index[label] for label in pool.labels])
    eval_gold = np.array([index[label] for label in evaluation.labels])
    config = load_config(WCSBertConfig, None, [f"rounds.rounds={args.rounds}", f"rounds.patience={args.rounds}",
                                               "rounds.min_change=0", f"labels.template={spec.template!r}"])
    method = method_of(config)
    method.work_dir = None
    own_labels = method.pseudo_labels
    teacher_right = []

    def pseudo_labels(self, embeddings, prompt_scores, alias, label_vectors):
        """The teacher's labels (their share right recorded); with ``gold``, the pool's gold labels instead."""
        labels, calibration = own_labels(embeddings, prompt_scores, alias, label_vectors)
        teacher_right.append({"pool": float((labels.label == pool_gold).mean()),
                              "kept": float((labels.label[labels.kept] == pool_gold[labels.kept]).mean())})
        print(f"  {teacher} round {len(teacher_right)}: the teacher labels {teacher_right[-1]['pool']:.3f} of the "
              f"pool right, {teacher_right[-1]['kept']:.3f} of what it keeps", flush=True)
        if teacher == "gold":
            n = len(pool_gold)
            labels = PseudoLabels(pool_gold.astype(np.int16), np.ones(n), np.ones(n), labels.alias, np.arange(n))
        return labels, calibration

    method.pseudo_labels = types.MethodType(pseudo_labels, method)  # this run only: the class is untouched
    rounds = []
    started = time.perf_counter()

    def on_round(record, encoder):
        head = LabelHead.from_prompts(encoder, method.label_set_, method.prompts)
        embedded = encoder.encode(evaluation.texts, batch_size=64)
        probe = LogisticRegression(max_iter=2000).fit(encoder.encode(pool.texts, batch_size=64), pool_gold)
        rounds.append({"round": record["round"],
                       "prompts": float((head.scores(embedded).argmax(1) == eval_gold).mean()),
                       "probe": float((probe.predict(embedded) == eval_gold).mean()),
                       "seconds": round(time.perf_counter() - started, 1)})
        print(f"  {teacher} round {record['round']}: prompts {rounds[-1]['prompts']:.3f}, "
              f"labelled probe {rounds[-1]['probe']:.3f}", flush=True)

    method.fit(pool.texts, names, {k: v for k, v in spec.aliases.items() if k in names}, on_round=on_round)
    return {"teacher": teacher, "teacher_right": teacher_right, "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", default="agnews", choices=list(SETS))
    parser.add_argument("--pool-rows", type=int, default=2000)
    parser.add_argument("--eval-rows", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--teachers", nargs="+", default=["own", "gold"], choices=["own", "gold"])
    args = parser.parse_args()

    from contrastext.console import configure_console
    from contrastext.report import format_table

    configure_console()
    results = [run(teacher, args) for teacher in args.teachers]
    rows = [[r["teacher"], str(row["round"]), f"{row['prompts']:.3f}", f"{row['probe']:.3f}",
             f"{r['teacher_right'][row['round'] - 1]['pool']:.3f}", f"{row['seconds']:.0f}"]
            for r in results for row in r["rounds"]]
    print(format_table(rows, ["teacher", "round", "prompt head", "labelled probe", "teacher right (pool)",
                              "seconds"]))
    path = write_result("perfect_teacher", {"set": args.set, "pool_rows": args.pool_rows,
                                            "eval_rows": args.eval_rows, "results": results})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
