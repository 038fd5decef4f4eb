"""UCTopic pretraining on plain text: entity-clustering NMI as the number of pretraining pairs grows.

    python benchmarks/uctopic_pretrain_curve.py [--max-pairs 24000] [--every-pairs 6000] [--sets conll_test,...]
                                                [--max-instances 2000] [--out runs/uctopic_pretrain_curve]

One pretraining run (``configs/uctopic_pretrain_text.yaml``: named spans and NPMI phrases of 20 Newsgroups,
AG News, BBCSport and the Vital leads; no label read) keeps a checkpoint every ``--every-pairs`` pairs; each
checkpoint's phrase encoder, and the untrained one, then cluster the entities of every entity set of
``benchmarks/uctopic_entities.py`` (k-means, k = the number of types) and are scored against the real
types. Results go to ``runs/benchmarks/uctopic_pretrain_curve.json``; each checkpoint's model stays under
``--out`` for CCL to start from (``uctopic_entities.py --model <folder>``).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import REPO_ROOT, write_result  # noqa: E402
from uctopic_entities import CONLL, ENTITY_SETS  # noqa: E402

from contrastext import storage  # noqa: E402
from contrastext.console import configure_console  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def entity_scores(model: str, args: argparse.Namespace) -> dict[str, float]:
    """NMI of the model's entity clusters on each set."""
    from contrastext.config import load_config
    from contrastext.methods.uctopic.config import UCTopicConfig
    from contrastext.methods.uctopic.encoder import PhraseEncoder
    from contrastext.pipelines.uctopic import entity_clustering

    encoder = None
    scores = {}
    for entity_set in ENTITY_SETS:
        if entity_set.name not in args.sets:
            continue
        documents = f"[{entity_set.documents[0]},{entity_set.documents[1]}]" if entity_set.documents else "null"
        config = load_config(UCTopicConfig, None, [
            "stage=evaluate", f"model={model}", f"evaluation.conll={CONLL / entity_set.file}",
            f"evaluation.labels=[{','.join(entity_set.labels)}]", f"evaluation.conll_documents={documents}",
            f"evaluation.max_instances={args.max_instances}"])
        encoder = encoder or PhraseEncoder.from_pretrained(model, max_length=config.max_length,
                                                           backend=config.train.encoder.backend)
        scores[entity_set.name] = entity_clustering(encoder, config.evaluation, config)["nmi"]
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-pairs", type=int, default=24000)
    parser.add_argument("--every-pairs", type=int, default=6000)
    parser.add_argument("--sets", default=",".join(s.name for s in ENTITY_SETS))
    parser.add_argument("--max-instances", type=int, default=2000)
    parser.add_argument("--out", default="runs/uctopic_pretrain_curve")
    args = parser.parse_args()
    args.sets = args.sets.split(",")
    configure_console()
    if not CONLL.is_dir():
        sys.exit(f"benchmark needs {CONLL} (set CONTRASTEXT_DATA to the folder holding ner/conll2003/)")
    from contrastext.config import load_config
    from contrastext.methods.uctopic.config import UCTopicConfig
    from contrastext.pipelines.uctopic import run_uctopic

    batch = 64
    every_steps = max(1, args.every_pairs // batch)
    config = load_config(UCTopicConfig, REPO_ROOT / "configs" / "uctopic_pretrain_text.yaml", [
        f"pretrain.max_pairs={args.max_pairs}", f"train.batch_size={batch}",
        f"train.checkpoint_every_steps={every_steps}", "train.keep_checkpoints=1000", "evaluation.conll=null",
        f"output.storage_path={args.out}", "output.name=text"])
    summary = run_uctopic(config)
    run_dir = summary["run_dir"]
    models = sorted(storage.folder_of(f) for f in storage.list_files(run_dir, "modules.json", recursive=True)
                    if storage.name(storage.folder_of(storage.folder_of(f))).startswith("checkpoint_step"))
    curve = [{"pairs": 0, "model": config.model, "nmi": entity_scores(config.model, args)}]
    for model in models:
        step = int(storage.name(storage.folder_of(model)).removeprefix("checkpoint_step"))
        curve.append({"pairs": step * batch, "model": model, "nmi": entity_scores(model, args)})
    names = [s for s in args.sets]
    rows = [[point["pairs"], *[f"{point['nmi'][n]:.3f}" for n in names],
             f"{sum(point['nmi'].values()) / len(names):.3f}"] for point in curve]
    print(format_table(rows, headers=["pairs", *names, "mean"]))
    out = write_result("uctopic_pretrain_curve", {"source": summary["source"], "pairs_available": summary["pairs"],
                                                  "mentions": summary["link_mentions"], "batch_size": batch,
                                                  "max_instances": args.max_instances, "curve": curve,
                                                  "pretrain_seconds": summary["timings_s"]})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
