"""Which inference backend an encoder uses, and the onnxruntime session that runs its ONNX export.

Backends: ``torch`` (the module itself; bf16 autocast on a GPU), ``onnx`` (the fp32 export on onnxruntime),
``onnx-int8`` (the dynamically quantized export), ``auto`` (torch on a GPU; on a CPU int8 where it may be
used, else fp32 ONNX). int8 is used only on a CPU with VNNI int8 instructions and when the export passed
its quality check (``onnx_quality``); otherwise fp32 ONNX is used and one line says why.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

import numpy as np

from contrastext.vectors import unit_rows

Backend = Literal["torch", "onnx", "onnx-int8", "auto"]
BACKENDS = ("torch", "onnx", "onnx-int8", "auto")
# CPU flags (as /proc/cpuinfo names them) under which onnxruntime's int8 matrix products are fast
INT8_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")

log = logging.getLogger(__name__)


DEFAULT_BACKEND_ENV = "CONTRASTEXT_BACKEND"


def default_backend() -> str:
    """What a config that names no backend uses: ``$CONTRASTEXT_BACKEND`` when set (e.g. torch for a cluster
    where exports are not wanted), else ``auto``."""
    return check_backend(os.environ.get(DEFAULT_BACKEND_ENV, "auto"))


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}.")
    return backend


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def int8_cpu_reason() -> str | None:
    """None when this CPU has an int8 dot-product instruction set; else why int8 is not used."""
    if any(flag in cpu_flags() for flag in INT8_CPU_FLAGS):
        return None
    return f"this CPU has none of {', '.join(INT8_CPU_FLAGS)}"


def onnxruntime_missing() -> str | None:
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"onnxruntime cannot be imported ({exc})"
    return None


def say(message: str) -> None:
    """The one line that says a backend was not the one asked for (a warning: shown without logging set up)."""
    log.warning(message)


def note(message: str) -> None:
    """A line that says how the backend asked for runs, where that is worth knowing (info: in the logs)."""
    log.info(message)


def resolve(backend: str, device_type: str) -> str:
    """What ``backend`` means here before any export: ``torch``, ``onnx`` or ``onnx-int8``."""
    check_backend(backend)
    if backend == "torch":
        return "torch"
    if backend == "auto" and device_type != "cpu":
        return "torch"
    missing = onnxruntime_missing()
    if missing:
        if backend == "auto":
            say(f"backend auto: torch is used, {missing}")
            return "torch"
        raise RuntimeError(f"backend {backend}: {missing}; install onnxruntime")
    if device_type != "cpu":
        say(f"backend {backend}: the ONNX session runs on the CPU, not on {device_type}")
    return "onnx" if backend == "onnx" else "onnx-int8"


def pool_numpy(token_states: np.ndarray, attention_mask: np.ndarray, mode: str) -> np.ndarray:
    """``encoder.pool`` on numpy arrays [B, T, D], [B, T]: the same semantics, float32."""
    if mode == "cls":
        return token_states[:, 0]
    mask = attention_mask[..., None].astype(token_states.dtype)
    if mode == "mean":
        return (token_states * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
    if mode == "max":
        return np.where(mask == 0, np.float32(-1e9), token_states).max(axis=1)
    raise ValueError(f"Unknown pooling {mode!r}; expected mean, cls or max.")


class OnnxSession:
    """One onnxruntime session of an export's graph, its intra-op threads pinned."""

    def __init__(self, graph: str | Path, num_threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        if num_threads:
            options.intra_op_num_threads = int(num_threads)
            options.inter_op_num_threads = 1
        self.graph = Path(graph)
        self.num_threads = num_threads
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]

    def token_states(self, features: dict[str, np.ndarray]) -> np.ndarray:
        feed = {name: features[name] if name in features else np.zeros_like(features["input_ids"])
                for name in self.inputs}
        return self.session.run(["last_hidden_state"], feed)[0]


def encode_graph(graph: Path, texts: list[str], tokenizer, *, pooling: str = "mean", max_length: int = 128,
                 batch_size: int = 32) -> np.ndarray:
    """A graph's pooled embeddings of ``texts`` (the int8 quality check's path: no sorting, plain batches)."""
    session = OnnxSession(graph)
    out = []
    for start in range(0, len(texts), batch_size):
        features = tokenizer(texts[start: start + batch_size], padding=True, truncation=True,
                             max_length=max_length, return_tensors="np")
        features = {k: v.astype(np.int64) for k, v in features.items()}
        out.append(pool_numpy(session.token_states(features), features["attention_mask"], pooling))
    return np.concatenate(out).astype(np.float32)


