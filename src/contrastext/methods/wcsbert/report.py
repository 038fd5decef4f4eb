"""The WC-SBERT job's report: ``report.md`` with per-round tables, and plots."""

from __future__ import annotations

from typing import Any

import numpy as np

from contrastext import storage
from contrastext.report import format_table


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


def round_table(record: dict[str, Any], names: list[str]) -> str:
    rows = [["items kept / pool", f"{record['kept']} / {record['pool']}"],
            ["kept per label (fewest … most)", _spread(record["kept_per_label"])],
            ["pairs (per label, fewest … most)", f"{record['pairs']} ({_spread(record['pairs_per_label'])})"],
            ["pseudo-labels changed", "-" if record["labels_changed"] is None else f"{record['labels_changed']:.4f}"],
            ["mean loss / steps", f"{record['loss']:.4f} / {record['steps']}" if record.get("loss") is not None
             else f"- / {record['steps']}"],
            ["time s (select / train / export / encode)",
             " / ".join(f"{record['seconds'].get(k, 0):.0f}" for k in ("select", "train", "export", "encode"))]]
    if record.get("guard") is not None:
        parts = (f" = kappa {record['guard_kappa']:.4f} × anchored {record['guard_anchored']:.2f}"
                 if record.get("guard_anchored") is not None else "")
        rows.append(["guard (label-free)", f"{record['guard']:.4f}{parts}"])
        if len(record.get("guard_heads") or {}) > 1:
            rows.append(["guard per head (delivers)", ", ".join(
                f"{kind} {value:.4f}" for kind, value in record["guard_heads"].items()) + f" ({record['head']})"])
    if record.get("eval_accuracy") is not None:
        rows.append(["evaluation accuracy", f"{record['eval_accuracy']:.4f}"])
    return format_table(rows, headers=[f"round {record['round']}", "value"])


def _spread(per_label: dict[str, int]) -> str:
    """``fewest (label) … most (label)``: one line however many labels (every count is in the JSON)."""
    if not per_label:
        return "-"
    low, high = min(per_label, key=per_label.get), max(per_label, key=per_label.get)
    return f"{per_label[low]} ({low}) … {per_label[high]} ({high})"


def summary_table(summary: dict[str, Any]) -> str:
    rows: list[list[Any]] = []
    for e in summary["evaluations"]:
        rows.append([f"{e['stage']}: {e['scheme']}", f"{e['accuracy']:.4f}"])
    for r in summary["rounds"]:
        acc = r.get("eval_accuracy")
        guard = f", guard {r['guard']:.4f}" if r.get("guard") is not None else ""
        rows.append([f"round {r['round']}: pairs {r['pairs']}{guard}", "-" if acc is None else f"{acc:.4f}"])
    if summary["final"]:
        delivered = summary["final"].get("delivered") or {"head": "prompts", "accuracy": summary["final"]["accuracy"]}
        rows.append([f"delivered (round {summary['chosen_round']}, {delivered['head']} head)",
                     f"{delivered['accuracy']:.4f}"])
        if delivered["head"] != "prompts":
            rows.append(["final, prompts head", f"{summary['final']['accuracy']:.4f}"])
        if summary["final"].get("prototypes"):
            rows.append(["final, pool prototypes (evaluation)", f"{summary['final']['prototypes']['accuracy']:.4f}"])
        if summary["final"].get("label_mapping_accuracy") is not None:
            rows.append(["final, label mapping via categories", f"{summary['final']['label_mapping_accuracy']:.4f}"])
    rows.append(["stopped", summary["stop_reason"]])
    asked, used = summary.get("backend", "torch"), (summary["final"] or {}).get("backend")
    rows.append(["backend", asked if used in (None, asked) else f"{asked} ({used})"])
    rows.append(["evaluation", summary["evaluation_set"] or summary["evaluation_skipped"]])
    rows.append(["time s: " + ", ".join(summary["timings_s"]), ", ".join(f"{v:.0f}" for v in summary["timings_s"].values())])
    return format_table(rows, headers=["wcsbert", "accuracy"])
