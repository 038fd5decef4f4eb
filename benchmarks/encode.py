"""Encoding throughput: contrastext's TextEncoder vs sentence-transformers, same model, texts and settings.

    python benchmarks/encode.py [--texts 2000] [--batch-size 64] [--max-length 256] [--repeats 3]
                                [--device cpu|cuda] [--precision auto|fp32|bf16]

Both encoders run in this process, alternately, on the same 2,000 real AG News texts (title and
description); the ratio ours/theirs of the median throughputs is the figure (target ≥ 1.0). Both run in
the same precision: ``auto`` is bf16 on GPU (autocast) and fp32 on CPU; ``bf16`` on CPU gives ours bf16
weights (as the serving replicas do) and theirs bf16 autocast.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import ag_news_rows, timed, write_result  # noqa: E402
from contrastext.models import DEFAULT_MODEL, TextEncoder, resolve_model_path  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                        help="of both encoders (auto: bf16 on GPU, fp32 on CPU)")
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    texts = [f"{title}. {body}" for title, body in ag_news_rows(args.texts)]
    ours = TextEncoder.from_pretrained(args.model, max_length=args.max_length, device=args.device)
    theirs = SentenceTransformer(str(resolve_model_path(args.model)), device=str(ours.device))
    theirs.max_seq_length = args.max_length
    gpu = ours.device.type == "cuda"
    bf16 = args.precision == "bf16" or (args.precision == "auto" and gpu)
    ours.bf16_on_gpu = bf16
    if bf16 and not gpu:
        ours.transformer.to(torch.bfloat16)

    def run_ours():
        return ours.encode(texts, batch_size=args.batch_size)

    def run_theirs():
        if bf16:  # same precision as ours
            with torch.autocast(ours.device.type, dtype=torch.bfloat16):
                return theirs.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)
        return theirs.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)

    atol = 5e-2 if bf16 and not gpu else 1e-2 if bf16 else 1e-4 if gpu else 1e-5
    np.testing.assert_allclose(run_ours(), run_theirs(), atol=atol)  # also the warm-up
    ours_times, theirs_times = [], []
    for _ in range(args.repeats):  # alternate, so machine noise hits both alike
        ours_times.append(timed(run_ours))
        theirs_times.append(timed(run_theirs))
    ours_rate = len(texts) / float(np.median(ours_times))
    theirs_rate = len(texts) / float(np.median(theirs_times))
    result = {
        "texts": len(texts), "batch_size": args.batch_size, "max_length": args.max_length,
        "device": str(ours.device), "precision": "bf16" if bf16 else "fp32",
        "torch_threads": torch.get_num_threads(),
        "ours_texts_per_s": ours_rate, "sentence_transformers_texts_per_s": theirs_rate,
        "ratio_ours_over_theirs": ours_rate / theirs_rate,
        "ours_s": ours_times, "theirs_s": theirs_times,
    }
    if gpu:
        result["gpu_peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(format_table([
        ["contrastext TextEncoder", ours_rate],
        ["sentence-transformers", theirs_rate],
        ["ratio ours / theirs", result["ratio_ours_over_theirs"]],
    ], headers=[f"encode {len(texts)} AG News texts on {ours.device}, {result['precision']} (texts/s)", "value"]))
    print(f"written to {write_result('encode', result)}")


if __name__ == "__main__":
    main()
