"""Encoding throughput: contrastext's TextEncoder vs sentence-transformers, same model, texts and settings.

    python benchmarks/encode.py [--texts 2000] [--batch-size 64] [--max-length 256] [--repeats 3]
                                [--device cpu|cuda] [--precision auto|fp32|bf16]

Both encoders run in this process, alternately, on the same 2,000 real AG News texts (title and
description); the ratio ours/theirs of the median throughputs is the figure (target ≥ 1.0). Both run in
the same precision: ``auto`` is bf16 on GPU (autocast) and fp32 on CPU; ``bf16`` on CPU gives ours bf16
weights (as the serving replicas do) and theirs bf16 autocast.

    python benchmarks/encode.py --backends [--texts 1000 --max-length 128 --batch-size 64]

compares the inference backends on the CPU in one run: contrastext torch, onnx and onnx-int8 against
sentence-transformers torch, ``backend="onnx"`` and its int8 export (``export_dynamic_quantized_onnx_model``
with the avx512_vnni config, into a temporary folder), median of ``--repeats`` interleaved runs, each with
its zero-shot accuracy on the same texts (AG News labels). sentence-transformers runs in ``--peer-python``
(``st_peer.py``): its ONNX rows need optimum-onnx, whose releases pin an older transformers, so the peer is
usually an environment of its own; without optimum those rows say why they did not run.
``--int8-without-vnni`` runs contrastext's int8 row on a CPU without an int8 dot-product instruction set
(``auto`` never uses int8 there; this measures what it would give).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from _common import ag_news_rows, timed, write_result  # noqa: E402
from contrastext.models import DEFAULT_MODEL, TextEncoder, resolve_model_path  # noqa: E402
from contrastext.report import format_table  # noqa: E402

HERE = Path(__file__).resolve().parent


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
    parser.add_argument("--backends", action="store_true", help="compare the inference backends (CPU)")
    parser.add_argument("--int8-without-vnni", action="store_true",
                        help="--backends: run the int8 row even where the CPU lacks VNNI / AMX (auto does not)")
    parser.add_argument("--peer-python", default=sys.executable,
                        help="--backends: the Python whose sentence-transformers (with optimum-onnx for its ONNX "
                             "rows) is measured, by st_peer.py (default: this one)")
    args = parser.parse_args()
    if args.backends:
        return compare_backends(args)

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


AG_NEWS_LABELS = ["World", "Sports", "Business", "Sci/Tech"]


def ag_news_gold(limit: int) -> np.ndarray:
    import csv

    from _common import AG_NEWS_TEST

    with open(AG_NEWS_TEST, newline="", encoding="utf-8") as f:
        return np.array([int(row[0]) - 1 for _, row in zip(range(limit), csv.reader(f))])


class STPeer:
    """sentence-transformers' torch, onnx and onnx int8 models in ``python`` (``st_peer.py``), one JSON line
    per request each way."""

    def __init__(self, python: str, model_path: str, max_length: int):
        import subprocess
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="st-peer-"))
        self.process = subprocess.Popen([python, str(HERE / "st_peer.py"), "--model", model_path, "--max-length",
                                         str(max_length)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = self._read()
        self.models, self.skipped, self.threads = hello["models"], hello["skipped"], hello["threads"]
        self._calls = 0

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the sentence-transformers peer stopped (exit {self.process.wait()}); its "
                               "errors are above")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._read()

    def encode(self, name: str, texts: list[str], batch_size: int) -> np.ndarray:
        self._calls += 1
        out = self.folder / f"{self._calls}.npy"
        self.ask({"cmd": "encode", "name": name, "texts": list(texts), "batch_size": batch_size, "out": str(out)})
        return np.load(out)

    def close(self) -> None:
        import shutil

        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


class PeerModel:
    """One of the peer's models, with the ``encode`` a ``ZeroShotClassifier`` calls (for its label prompts)."""

    def __init__(self, peer: STPeer, name: str):
        self.peer, self.name = peer, name

    def encode(self, texts, batch_size: int = 64, **_) -> np.ndarray:
        return self.peer.encode(self.name, list(texts), batch_size)


