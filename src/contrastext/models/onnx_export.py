"""ONNX exports of an encoder's transformer: fp32 and dynamic int8, cached by a checksum of the weights.

An export lives in ``<cache>/onnx/<digest>/`` (``$CONTRASTEXT_CACHE``, else ``~/.cache/contrastext``), the
digest naming the weights it was made from (the model folder's weight files, or the tensors of a model held in
memory), so a model folder is exported once and a model changed by training gets a new export. The folder is
built under a temporary name and renamed into place: two processes exporting the same weights at once both
succeed and one folder is kept. ``export.json`` records what was made, how long it took and the int8 quality
check (``onnx_quality``).

The graph comes from ``torch.onnx.export`` of the Hugging Face model (optimum, the maintained exporter, pins a
transformers older than the one this project needs), is then fused by onnxruntime's transformer optimizer and
quantized by onnxruntime's ``quantize_dynamic``. Where the int8 graph fails the quality check, the export tries again
with the most range-sensitive MatMuls kept in fp32 (``INT8_FP32_STEPS``) and keeps the first graph that passes:
all-mpnet-base-v2 fails in int8 (mean cosine 0.89 with fp32) and passes with 18 of its 72 weight MatMuls in fp32
(0.992).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
META_FILE = "export.json"
# bump when the export recipe changes, so older exports are not reused
EXPORT_VERSION = 3

FFN_OUTPUT = re.compile(r"layer\.(\d+)/output/dense/MatMul$")  # not .../attention/output/dense
_FFN_INTERMEDIATE = re.compile(r"layer\.(\d+)/intermediate/dense/MatMul$")


def _ffn_outputs(names: list[str]) -> list[str]:
    return [n for n in names if FFN_OUTPUT.search(n)]


def _ffn_outputs_and_later_ffn(names: list[str]) -> list[str]:
    layers = {n: int(m.group(1)) for n in names if (m := _FFN_INTERMEDIATE.search(n))}
    later = (max(layers.values()) + 1) // 2 if layers else 0
    return _ffn_outputs(names) + [n for n, layer in layers.items() if layer >= later]


def _ffn(names: list[str]) -> list[str]:
    return [n for n in names if FFN_OUTPUT.search(n) or _FFN_INTERMEDIATE.search(n)]


#: what an int8 export keeps in fp32 when the whole graph fails its check, tried in turn, each keeping more: the
#: feed-forward output projections, whose inputs (after GELU) have the widest range, then also the later half of
#: the layers' feed-forward input projections, then the whole feed-forward block (node names as torch.onnx gives
#: them for BERT-family models; a graph without such names keeps every MatMul in int8). all-mpnet-base-v2
#: (``benchmarks/int8_layers.py``): every MatMul in int8 0.892 mean cosine with fp32, then 0.989, 0.992, 0.997
INT8_FP32_STEPS: tuple[tuple[str, Callable[[list[str]], list[str]]], ...] = (
    ("the feed-forward output projections", _ffn_outputs),
    ("the feed-forward output projections and the later half's feed-forward input projections",
     _ffn_outputs_and_later_ffn),
    ("the feed-forward layers", _ffn),
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")

# how many exports this process has made (the tests count them)
EXPORTS_MADE = 0


def exports_root() -> Path:
    from contrastext.data.samples import cache_dir

    return cache_dir() / "onnx"


def folder_digest(transformer_dir: str | os.PathLike[str]) -> str:
    """sha256 over the folder's weight files and config.json (names and contents)."""
    folder = Path(transformer_dir)
    files = sorted(p for p in folder.iterdir() if p.is_file() and (p.suffix in _WEIGHT_SUFFIXES
                                                                  or p.name == "config.json"))
    if not any(p.suffix in _WEIGHT_SUFFIXES for p in files):
        raise FileNotFoundError(f"{folder}: no weight file to export")
    digest = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def module_digest(transformer) -> str:
    """sha256 over a module's config and tensors (a model trained in memory, not saved)."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}".encode())
    digest.update(transformer.config.to_json_string().encode())
    for name, tensor in sorted(transformer.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(dtype=_byte_dtype()).numpy().tobytes())
    return digest.hexdigest()[:24]


def _byte_dtype():
    import torch

    return torch.uint8


def input_names(transformer) -> list[str]:
    """The inputs the graph takes: BERT-style models take token_type_ids, others not."""
    import inspect

    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in inspect.signature(transformer.forward).parameters and \
            getattr(transformer.config, "type_vocab_size", 0):
        names.append("token_type_ids")
    return names


def _export_fp32(transformer, target: Path) -> None:
    import torch

    names = input_names(transformer)
    sample = {n: torch.ones((2, 8), dtype=torch.long) if n != "token_type_ids" else torch.zeros((2, 8),
                                                                                              dtype=torch.long)
              for n in names}

    class _Hidden(torch.nn.Module):  # the last hidden state alone, inputs by position
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(**dict(zip(names, args))).last_hidden_state

    was_training = transformer.training
    transformer.eval()
    axes = {n: {0: "batch", 1: "sequence"} for n in names} | {"last_hidden_state": {0: "batch", 1: "sequence"}}
    try:
        with torch.no_grad():
            torch.onnx.export(_Hidden(transformer).cpu(), tuple(sample[n] for n in names), str(target),
                              input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                              opset_version=17, dynamo=False)
    finally:
        transformer.train(was_training)


def _fuse(source: Path, target: Path, transformer) -> None:
    """onnxruntime's transformer optimizer: attention, layer norm and GELU fused (BERT-family graphs)."""
    from onnxruntime.transformers.optimizer import optimize_model

    config = transformer.config
    optimized = optimize_model(str(source), model_type="bert", num_heads=int(config.num_attention_heads),
                               hidden_size=int(config.hidden_size), opt_level=1)
    optimized.save_model_to_file(str(target))


