"""Supervised classifier (encoder + linear head) trained with focal loss + λ·supervised NT-Xent.

Several named variants run in one invocation (e.g. focal; focal + NT-Xent; focal + 100×NT-Xent; the
head retrained alone on the focal + NT-Xent encoder), each through the shared Ray Train loop with
class-balanced batches; each is scored on the test set (accuracy, micro-F1 without the null label,
macro-F1, AUPRC, silhouette), gets a t-SNE plot of its test embeddings, and the job writes a report
comparing them. A variant is a ``Stage``: one finished with the same settings (and, for one that starts
from another, that one's) is not trained again; one made with other settings is trained again from scratch.
"""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contrastext import storage
from contrastext.config import TrainConfig
from contrastext.data.sources import TextSource, describe, load_texts, locate
from contrastext.manifest import write_json_atomic, write_manifest
from contrastext.methods.supcon.config import LabelledTextData, SupconClassifyConfig, VariantConfig
from contrastext.report import format_table
from contrastext.stages import Stage, Timings

log = logging.getLogger(__name__)
JOB = "supcon_classify"

# ------------------------------------------------------------------------------------------ data
@dataclass
class Split:
    texts: list[str]
    labels: np.ndarray  # label ids
    groups: list[str]  # the original label of each row (before null merging)


@dataclass
class LabelledData:
    train: Split
    test: Split
    label_names: list[str]
    null_id: int | None
    skipped: dict[str, Counter] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)


def stratified_subset(rows: list[tuple[str, str]], per_class: int | None, caps: dict[str, int],
                      seed: int) -> list[tuple[str, str]]:
    """At most ``caps.get(label, per_class)`` rows of every label, a seeded sample in file order."""
    if per_class is None and not caps:
        return rows
    by_label: dict[str, list[int]] = {}
    for i, (_, label) in enumerate(rows):
        by_label.setdefault(label, []).append(i)
    rng = np.random.default_rng(seed)
    keep: list[int] = []
    for label in sorted(by_label):
        indices = by_label[label]
        cap = caps.get(label, per_class)
        if cap is not None and len(indices) > cap:
            indices = sorted(rng.choice(indices, size=cap, replace=False).tolist())
        keep.extend(indices)
    return [rows[i] for i in sorted(keep)]


def _read(source: TextSource, root: str | None, seed: int) -> tuple[list[tuple[str, str]], Counter, dict[str, str]]:
    """(text, label) rows of a source, the reasons rows were left out, and the file's checksum."""
    location = str(locate(source, root, what="labelled text file", setting="data.root"))
    texts = load_texts(source.model_copy(update={"path": location}), seed=seed)
    files = [location] if storage.is_file(location) else storage.list_files(location, recursive=True)
    return list(zip(texts.texts, texts.labels)), texts.skipped, {f: storage.file_signature(f) for f in files}


def load_labelled_data(config: LabelledTextData) -> LabelledData:
    train_rows, train_skipped, train_file = _read(config.train, config.root, config.seed)
    test_rows, test_skipped, test_file = _read(config.test, config.root, config.seed)
    skipped = {"train": train_skipped, "test": test_skipped}
    train_path = describe(config.train)
    groups = sorted({label for _, label in train_rows})
    unknown = sorted(set(config.null_groups) - set(groups)) + sorted(set(config.class_caps) - set(groups))
    if unknown:
        raise ValueError(f"data.null_groups / data.class_caps name labels not in the training data: {unknown}")
    named = [g for g in groups if g not in set(config.null_groups)]
    label_names = named + ([config.null_label] if config.null_groups else [])
    if config.null_groups and config.null_label in named:
        raise ValueError(f"data.null_label {config.null_label!r} is already a label of the data")
    if len(label_names) < 2:
        raise ValueError(f"{len(label_names)} label(s) in {train_path}: a classifier needs at least 2")
    ids = {g: label_names.index(config.null_label if g in config.null_groups else g) for g in groups}

    def split(rows: list[tuple[str, str]], per_class: int | None, caps: dict[str, int], name: str) -> Split:
        known = [(t, g) for t, g in rows if g in ids]
        if len(known) < len(rows):
            skipped[name]["label not in the training data"] += len(rows) - len(known)
        chosen = stratified_subset(known, per_class, caps, config.seed)
        return Split(texts=[t for t, _ in chosen], labels=np.array([ids[g] for _, g in chosen], dtype=np.int64),
                     groups=[g for _, g in chosen])

    return LabelledData(
        train=split(train_rows, config.train_per_class, config.class_caps, "train"),
        test=split(test_rows, config.test_per_class, {}, "test"),
        label_names=label_names,
        null_id=label_names.index(config.null_label) if config.null_groups else None,
        skipped=skipped,
        files=train_file | test_file,
    )