def compare_backends(args) -> None:
    import tempfile

    from contrastext.zeroshot import ZeroShotClassifier

    rows = ag_news_rows(args.texts)
    texts = [f"{title}. {body}" for title, body in rows]
    gold = ag_news_gold(len(texts))
    path = str(resolve_model_path(args.model))
    if args.int8_without_vnni:
        import contrastext.models.onnx_backend as onnx_backend

        onnx_backend.int8_cpu_reason = lambda: None  # measure int8 here although auto would not use it
    contenders, export_s = {}, {}
    for backend in ("torch", "onnx", "onnx-int8"):
        encoder = TextEncoder.from_pretrained(args.model, max_length=args.max_length, device="cpu", backend=backend)
        export_s[backend] = encoder.prepare_backend()
        contenders[f"contrastext {backend}"] = (encoder, encoder.backend)
    peer = STPeer(args.peer_python, path, args.max_length)
    theirs = {f"sentence-transformers {name}": PeerModel(peer, name) for name in peer.models}
    skipped = {f"sentence-transformers {name}": reason for name, reason in peer.skipped.items()}
    texts_file = Path(tempfile.mkdtemp(prefix="encode-texts-")) / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    try:
        embeddings = {name: model.encode(texts, batch_size=args.batch_size)  # also the warm-up
                      for name, (model, _) in contenders.items()}
        embeddings |= {name: model.encode(texts, batch_size=args.batch_size) for name, model in theirs.items()}
        times: dict[str, list[float]] = {name: [] for name in [*contenders, *theirs]}
        for _ in range(args.repeats):  # interleaved, so machine noise hits all alike
            for name, (model, _) in contenders.items():
                times[name].append(timed(lambda: model.encode(texts, batch_size=args.batch_size)))
            for name, seconds in peer.ask({"cmd": "time", "texts_file": str(texts_file),
                                           "batch_size": args.batch_size}).items():
                times[f"sentence-transformers {name}"].append(seconds)
        label_set = ZeroShotClassifier(contenders["contrastext torch"][0]).label_set(AG_NEWS_LABELS)
        result = {"texts": len(texts), "batch_size": args.batch_size, "max_length": args.max_length,
                  "int8_without_vnni": args.int8_without_vnni,
                  "threads": torch.get_num_threads(), "peer_threads": peer.threads, "peer_python": args.peer_python,
                  "export_s": export_s, "skipped": skipped, "rows": {}}
        table = []
        models = {name: model for name, (model, _) in contenders.items()} | theirs
        used = {name: backend for name, (_, backend) in contenders.items()} | {
            name: model.name for name, model in theirs.items()}
        for name, model in models.items():
            # each contender embeds the label prompts too
            predicted = ZeroShotClassifier(model).score_embeddings(embeddings[name], label_set).argmax(axis=1)
            rate = len(texts) / float(np.median(times[name]))
            accuracy = float((predicted == gold).mean())
            result["rows"][name] = {"backend": used[name], "texts_per_s": rate, "accuracy": accuracy,
                                    "seconds": times[name]}
        base = result["rows"]["sentence-transformers torch"]["texts_per_s"]
        for name, row in result["rows"].items():
            table.append([name, row["backend"], f"{row['texts_per_s']:.1f}", f"{row['texts_per_s'] / base:.2f}×",
                          f"{row['accuracy']:.4f}"])
    finally:
        peer.close()
    for name, reason in skipped.items():
        table.append([name, "-", "not run", "", reason])
    reference = result["rows"].get("sentence-transformers onnx int8")
    if reference:
        result["ratio_int8_over_st_int8"] = result["rows"]["contrastext onnx-int8"]["texts_per_s"] / reference["texts_per_s"]
    print(format_table(table, headers=[f"{len(texts)} AG News texts, {args.max_length} tokens, batch {args.batch_size}",
                                       "backend", "texts/s", "vs ST torch", "zero-shot accuracy"]))
    if "ratio_int8_over_st_int8" in result:
        print(f"contrastext onnx-int8 / sentence-transformers onnx int8: {result['ratio_int8_over_st_int8']:.2f}×")
    print(f"written to {write_result('encode_backends', result)}")


if __name__ == "__main__":
    main()
