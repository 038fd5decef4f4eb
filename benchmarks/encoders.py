"""Untrained encoders side by side: zero-shot accuracy on AG News and encoding time per 1,000 texts.

    python benchmarks/encoders.py [--models bundled:minilm bundled:mpnet] [--backends torch onnx-int8]
                                  [--rows 1000] [--seed 0] [--batch-size 64] [--device cpu|cuda] [--threads N]

The texts are a seeded random subset of ``--rows`` rows of the AG News test set (``ag_news_test`` with
``max_documents``, read by ``load_texts``), labels World / Sports / Business / Sci/Tech; each model encodes
them once on each of ``--backends`` (wall and CPU time, after a warm-up batch), then ``ZeroShotClassifier`` scores
the same vectors with each template. Loading (for ``bundled:mpnet`` the first time also assembling its parts) and
an ONNX backend's export (cached after its first run) are timed apart.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import DATA_DIR, timed, write_result  # noqa: E402
from contrastext.data.sources import LabelledTexts, ag_news_test, load_texts  # noqa: E402
from contrastext.models import TextEncoder  # noqa: E402
from contrastext.report import format_table  # noqa: E402
from contrastext.zeroshot import ZeroShotClassifier  # noqa: E402

TEMPLATES = ("{label}", "A news article about {label}.")


def ag_news_subset(rows: int, seed: int) -> LabelledTexts:
    source = ag_news_test().model_copy(update={"max_documents": rows})
    return load_texts(source, data_dir=DATA_DIR, seed=seed)


def measure(spec: str, backend: str, data: LabelledTexts, args: argparse.Namespace) -> dict:
    encoder: TextEncoder | None = None

    def load() -> None:
        nonlocal encoder
        encoder = TextEncoder.from_pretrained(spec, device=args.device)

    load_s = timed(load)
    assert encoder is not None
    encoder.set_backend(backend)
    export_s = encoder.prepare_backend()
    encoder.encode(data.texts[:args.batch_size], batch_size=args.batch_size)  # warm-up
    vectors: np.ndarray | None = None

    def encode() -> None:
        nonlocal vectors
        vectors = encoder.encode(data.texts, batch_size=args.batch_size)

    cpu_start = time.process_time()
    encode_s = timed(encode)
    # CPU seconds (all threads) move less than wall time when other work shares the cores
    cpu_s = time.process_time() - cpu_start
    truth = np.asarray(data.labels)
    accuracy = {}
    for template in TEMPLATES:
        classifier = ZeroShotClassifier(encoder, template=template)
        scores = classifier.score_embeddings(vectors, classifier.label_set(data.label_names))
        accuracy[template] = float((np.asarray(data.label_names)[scores.argmax(axis=1)] == truth).mean())
    return {"model": spec, "backend": encoder.backend, "dimension": encoder.embedding_dimension,
            "max_length": encoder.max_length, "load_s": load_s, "export_s": export_s, "encode_s": encode_s,
            "s_per_1000_texts": encode_s * 1000 / len(data), "cpu_s_per_1000_texts": cpu_s * 1000 / len(data),
            "accuracy": accuracy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["bundled:minilm", "bundled:mpnet"])
    parser.add_argument("--backends", nargs="+", default=["torch"], choices=["torch", "onnx", "onnx-int8"],
                        help="each model is measured on each (onnx-int8 falls back to onnx where its check fails)")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    data = ag_news_subset(args.rows, args.seed)
    results = [measure(spec, backend, data, args) for spec in args.models for backend in args.backends]
    headers = ["model", "backend", *(f"accuracy '{t}'" for t in TEMPLATES), "s / 1,000 texts", "CPU s / 1,000 texts",
               "load s", "export s"]
    print(format_table([[r["model"], r["backend"], *(r["accuracy"][t] for t in TEMPLATES), r["s_per_1000_texts"],
                         r["cpu_s_per_1000_texts"], r["load_s"], r["export_s"]]
                        for r in results], headers=headers))
    device = "cuda" if torch.cuda.is_available() and args.device != "cpu" else "cpu"
    summary = {"rows": len(data), "seed": args.seed, "batch_size": args.batch_size, "device": device,
               "torch_threads": torch.get_num_threads(), "results": results}
    print(f"{len(data)} AG News test rows (seed {args.seed}) on {device}, {torch.get_num_threads()} threads; "
          f"written to {write_result('encoders', summary)}")


if __name__ == "__main__":
    main()