def quantize_int8(source: Path, target: Path, nodes_to_exclude: Sequence[str] = ()) -> None:
    """The int8 graph of ``source`` (dynamic quantization), the nodes named in ``nodes_to_exclude`` kept fp32."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # per-channel weights: per-tensor scales lose too much (mean cosine 0.96 against 0.99 on the sample);
    # the fused graph's contrib ops defeat shape inference: their outputs are float32
    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                     reduce_range=False, nodes_to_exclude=list(nodes_to_exclude),
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})


def matmul_names(graph: Path) -> list[str]:
    """The names of the graph's MatMul nodes (the graph's structure only: its weights are not read)."""
    import onnx

    return [n.name for n in onnx.load(str(graph), load_external_data=False).graph.node if n.op_type == "MatMul"]


def quantize_checked(folder: Path, quality_check) -> dict:
    """``folder``'s int8 graph: every MatMul quantized, else, where ``quality_check(folder)`` says its mean cosine
    is under its threshold, each of ``INT8_FP32_STEPS`` in turn until one passes. The last graph tried is kept;
    the result is its check, what it kept in fp32 and (with a check) every try's cosine. A check that names no
    threshold passes no graph."""
    source, target = folder / FP32_FILE, folder / INT8_FILE
    names = matmul_names(source)
    tries: list[dict] = []
    made: set[frozenset[str]] = set()
    for kept, select in (("nothing", None), *INT8_FP32_STEPS):
        excluded = select(names) if select else []
        if select and (not excluded or frozenset(excluded) in made):
            continue  # not a graph these names fit, or a step that keeps no more than one before
        made.add(frozenset(excluded))
        quantize_int8(source, target, nodes_to_exclude=excluded)
        if quality_check is None:
            return {"kept_fp32": kept, "matmuls_kept_fp32": len(excluded)}
        result = quality_check(folder) | {"kept_fp32": kept, "matmuls_kept_fp32": len(excluded)}
        tries.append({"kept_fp32": kept, "mean_cosine": result.get("mean_cosine")})
        if result.get("mean_cosine", 0.0) >= result.get("threshold", float("inf")):
            break
    return result | {"tries": tries}


def read_meta(folder: Path) -> dict | None:
    try:
        return json.loads((folder / META_FILE).read_text())
    except (OSError, ValueError):
        return None


def export(transformer, digest: str, *, int8: bool, quality_check=None, root: Path | None = None) -> Path:
    """The export folder for ``digest`` (made from ``transformer`` if not cached yet); with ``int8`` it also
    holds the quantized graph and ``quality_check(folder) -> dict``'s result in ``export.json``."""
    global EXPORTS_MADE
    root = root or exports_root()
    final = root / digest
    meta = read_meta(final)
    if meta is not None and (not int8 or meta.get("int8") is not None):
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{digest}-", dir=root))
    try:
        with _quiet():
            _make(transformer, work, final, dict(meta or {}), digest, int8=int8, quality_check=quality_check)
        EXPORTS_MADE += 1
        _publish(work, final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def _make(transformer, work: Path, final: Path, meta: dict, digest: str, *, int8: bool, quality_check) -> None:
    """Write the graphs and ``export.json`` into ``work`` (fp32 copied from ``final`` where it was made)."""
    started = time.perf_counter()
    if (final / FP32_FILE).exists():  # an fp32 export made earlier: only int8 is missing
        shutil.copy2(final / FP32_FILE, work / FP32_FILE)
    else:
        raw = work / "raw.onnx"
        _export_fp32(transformer, raw)
        try:
            _fuse(raw, work / FP32_FILE, transformer)
            meta["fused"] = True
        except Exception as exc:  # a graph the optimizer does not know: the plain export is used
            meta["fused"] = f"not fused: {type(exc).__name__}: {exc}"
            raw.replace(work / FP32_FILE)
        raw.unlink(missing_ok=True)
        meta["fp32_seconds"] = time.perf_counter() - started
    meta |= {"version": EXPORT_VERSION, "digest": digest, "int8": None}
    if int8:
        t = time.perf_counter()
        meta["int8"] = quantize_checked(work, quality_check)
        meta["int8_seconds"] = time.perf_counter() - t
    meta["seconds"] = time.perf_counter() - started
    (work / META_FILE).write_text(json.dumps(meta, indent=2))
    work.chmod(0o755)  # mkdtemp's folder is the owner's alone


def _publish(work: Path, final: Path) -> None:
    """Rename ``work`` to ``final``; an existing ``final`` is replaced only when it lacks what ``work`` has."""
    try:
        os.replace(work, final)  # final absent (or an empty folder)
        return
    except OSError:
        pass
    existing = read_meta(final)
    if existing is not None and (existing.get("int8") is not None or read_meta(work).get("int8") is None):
        return  # another process published an export at least as complete
    stale = final.with_name(f".{final.name}-old-{os.getpid()}")
    os.replace(final, stale)
    try:
        os.replace(work, final)
    finally:
        shutil.rmtree(stale, ignore_errors=True)


@contextlib.contextmanager
def _quiet():
    """The exporter's tracing warnings and the quantizer's pre-processing advice concern the graph, not the
    user's data: kept off the console (the export's outcome is in export.json and the backend line)."""
    root = logging.getLogger()
    level = root.level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root.setLevel(max(level, logging.ERROR))
        try:
            yield
        finally:
            root.setLevel(level)

