"""Where an int8 export loses its accuracy: the int8 check's mean cosine with fp32 when only some MatMuls are
quantized. A model whose int8 export fails the check with every MatMul in int8 (``bundled:mpnet``: 0.892 < 0.99)
is exported again with more in fp32 (``models.onnx_export.INT8_FP32_STEPS``); this shows which layers cost the most
and what each step gives.

    python benchmarks/int8_layers.py [--model bundled:mpnet]

Variants, each the project's quantizer (``models.onnx_export.quantize_int8``: int8 per-channel weights) on the
model's fp32 export, some MatMuls kept fp32, the check's 256 texts and threshold (``models.onnx_quality``):

- every MatMul (the export's first try);
- each of the export's steps: every MatMul but the feed-forward output projections (``…/output/dense/MatMul``,
  outside attention), then also the later half of the layers' feed-forward input projections, then every MatMul
  but the whole feed-forward block;
- one layer's feed-forward output projection alone.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import write_result  # noqa: E402

from contrastext.report import format_table  # noqa: E402

def quantized_cosine(fp32: Path, excluded: list[str], folder: Path, reference, encoder) -> dict:
    from contrastext.models.onnx_backend import encode_graph
    from contrastext.models.onnx_export import quantize_int8
    from contrastext.models.onnx_quality import compare, sample_texts

    target = folder / "int8.onnx"
    quantize_int8(fp32, target, nodes_to_exclude=excluded)
    embedded = encode_graph(target, sample_texts(), encoder.tokenizer, pooling=encoder.pooling,
                            max_length=encoder.max_length)
    return compare(reference, embedded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled:mpnet")
    args = parser.parse_args()

    from contrastext.models import TextEncoder
    from contrastext.models.onnx_backend import encode_graph
    from contrastext.models.onnx_export import FFN_OUTPUT, FP32_FILE, INT8_FP32_STEPS, matmul_names
    from contrastext.models.onnx_quality import MIN_MEAN_COSINE, sample_texts

    encoder = TextEncoder.from_pretrained(args.model, backend="onnx")
    encoder.prepare_backend()
    fp32 = encoder.onnx_folder / FP32_FILE
    reference = encode_graph(fp32, sample_texts(), encoder.tokenizer, pooling=encoder.pooling,
                             max_length=encoder.max_length)
    names = matmul_names(fp32)
    ffn_output = {name: int(match.group(1)) for name in names if (match := FFN_OUTPUT.search(name))}
    variants = {"every MatMul": []}
    for kept, select in INT8_FP32_STEPS:
        variants[f"all but {kept}"] = select(names)
    for name, layer in sorted(ffn_output.items(), key=lambda item: item[1]):
        variants[f"layer {layer}'s feed-forward output projection alone"] = [n for n in names if n != name]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for variant, excluded in variants.items():
            result = quantized_cosine(fp32, excluded, Path(folder), reference, encoder)
            rows.append({"variant": variant, **result})
            print(f"{variant}: mean cosine {result['mean_cosine']:.4f}", flush=True)
    print(format_table([[r["variant"], r["mean_cosine"], r["min_cosine"]] for r in rows],
                       headers=["quantized", "mean cosine with fp32", "min cosine"]))
    out = write_result("int8_layers", {"model": args.model, "threshold": MIN_MEAN_COSINE, "rows": rows})
    print(f"{len(sample_texts())} texts, the check's threshold {MIN_MEAN_COSINE}; written to {out}")


if __name__ == "__main__":
    main()
