"""sentence-transformers' CPU backends for ``encode.py --backends``, run in the Python that has them.

    <python> benchmarks/st_peer.py --model PATH --max-length 128

sentence-transformers' ONNX backend needs optimum, whose releases pin an older transformers than this
project's, so a user who picks that peer has it in an environment of its own; ``encode.py --peer-python``
names that environment's Python and talks to this script over stdin/stdout, one JSON line each way:

    {"cmd": "encode", "name": ..., "texts": [...], "batch_size": 64, "out": "file.npy"}  -> {"ok": true}
    {"cmd": "time", "texts_file": "texts.json", "batch_size": 64}                        -> {name: seconds}
    {"cmd": "quit"}

The first line it writes names the models it loaded (torch, onnx, onnx int8) and why any could not load.
Needs only sentence-transformers (and optimum-onnx[onnxruntime] for the ONNX rows): contrastext is not
imported here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load_models(path: str, max_length: int) -> tuple[dict, dict]:
    from sentence_transformers import SentenceTransformer

    models, skipped = {"torch": SentenceTransformer(path, device="cpu")}, {}
    try:
        onnx = SentenceTransformer(path, backend="onnx", device="cpu",
                                   model_kwargs={"export": True, "file_name": "model.onnx"})
        models["onnx"] = onnx
        from sentence_transformers.backend import export_dynamic_quantized_onnx_model

        folder = tempfile.mkdtemp(prefix="st-onnx-")
        onnx.save_pretrained(folder)
        export_dynamic_quantized_onnx_model(onnx, "avx512_vnni", folder)
        models["onnx int8"] = SentenceTransformer(folder, backend="onnx", device="cpu",
                                                  model_kwargs={"file_name": "onnx/model_qint8_avx512_vnni.onnx"})
    except Exception as exc:  # optimum absent, or a version that does not fit this transformers
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        for name in ("onnx", "onnx int8"):
            if name not in models:
                skipped[name] = reason
    for model in models.values():
        model.max_seq_length = max_length
    return models, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a sentence-transformers folder")
    parser.add_argument("--max-length", type=int, default=128)
    args = parser.parse_args()
    reply = sys.stdout
    sys.stdout = sys.stderr  # whatever the libraries print stays off the protocol's channel
    models, skipped = load_models(args.model, args.max_length)
    import numpy as np
    import torch

    print(json.dumps({"models": list(models), "skipped": skipped, "threads": torch.get_num_threads()}),
          file=reply, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["cmd"] == "quit":
            break
        if request["cmd"] == "encode":
            embeddings = models[request["name"]].encode(request["texts"], batch_size=request["batch_size"])
            np.save(request["out"], np.asarray(embeddings, np.float32))
            answer = {"ok": True}
        else:
            with open(request["texts_file"], encoding="utf-8") as f:
                texts = json.load(f)
            answer = {}
            for name, model in models.items():
                started = time.perf_counter()
                model.encode(texts, batch_size=request["batch_size"])
                answer[name] = time.perf_counter() - started
        print(json.dumps(answer), file=reply, flush=True)


if __name__ == "__main__":
    main()