# ------------------------------------------------------------------------------------------ running
def variant_model(config: SupconClassifyConfig, variant: VariantConfig, start_model: str | None):
    """The variant as a ``SupConClassifier``: the job's train block with what the variant sets (loss, head
    options, epochs, rates), from ``start_model`` (an earlier variant's) or the job's encoder."""
    from contrastext.methods.supcon.model import SupConClassifier

    return SupConClassifier(start_model or config.train.encoder.model, config=variant, train=config.train,
                            batch_size=config.eval_batch_size)


def variant_train_config(config: SupconClassifyConfig, variant: VariantConfig, num_labels: int,
                         model: str | None) -> TrainConfig:
    """The train block the variant's fit runs."""
    return variant_model(config, variant, model).train_config(num_labels, model or config.train.encoder.model)


def _evaluate(classifier, data: LabelledData, config: SupconClassifyConfig, variant: str,
              run_dir: str, plots_dir: Path | None) -> dict[str, Any]:
    from contrastext.metrics.classification import classification_report

    clock = Timings()
    with clock.measure("eval"):
        prediction = classifier.predict(data.test.texts, batch_size=config.eval_batch_size, show_progress=True)
        report = classification_report(data.test.labels, prediction.probabilities, prediction.embeddings,
                                       data.label_names, null_label=data.null_id).as_dict()
    report["eval_seconds"] = clock["eval"]
    if plots_dir is not None:
        from contrastext.plots import project_2d, scatter_2d

        rng = np.random.default_rng(config.data.seed)
        n = len(data.test.texts)
        rows = np.sort(rng.choice(n, size=min(n, config.tsne_rows), replace=False))
        points = project_2d(prediction.embeddings[rows], "tsne", seed=config.data.seed)
        names = [data.label_names[i] for i in data.test.labels[rows]]
        plot = scatter_2d(points, names, plots_dir / f"tsne_{variant}.png",
                          f"{variant}: test embeddings (t-SNE), silhouette {report['silhouette']:.3f}")
        report["tsne_plot"] = _publish(plot, run_dir)
    return report


def _publish(local_file: Path, run_dir: str) -> str:
    """Where a locally written figure ends up: itself for a local run, a copy beside the results otherwise."""
    if not storage.is_uri(run_dir):
        return str(local_file)
    target = storage.join(run_dir, "plots", local_file.name)
    storage.write_bytes(target, local_file.read_bytes())
    return target


def run_supcon_classify(config: SupconClassifyConfig) -> dict[str, Any]:
    """Train, score and compare every variant; returns the comparison (also in ``comparison.json``)."""
    from contrastext.runtime import init_ray

    timings = Timings()
    run_dir = config.output.run_dir()
    with timings.measure("load"):
        data = load_labelled_data(config.data)
    log.info("data: %d train / %d test rows, %d labels%s", len(data.train.texts), len(data.test.texts),
             len(data.label_names), f" (null label {data.label_names[data.null_id]!r})" if data.null_id is not None
             else "")
    init_ray(config.ray)
    train_labels = [data.label_names[i] for i in data.train.labels]
    local_plots = None
    if config.tsne:
        local_plots = Path(tempfile.mkdtemp(prefix="supcon-plots-")) if storage.is_uri(run_dir) \
            else Path(run_dir) / "plots"

    results: dict[str, dict[str, Any]] = {}
    models: dict[str, str] = {}
    made_with: dict[str, dict[str, Any]] = {}  # each variant's settings, the settings of the one it starts from
    for variant in config.variants:
        variant_dir = storage.join(run_dir, variant.name)
        model_dir = storage.join(variant_dir, "model")
        model = variant_model(config, variant, models[variant.start_from] if variant.start_from else None)
        train_config = model.train_config(len(data.label_names), model.encoder)
        # a variant that starts from another runs again when that one's settings change
        made_with[variant.name] = {"data": config.data.model_dump(mode="json"),
                                   "train": train_config.model_dump(mode="json"),
                                   "start_from": made_with[variant.start_from] if variant.start_from else None}
        stage = Stage(JOB, variant.name, variant_dir, made_with[variant.name])
        done = stage.finished()
        if done is not None and storage.exists(model_dir):
            results[variant.name] = done["result"]
            models[variant.name] = model_dir
            continue
        stage.begin(variant_dir)  # an interrupted fit with these settings resumes; any other is deleted first
        stage.say("training")
        model.fit(data.train.texts, train_labels, classes=data.label_names, output=variant_dir)
        result = model.fit_result_
        train_seconds = stage.seconds
        metrics = _evaluate(model.model_, data, config, variant.name, run_dir, local_plots)
        metrics.update({"variant": variant.model_dump(), "steps": result.steps, "train_seconds": train_seconds,
                        "final_loss": result.last_loss, "rows_skipped": result.rows_skipped})
        write_json_atomic(storage.join(variant_dir, "metrics.json"), metrics)
        results[variant.name] = stage.mark_done(metrics)
        models[variant.name] = result.model_path
        timings[f"variant_{variant.name}"] = stage.seconds

    timings.total()
    comparison = {
        "data": {"train_rows": len(data.train.texts), "test_rows": len(data.test.texts),
                 "labels": data.label_names, "null_label": None if data.null_id is None
                 else data.label_names[data.null_id],
                 "train_label_counts": _counts(data.train.labels, data.label_names),
                 "test_label_counts": _counts(data.test.labels, data.label_names),
                 "rows_skipped": {k: dict(v) for k, v in data.skipped.items()}},
        "variants": results,
        "best": best_variant(results),
    }
    write_json_atomic(storage.join(run_dir, "comparison.json"), comparison)
    storage.write_bytes(storage.join(run_dir, "report.md"), markdown_report(comparison).encode("utf-8"))
    write_manifest(run_dir, job="supcon_classify", config=config, inputs=data.files, timings=timings,
                   counts={"train_rows": len(data.train.texts), "test_rows": len(data.test.texts),
                           "labels": len(data.label_names), "variants": len(results),
                           "rows_skipped": {k: sum(v.values()) for k, v in data.skipped.items()}})
    print(summary_table(comparison))
    return comparison


