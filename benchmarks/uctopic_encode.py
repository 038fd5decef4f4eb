"""Phrase encoding throughput: one forward pass per sentence (all its phrases pooled from it) vs. the plain
way, one forward pass per phrase instance — same model, same BBCSport phrases, same outputs.

    python benchmarks/uctopic_encode.py [--documents 40] [--batch-size 64] [--repeats 3]

The figure is the ratio of the median throughputs (phrases/s), shared / plain (target ≥ 2.0: a news
sentence holds several candidate phrases).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from _common import DATA_DIR, best_of, timed, write_result  # noqa: E402

from contrastext.methods.uctopic.candidates import document_phrases  # noqa: E402
from contrastext.methods.uctopic.encoder import PhraseEncoder  # noqa: E402
from contrastext.models import DEFAULT_MODEL  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--device", default=None)
    args = parser.parse_args()

    path = DATA_DIR / "bbcsport" / "bbcsport.jsonl"
    if not path.is_file():
        sys.exit(f"benchmark needs {path} (set CONTRASTEXT_DATA to the folder holding bbcsport/)")
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for _, line in zip(range(args.documents), f)]
    instances, extractor = document_phrases(docs, extractor="ngram")
    # the span in context alone: the comparison is one forward pass per sentence against one per phrase
    encoder = PhraseEncoder.from_pretrained(args.model, max_length=args.max_length, device=args.device,
                                            vectors="in_context")
    sentences = len({i.sentence for i in instances})

    order = sorted(range(len(instances)), key=lambda i: -len(instances[i].sentence))

    def plain() -> np.ndarray:  # one row per phrase instance (length-sorted batches, like the shared path)
        out = np.empty((len(instances), encoder.embedding_dimension), dtype=np.float32)
        for b in range(0, len(order), args.batch_size):
            rows = order[b:b + args.batch_size]
            out[rows] = _per_instance(encoder, [instances[i] for i in rows])
        return out

    shared_vectors = encoder.encode(instances, batch_size=args.batch_size)
    plain_vectors = plain()
    max_diff = float(np.abs(shared_vectors - plain_vectors).max())
    shared_s, shared_all = best_of(args.repeats, lambda: timed(lambda: encoder.encode(instances,
                                                                                      batch_size=args.batch_size)))
    plain_s, plain_all = best_of(args.repeats, lambda: timed(plain))
    result = {"documents": len(docs), "phrase_instances": len(instances), "sentences": sentences,
              "extractor": extractor, "device": str(encoder.device), "batch_size": args.batch_size,
              "shared_phrases_per_s": len(instances) / shared_s, "plain_phrases_per_s": len(instances) / plain_s,
              "ratio": plain_s / shared_s, "max_abs_difference": max_diff,
              "shared_times_s": shared_all, "plain_times_s": plain_all}
    print(format_table([["phrase instances / sentences", f"{len(instances):,} / {sentences:,}"],
                        ["shared sentence passes (phrases/s)", result["shared_phrases_per_s"]],
                        ["one pass per phrase (phrases/s)", result["plain_phrases_per_s"]],
                        ["ratio shared / plain", result["ratio"]],
                        ["max |difference| of the vectors", max_diff]], headers=["uctopic encode", "value"]))
    print(f"written to {write_result('uctopic_encode', result)}")


def _per_instance(encoder: PhraseEncoder, chunk) -> np.ndarray:
    """The plain path: every instance is its own transformer row (what span pooling costs without sharing)."""
    import torch
    import torch.nn.functional as F

    with torch.inference_mode():
        features = encoder.tokenize(chunk)
        vectors = encoder({k: v.to(encoder.device) for k, v in features.items()})
        return F.normalize(vectors.float(), dim=1).cpu().numpy()


if __name__ == "__main__":
    main()
