"""UCTopic: what a phrase's vector should be, measured by entity clustering with an untrained encoder.

    python benchmarks/uctopic_phrase_vectors.py [--model bundled:minilm] [--sets conll_test,...] [--seeds 0,1]
                                                [--max-instances 2000] [--alternatives]

Every entity set of ``benchmarks/uctopic_entities.py`` (CoNLL-2003 splits with their real types), a seeded
sample of its entities per seed, is encoded three ways and clustered by spherical k-means (k = the number of
types, the seed's starts, 3 restarts), and NMI / ACC read against the types:

- ``in_context``: the span's mean token state in its sentence (the phrase encoder's vectors before);
- ``alone``: the phrase encoded on its own as a text, what ``SentenceTransformer.encode(phrases)`` gives;
- ``in_context+alone``: the two added, each unit length (``phrase_vectors``' default).

The job reads 64 tokens a sentence (``max_length``), as here. ``--alternatives`` also scores label-free changes to
the default vectors and to their clustering (``ALTERNATIVES``), each against the default on the same draw.
Results: ``runs/benchmarks/uctopic_phrase_vectors.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import write_result  # noqa: E402
from uctopic_entities import CONLL, ENTITY_SETS  # noqa: E402

WAYS = ("in_context", "alone", "in_context+alone")
QUESTION = "What is {}?"  # a label-free template around the phrase read alone


def _unit(x):
    import numpy as np

    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-9, None)


def _centred(x):
    return x - x.mean(axis=0, keepdims=True)


def _pooled_by_phrase(x, phrases: list[str]):
    """Each instance's vector replaced by the mean over every instance of the same phrase in the sample."""
    import numpy as np

    groups: dict[str, list[int]] = {}
    for i, phrase in enumerate(phrases):
        groups.setdefault(phrase, []).append(i)
    pooled = np.empty_like(x)
    for rows in groups.values():
        pooled[rows] = x[rows].mean(axis=0)
    return pooled


def _whitened(x, dims: int):
    import numpy as np

    x = _centred(x)
    _, scale, axes = np.linalg.svd(x, full_matrices=False)
    dims = min(dims, int((scale > 1e-6 * scale[0]).sum()))  # directions with no variance are left out
    return (x @ axes[:dims].T) / scale[:dims]


def _kmeans(x, k: int, seed: int):
    from contrastext.clustering import spherical_kmeans

    return spherical_kmeans(x, k, seed=seed, nredo=3).assignments


def _gmm_on_pca(x, k: int, seed: int):
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    return GaussianMixture(k, covariance_type="full", random_state=seed, n_init=2).fit_predict(
        PCA(32, random_state=seed).fit_transform(x))


def _overclustered(x, k: int, seed: int, first: int = 10):
    """k-means into ``first`` clusters (at least 2k), whose centroids Ward's linkage merges into k."""
    import numpy as np
    from sklearn.cluster import AgglomerativeClustering

    fine = np.asarray(_kmeans(x, max(first, 2 * k), seed))
    used, fine = np.unique(fine, return_inverse=True)  # an empty cluster has no centroid
    centroids = _unit(np.stack([x[fine == j].mean(axis=0) for j in range(len(used))]))
    return AgglomerativeClustering(n_clusters=k).fit_predict(centroids)[fine]


def _default(v: dict):
    """The default vectors, each part unit length and added (what ``in_context+alone`` encodes)."""
    return _unit(v["in_context"]) + _unit(v["alone"])


#: label-free changes to the default vectors (in context + alone) or to their clustering: (vectors, clusterer)
ALTERNATIVES = {
    "default": (_default, _kmeans),
    "each part centred": (lambda v: _unit(_centred(v["in_context"])) + _unit(_centred(v["alone"])), _kmeans),
    "contexts pooled by phrase": (lambda v: _unit(_pooled_by_phrase(_unit(v["in_context"]), v["phrases"]))
                                  + _unit(v["alone"]), _kmeans),
    "whitened, 64 dims": (lambda v: _whitened(_default(v), 64), _kmeans),
    f"alone as '{QUESTION}'": (lambda v: _unit(v["in_context"]) + _unit(v["question"]), _kmeans),
    "Gaussian mixture, 32 PCA dims": (_default, _gmm_on_pca),
    "10 k-means clusters merged by Ward": (_default, _overclustered),
}


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
    row = {"set": entity_set.name, "seed": seed, "entities": len(instances), "k": len(entity_set.labels),
           "scores": scores}
    if args.alternatives:
        vectors["phrases"] = [inst.phrase for inst in instances]
        vectors["question"] = encoders["alone"].encode([QUESTION.format(inst.phrase) for inst in instances])
        row["alternatives"] = {}
        for name, (make, cluster) in ALTERNATIVES.items():
            clusters = cluster(make(vectors).astype("float32"), len(entity_set.labels), seed)
            row["alternatives"][name] = gold_scores(gold, clusters)["nmi"]
    return row


def alternatives_table(results: list[dict]) -> dict:
    """Each alternative's mean NMI, its CoNLL-2003 test NMI and on how many draws it beats the default."""
    from contrastext.report import format_table

    summary = {}
    for name in ALTERNATIVES:
        nmis = [r["alternatives"][name] for r in results]
        summary[name] = {"mean_nmi": statistics.mean(nmis),
                         "conll_test_nmi": [r["alternatives"][name] for r in results if r["set"] == "conll_test"],
                         "above_default": sum(r["alternatives"][name] > r["alternatives"]["default"]
                                              for r in results)}
    print(format_table([[name, f"{s['mean_nmi']:.3f}", " / ".join(f"{x:.3f}" for x in s["conll_test_nmi"]),
                         f"{s['above_default']} of {len(results)}"] for name, s in summary.items()],
                       headers=["vectors / clustering", "mean NMI", "CoNLL test NMI", "above the default"]))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="bundled:minilm")
    parser.add_argument("--sets", default=",".join(s.name for s in ENTITY_SETS))
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--max-instances", type=int, default=2000)
    parser.add_argument("--max-length", type=int, default=64, help="tokens per sentence (the job's max_length)")
    parser.add_argument("--alternatives", action="store_true",
                        help="also score the label-free changes of ALTERNATIVES against the default vectors")
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
    alternatives = alternatives_table(results) if args.alternatives else None
    path = write_result("uctopic_phrase_vectors", {"model": args.model, "max_length": args.max_length,
                                                   "max_instances": args.max_instances, "results": results,
                                                   "means": means, "wins_over_in_context": wins,
                                                   "alternatives": alternatives})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