def _counts(labels: np.ndarray, names: list[str]) -> dict[str, int]:
    counts = Counter(labels.tolist())
    return {names[i]: int(counts.get(i, 0)) for i in range(len(names))}


def best_variant(results: dict[str, dict[str, Any]]) -> str | None:
    """The variant with the highest macro-F1 (ties: higher AUPRC)."""
    if not results:
        return None
    return max(results, key=lambda name: (results[name]["macro_f1"], results[name]["auprc"]))


_COLUMNS = (("accuracy", "accuracy"), ("micro_f1", "micro-F1"), ("macro_f1", "macro-F1"), ("auprc", "AUPRC"),
            ("silhouette", "silhouette"))


def summary_table(comparison: dict[str, Any]) -> str:
    rows = []
    for name, m in comparison["variants"].items():
        rows.append([name, *[m[key] if m.get(key) is not None else "-" for key, _ in _COLUMNS], m.get("steps", "-")])
    table = format_table(rows, headers=["variant", *[title for _, title in _COLUMNS], "steps"])
    data = comparison["data"]
    null = f", micro-F1 without {data['null_label']!r}" if data["null_label"] else ""
    return (f"{table}\n{data['train_rows']} train / {data['test_rows']} test rows, {len(data['labels'])} labels"
            f"{null}; best by macro-F1: {comparison['best']}")


def markdown_report(comparison: dict[str, Any]) -> str:
    variants = comparison["variants"]
    data = comparison["data"]
    lines = ["# Classifier variants: focal loss and supervised NT-Xent", "",
             f"{data['train_rows']} training rows, {data['test_rows']} test rows, {len(data['labels'])} labels"
             + (f"; null label `{data['null_label']}` (left out of micro-F1)" if data["null_label"] else "") + ".",
             "", "| variant | " + " | ".join(t for _, t in _COLUMNS) + " | steps |",
             "|---|" + "---:|" * (len(_COLUMNS) + 1)]
    for name, m in variants.items():
        cells = [f"{m[key]:.4f}" if isinstance(m.get(key), float) else "-" for key, _ in _COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {m.get('steps', '-')} |")
    lines += ["", f"Best by macro-F1: **{comparison['best']}**.", "", "## AUPRC per label", "",
              "| label | train rows | " + " | ".join(variants) + " |", "|---|---:|" + "---:|" * len(variants)]
    for label in data["labels"]:
        cells = [f"{m['per_class_auprc'].get(label, float('nan')):.3f}" for m in variants.values()]
        lines.append(f"| {label} | {data['train_label_counts'].get(label, 0)} | " + " | ".join(cells) + " |")
    plots = [(name, m["tsne_plot"]) for name, m in variants.items() if m.get("tsne_plot")]
    if plots:
        lines += ["", "## t-SNE of the test embeddings", ""]
        lines += [f"- {name}: `{path}`" for name, path in plots]
    return "\n".join(lines) + "\n"
