"""The WC-SBERT job's report: ``report.md`` with per-round tables, and plots."""

from __future__ import annotations

from typing import Any

import numpy as np

from contrastext import storage


def write_report(run: str, summary: dict[str, Any], plots: bool = True) -> str:
    lines = ["# WC-SBERT self-training", ""]
    templates = summary.get("templates") or [summary["template"]]
    prompts = f"prompt `{templates[0]}`" if len(templates) == 1 else \
        f"{len(templates)} prompts ensembled ({', '.join(f'`{t}`' for t in templates)}; pairs take the first)"
    lines.append(f"- labels: {', '.join(summary['labels'])}; {prompts}")
    lines.append(f"- pool: {summary['pool']} ({summary['pool_rows']} items)")
    lines.append(f"- evaluation: {summary['evaluation_set'] or summary['evaluation_skipped']}")
    lines.append(f"- stopped: {summary['stop_reason']}; model chosen: round {summary['chosen_round']} "
                 f"(`{summary['final_model']}`), delivered with its {summary.get('chosen_head', 'prompts')} head")
    if summary.get("pretrain"):
        p = summary["pretrain"]
        lines.append(f"- pretraining: {p['pairs']} category pairs, {p['steps']} steps; dev MAP@3 "
                     f"{p['dev_before'].get('map@3', float('nan')):.3f} → {p['dev_after'].get('map@3', float('nan')):.3f}"
                     f" on {p['dev_pages']} held-out pages")
    lines += ["", "## Accuracy", "", "| stage | labels | accuracy | macro F1 |", "|---|---|---|---|"]
    for e in summary["evaluations"]:
        lines.append(f"| {e['stage']} | {e['scheme']} | {e['accuracy']:.4f} | {e['macro_f1']:.4f} |")
    for r in summary["rounds"]:
        if r.get("eval_accuracy") is not None:
            lines.append(f"| round {r['round']} | prompt + aliases | {r['eval_accuracy']:.4f} | "
                         f"{r['eval_macro_f1']:.4f} |")
    if summary.get("final"):
        lines.append(f"| final (round {summary['chosen_round']}) | prompt + aliases | "
                     f"{summary['final']['accuracy']:.4f} | {summary['final']['macro_f1']:.4f} |")
        delivered = summary["final"].get("delivered")
        if delivered and delivered["head"] != "prompts":
            lines.append(f"| **delivered** (round {summary['chosen_round']}) | {delivered['head']} head | "
                         f"{delivered['accuracy']:.4f} | {delivered['macro_f1']:.4f} |")
        if summary["final"].get("prototypes"):
            p = summary["final"]["prototypes"]
            lines.append(f"| final (round {summary['chosen_round']}) | pool prototypes (evaluation) | "
                         f"{p['accuracy']:.4f} | {p['macro_f1']:.4f} |")
    lines += ["", "## Rounds", "",
              "| round | kept / pool | kept per label | pairs | labels changed | loss | train s | encode s |",
              "|---|---|---|---|---|---|---|---|"]
    for r in summary["rounds"]:
        changed = "-" if r["labels_changed"] is None else f"{r['labels_changed']:.4f}"
        loss = "-" if r.get("loss") is None else f"{r['loss']:.4f}"
        per_label = ", ".join(f"{k}: {v}" for k, v in r["kept_per_label"].items())
        lines.append(f"| {r['round']} | {r['kept']} / {r['pool']} | {per_label} | {r['pairs']} | {changed} | "
                     f"{loss} | {r['seconds']['train']:.0f} | {r['seconds']['encode']:.0f} |")
    lines += ["", "## Time (s)", "", "| stage | seconds |", "|---|---|"]
    lines += [f"| {k} | {v:.0f} |" for k, v in summary["timings_s"].items()]
    if plots:
        lines += ["", *_plots(run, summary)]
    return storage.write_text(storage.join(run, "report.md"), "\n".join(lines) + "\n")


def _plots(run: str, summary: dict[str, Any]) -> list[str]:
    from contrastext.plots import confusion_matrix_plot, metric_lines

    out = []
    rows = [{"round": r["round"], "pairs": r["pairs"], "accuracy": r.get("eval_accuracy")} for r in summary["rounds"]]
    pretrained = [e for e in summary["evaluations"] if e["stage"] == "pretrained"]
    untrained = [e for e in summary["evaluations"] if e["stage"] == "untrained" and "prompt" in e["scheme"]]
    start = (pretrained or untrained[-1:] or [None])[0]
    if start is not None:
        rows.insert(0, {"round": 0, "pairs": None, "accuracy": start["accuracy"]})
    if any(r.get("accuracy") is not None for r in rows):
        metric_lines(rows, "round", ["accuracy"], storage.join(run, "plots", "accuracy_per_round.png"),
                     "zero-shot accuracy per round")
        out.append("![accuracy per round](plots/accuracy_per_round.png)")
    if summary["rounds"]:
        metric_lines(rows, "round", ["pairs"], storage.join(run, "plots", "pairs_per_round.png"), "pseudo-pairs per round")
        out.append("![pairs per round](plots/pairs_per_round.png)")
    final = storage.join(run, "eval_final.json")
    if storage.is_file(final):
        data = storage.read_json(final)
        confusion_matrix_plot(np.asarray(data["confusion"]), data["labels"],
                              storage.join(run, "plots", "confusion_final.png"),
                              "final model: true vs predicted")
        out.append("![confusion matrix](plots/confusion_final.png)")
    return out