class OnnxRunner:
    """The ONNX side of a ``TextEncoder``: export on first use (cached), the int8 decision, sessions per
    thread count. ``stale()`` drops it all, so weights changed by training are exported again."""

    def __init__(self, encoder, backend: str, source_dir: Path | None, asked: str | None = None):
        self.encoder = encoder
        self.requested = backend  # onnx or onnx-int8 (after ``resolve``)
        self.asked = asked or backend  # what the user named: onnx, onnx-int8 or auto
        # where int8 is not used: fp32 ONNX when int8 was asked for by name; torch for auto, because fp32
        # ONNX measured slower than torch on CPU (docs/backend.md)
        self.fallback = "torch" if self.asked == "auto" else "onnx"
        self.source_dir = source_dir  # the folder the weights were loaded from, while they are unchanged
        self.used: str | None = None  # onnx or onnx-int8 once prepared
        self.folder: Path | None = None
        self.export_seconds = 0.0
        self._sessions: dict[int | None, OnnxSession] = {}

    def __getstate__(self):  # sessions are not picklable: a copy opens its own
        return self.__dict__ | {"_sessions": {}}

    def stale(self) -> None:
        self.source_dir, self.used, self.folder, self._sessions = None, None, None, {}

    def digest(self) -> str:
        import contrastext.models.onnx_export as onnx_export

        if self.source_dir is not None:
            return onnx_export.folder_digest(self.source_dir)
        return onnx_export.module_digest(self.encoder.transformer)

    def prepare(self) -> float:
        """Export (or find the cached export) and settle int8 or fp32; returns the seconds it took."""
        import time

        import contrastext.models.onnx_export as onnx_export
        import contrastext.models.onnx_quality as onnx_quality

        if self.used is not None:
            return 0.0
        started = time.perf_counter()
        cpu_reason = int8_cpu_reason() if self.requested == "onnx-int8" else None
        int8 = self.requested == "onnx-int8" and cpu_reason is None
        if cpu_reason is not None and self.fallback == "torch":  # nothing to export
            self.used = "torch"
            say(f"backend auto: torch is used, {cpu_reason}")
            return 0.0
        enc = self.encoder

        def embed(graph, texts):
            return encode_graph(graph, texts, enc.tokenizer, pooling=enc.pooling, max_length=enc.max_length)

        self.folder = onnx_export.export(enc.transformer, self.digest(), int8=int8,
                                         quality_check=onnx_quality.int8_check(embed))
        self.used = "onnx"
        if cpu_reason is not None:
            say(f"backend onnx-int8: fp32 ONNX is used, {cpu_reason}")
        elif int8:
            quality = onnx_export.read_meta(self.folder)["int8"]
            threshold = onnx_quality.MIN_MEAN_COSINE
            kept = quality.get("kept_fp32", "nothing")
            with_kept = "" if kept == "nothing" else f" (with {kept} in fp32)"
            if quality.get("mean_cosine", 0.0) >= threshold:
                self.used = "onnx-int8"
                if kept != "nothing":
                    whole = (quality.get("tries") or [{}])[0].get("mean_cosine", float("nan"))
                    note(f"backend {self.asked}: int8 ONNX is used with {kept} in fp32: its mean cosine with fp32 "
                        f"is {quality['mean_cosine']:.4f}, every MatMul in int8 {whole:.4f} < {threshold}")
            else:
                self.used = self.fallback
                said = "fp32 ONNX" if self.fallback == "onnx" else "torch"
                say(f"backend {self.asked}: {said} is used, the int8 export's mean cosine with fp32{with_kept} is "
                    f"{quality.get('mean_cosine', float('nan')):.4f} < {threshold} on {quality.get('texts')} texts")
        self.export_seconds = time.perf_counter() - started
        return self.export_seconds

    def runs(self) -> bool:
        """Whether ``encode`` runs on the ONNX session (settled first): False where ``auto`` fell back to torch."""
        self.prepare()
        return self.used != "torch"

    def session(self, num_threads: int | None) -> OnnxSession:
        from contrastext.models.onnx_export import FP32_FILE, INT8_FILE

        self.prepare()
        if num_threads not in self._sessions:
            graph = self.folder / (INT8_FILE if self.used == "onnx-int8" else FP32_FILE)
            self._sessions[num_threads] = OnnxSession(graph, num_threads)
        return self._sessions[num_threads]

    def embed(self, features: dict[str, np.ndarray], num_threads: int | None) -> np.ndarray:
        states = self.session(num_threads).token_states(features)
        embeddings = pool_numpy(states, features["attention_mask"], self.encoder.pooling)
        return unit_rows(embeddings) if self.encoder.normalize else embeddings
