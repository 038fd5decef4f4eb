"""UCTopic: what a phrase's vector should be, measured by entity clustering with an untrained encoder.

    python benchmarks/uctopic_phrase_vectors.py [--model bundled:minilm] [--sets conll_test,...] [--seeds 0,1]
                                                [--max-instances 2000]

Every entity set of ``benchmarks/uctopic_entities.py`` (CoNLL-2003 splits with their real types), a seeded
sample of its entities per seed, is encoded three ways and clustered by spherical k-means (k = the number of
types, the seed's starts, 3 restarts), and NMI / ACC read against the types:

- ``in_context``: the span's mean token state in its sentence (the phrase encoder's vectors before);
- ``alone``: the phrase encoded on its own as a text, what ``SentenceTransformer.encode(phrases)`` gives;
- ``in_context+alone``: the two added, each unit length (``phrase_vectors``' default).

The job reads 64 tokens a sentence (``max_length``), as here. Results: ``runs/benchmarks/uctopic_phrase_vectors.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import write_result  # noqa: E402
from uctopic_entities import CONLL, ENTITY_SETS  # noqa: E402

WAYS = ("in_context", "alone", "in_context+alone")


def score_set(entity_set, seed: int, encoders: dict, args: argparse.Namespace) -> dict:
    from contrastext.clustering import spherical_kmeans
    from contrastext.methods.uctopic.phrases import read_conll_entities
    from contrastext.methods.uctopic.sources import sample_instances
    from contrastext.pipelines.uctopic import gold_scores

    found = read_conll_entities(str(CONLL / entity_set.file), list(entity_set.labels), documents=entity_set.documents)
    instances = sample_instances(found, args.max_instances, seed)
    gold = [inst.label for inst in instances]
    vectors = {"in_context": encoders["in_context"].encode(instances),
               "alone": encoders["alone"].encode([inst.phrase for inst in instances]),
               "in_context+alone": encoders["in_context+alone"].encode(instances)}
    scores = {}
    for way in WAYS:
        clusters = spherical_kmeans(vectors[way], len(entity_set.labels), seed=seed, nredo=3).assignments
        scores[way] = {key: value for key, value in gold_scores(gold, clusters).items() if key in ("nmi", "acc")}
    return {"set": entity_set.name, "seed": seed, "entities": len(instances), "k": len(entity_set.labels),
            "scores": scores}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bundled:minilm")
    parser.add_argument("--sets", default=",".join(s.name for s in ENTITY_SETS))
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--max-instances", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=64, help="tokens per sentence (the job's max_length)")
    args = parser.parse_args()

    from contrastext.console import configure_console
    from contrastext.methods.uctopic.encoder import PhraseEncoder
    from contrastext.report import format_table

    configure_console()
    encoders = {way: PhraseEncoder.from_pretrained(args.model, max_length=args.max_length, vectors=way)
                for way in ("in_context", "in_context+alone")}
    encoders["alone"] = encoders["in_context"].encoder
    wanted = args.sets.split(",")
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for entity_set in (s for s in ENTITY_SETS if s.name in wanted):
            results.append(score_set(entity_set, seed, encoders, args))
            row = results[-1]
            print(f"{row['set']} seed {seed}: " + ", ".join(
                f"{way} {row['scores'][way]['nmi']:.3f}" for way in WAYS), flush=True)
    means = {way: {metric: statistics.mean(r["scores"][way][metric] for r in results) for metric in ("nmi", "acc")}
             for way in WAYS}
    wins = sum(r["scores"]["in_context+alone"]["nmi"] > r["scores"]["in_context"]["nmi"] for r in results)
    rows = [[r["set"], r["seed"], r["k"]] + [f"{r['scores'][w]['nmi']:.3f} / {r['scores'][w]['acc']:.3f}" for w in WAYS]
            for r in results]
    rows.append(["mean", "", ""] + [f"{means[w]['nmi']:.3f} / {means[w]['acc']:.3f}" for w in WAYS])
    print(format_table(rows, headers=["set", "seed", "k", *WAYS]))
    print(f"in_context+alone above in_context on {wins} of {len(results)} draws")
    path = write_result("uctopic_phrase_vectors", {"model": args.model, "max_length": args.max_length,
                                                   "max_instances": args.max_instances, "results": results,
                                                   "means": means, "wins_over_in_context": wins})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
