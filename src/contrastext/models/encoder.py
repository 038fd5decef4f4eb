"""TextEncoder: a Hugging Face transformer plus pooling, sentence-transformers compatible."""

from __future__ import annotations

import logging
import os
import platform
from contextlib import nullcontext
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from contrastext.console import progress_bar
from contrastext.models.resolve import DEFAULT_MODEL, resolve_model_path
from contrastext.models.st_format import Pooling, read_layout, write_layout

log = logging.getLogger(__name__)

DEFAULT_MAX_LENGTH = 256
# Texts are tokenised and length-sorted in windows of this many batches, so memory stays bounded
# for long inputs while nearly all of the padding saving of a global sort is kept.
_SORT_WINDOW_BATCHES = 64
#: padded tokens per forward pass at most: a batch of long texts holds fewer rows, since attention's memory grows
#: with rows × length² (128 texts of 512 tokens took 9 GB on ONNX Runtime; 128 of 128 tokens stay whole)
MAX_BATCH_TOKENS = 128 * 128


def model_token_limit(transformer: nn.Module, tokenizer) -> int | None:
    """The most tokens a text can have in ``transformer``: its position table, and the tokenizer's own limit
    where that is lower (RoBERTa-style models keep 2 of their 514 positions for padding); None when unbounded."""
    positions = getattr(transformer.config, "max_position_embeddings", None)
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    limits = [n for n in (positions, tokenizer_limit) if isinstance(n, int) and 0 < n < 1_000_000]
    return min(limits) if limits else None


def fitted_length(max_length: int, limit: int | None, name: str) -> int:
    """``max_length``, or the model's ``limit`` where that is lower (logged, naming the model)."""
    if limit and max_length > limit:
        log.info("%s reads at most %d tokens: max_length %d lowered to it", name, limit, max_length)
        return limit
    return max_length


def pick_device(device: str | torch.device | None = None) -> torch.device:
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bf16 matrix products natively (AVX512-BF16 or AMX on x86, BF16 on Arm), so bf16
    inference and training pay."""
    # oneDNN's own check also passes plain AVX512, where bf16 is emulated and slower than float32; torch.cpu's
    # probes are the only ones torch has for the x86 instructions themselves
    avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if platform.machine().lower() in ("x86_64", "amd64") and avx512_bf16 is not None and amx is not None:
        return bool(avx512_bf16() or amx())
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


def token_budget_batches(order: Sequence[int], lengths: Sequence[int], batch_size: int,
                         max_tokens: int | None = None, pad_to_multiple_of: int | None = None) -> Iterator[list[int]]:
    """``order`` (longest first) cut into batches of at most ``batch_size`` rows and, where texts are long,
    at most ``max_tokens`` (default ``MAX_BATCH_TOKENS``) tokens once padded (never less than one row)."""
    max_tokens = max_tokens or MAX_BATCH_TOKENS
    multiple = pad_to_multiple_of or 1
    b = 0
    while b < len(order):
        width = -(-max(1, lengths[order[b]]) // multiple) * multiple
        rows = max(1, min(batch_size, max_tokens // width))
        yield list(order[b: b + rows])
        b += rows


def pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: Pooling) -> torch.Tensor:
    """Pool token states [B, T, D] to [B, D] the way sentence-transformers does."""
    if mode == "cls":
        return token_embeddings[:, 0]
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    if mode == "mean":
        summed = (token_embeddings * mask).sum(dim=1)
        return summed / mask.sum(dim=1).clamp(min=1e-9)
    if mode == "max":
        masked = token_embeddings.masked_fill(mask == 0, -1e9)
        return masked.max(dim=1).values
    raise ValueError(f"Unknown pooling {mode!r}; expected mean, cls or max.")


class TextEncoder(nn.Module):
    """Encode texts to fixed-size vectors.

    ``forward`` takes tokenised features and keeps the autograd graph (training); ``encode`` takes strings
    and returns float32 numpy arrays (inference: length-sorted batches, no grad, bf16 autocast on GPU).
    ``pad_to_multiple_of`` rounds each batch's length up, so a long-running server sees few distinct
    shapes: on CPU every new shape makes oneDNN build (and keep) new kernels, and memory creeps up.
    """

    def __init__(self, transformer: nn.Module, tokenizer, *, pooling: Pooling = "mean", normalize: bool = False,
                 max_length: int = DEFAULT_MAX_LENGTH, do_lower_case: bool = False, bf16_on_gpu: bool = True,
                 pad_to_multiple_of: int | None = None, backend: str = "torch"):
        super().__init__()
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling: Pooling = pooling
        self.normalize = normalize
        self.max_length = max_length
        self.do_lower_case = do_lower_case
        self.bf16_on_gpu = bf16_on_gpu
        self.pad_to_multiple_of = pad_to_multiple_of
        self._onnx = None
        self._source_dir: Path | None = None
        self.set_backend(backend)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_pretrained(cls, spec: str | os.PathLike[str] = DEFAULT_MODEL, *, pooling: Pooling | None = None,
                        normalize: bool | None = None, max_length: int | None = None,
                        device: str | torch.device | None = None, allow_download: bool = False,
                        backend: str = "torch", fit_positions: bool = False) -> "TextEncoder":
        """Load a sentence-transformers folder, a plain HF model, or a bundled model (see ``resolve_model_path``).

        Arguments left as None take what the folder says (plain HF models: mean pooling, no normalisation).
        ``backend``: what ``encode`` runs on (``models.onnx_backend``): torch, onnx, onnx-int8 or auto.
        ``fit_positions``: read at most what the model can (``model_token_limit``) when ``max_length`` asks for
        more, so "read up to 512 tokens" holds for every model; without it a longer text fails in the forward pass.
        """
        from transformers import AutoModel, AutoTokenizer

        from contrastext import storage

        if storage.is_uri(spec) and not str(spec).startswith("file://"):  # a folder an earlier stage saved remotely
            with storage.local_copy(spec) as folder:
                return cls.from_pretrained(folder, pooling=pooling, normalize=normalize, max_length=max_length,
                                           device=device, allow_download=allow_download, backend=backend,
                                           fit_positions=fit_positions)
        if str(spec).startswith("file://"):
            spec = storage.resolve(spec)[1]
        model_dir = resolve_model_path(spec, allow_download=allow_download)
        layout = read_layout(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(str(layout.transformer_dir))
        transformer = AutoModel.from_pretrained(str(layout.transformer_dir))
        limit = model_token_limit(transformer, tokenizer)
        if fit_positions and max_length:
            max_length = fitted_length(max_length, limit, str(spec))
        encoder = cls(
            transformer, tokenizer,
            pooling=pooling or layout.pooling,
            normalize=layout.normalize if normalize is None else normalize,
            max_length=max_length or layout.max_seq_length or min(DEFAULT_MAX_LENGTH, limit or DEFAULT_MAX_LENGTH),
            do_lower_case=layout.do_lower_case,
        )
        encoder._source_dir = Path(layout.transformer_dir)
        encoder = encoder.to(pick_device(device)).eval()
        return encoder.set_backend(backend)

    load = from_pretrained

    def with_max_length(self, max_length: int) -> "TextEncoder":
        """This encoder reading up to ``max_length`` tokens of each text, or what the model can where that is
        fewer (``model_token_limit``): itself when that is what it reads already, else a new encoder sharing its
        weights and tokenizer (the caller's object keeps its own length)."""
        max_length = fitted_length(max_length, model_token_limit(self.transformer, self.tokenizer), "the encoder")
        if max_length == self.max_length:
            return self
        view = type(self)(self.transformer, self.tokenizer, pooling=self.pooling, normalize=self.normalize,
                          max_length=max_length, do_lower_case=self.do_lower_case, bf16_on_gpu=self.bf16_on_gpu,
                          pad_to_multiple_of=self.pad_to_multiple_of)
        view._source_dir = self._source_dir
        view.train(self.training)
        return view.set_backend(self.backend_requested)

    @classmethod
    def from_config(cls, config, tokenizer_spec: str | os.PathLike[str] = DEFAULT_MODEL, *, seed: int = 0,
                    **kwargs) -> "TextEncoder":
        """A randomly initialised encoder from a transformers config (unit tests, experiments)."""
        from transformers import AutoModel, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path(tokenizer_spec)))
        torch.manual_seed(seed)
        return cls(AutoModel.from_config(config), tokenizer, **kwargs).eval()

    # ---------------------------------------------------------------- backend
    def set_backend(self, backend: str) -> "TextEncoder":
        """Run ``encode`` on ``backend`` (torch, onnx, onnx-int8, auto); the export is made on first use."""
        import contrastext.models.onnx_backend as onnx_backend

        onnx_backend.check_backend(backend)
        self.backend_requested = backend
        used = onnx_backend.resolve(backend, self.device.type) if backend != "torch" else "torch"
        self._onnx = None if used == "torch" else onnx_backend.OnnxRunner(self, used, self._source_dir, backend)
        return self

    @property
    def backend(self) -> str:
        """What ``encode`` runs on: torch, onnx or onnx-int8 (settled by ``prepare_backend`` for ONNX)."""
        if self._onnx is None:
            return "torch"
        return self._onnx.used or self._onnx.requested

    @property
    def onnx_folder(self) -> Path | None:
        """The ONNX export ``encode`` runs (``model.onnx``, ``model_int8.onnx``, ``export.json``); None on torch or
        before ``prepare_backend``."""
        return self._onnx.folder if self._onnx is not None else None

    def prepare_backend(self) -> float:
        """Export this encoder's current weights for its ONNX backend now (cached: a no-op when done);
        returns the seconds it took (0 for torch)."""
        return self._onnx.prepare() if self._onnx is not None else 0.0

    def inference_token_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The last layer's token states [B, T, H] (float32) of padded ``features`` on the inference backend:
        the ONNX session when one is used, else the module (the caller sets autocast). Span pooling reads them."""
        if self._onnx is not None and self._onnx.runs():
            arrays = {k: v.cpu().numpy().astype(np.int64, copy=False) for k, v in features.items()}
            states = self._onnx.session(torch.get_num_threads()).token_states(arrays)
            return torch.from_numpy(states).to(features["input_ids"].device)
        return self.transformer(**features).last_hidden_state.float()

    def train(self, mode: bool = True) -> "TextEncoder":
        if mode:  # weights may change from here on: the folder no longer names them, nor the export
            self._source_dir = None
            if getattr(self, "_onnx", None) is not None:
                self._onnx.stale()
        return super().train(mode)

    def load_state_dict(self, *args, **kwargs):
        self._source_dir = None
        if self._onnx is not None:
            self._onnx.stale()
        return super().load_state_dict(*args, **kwargs)

    # ---------------------------------------------------------------- properties
    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def embedding_dimension(self) -> int:
        return int(self.transformer.config.hidden_size)

    # ---------------------------------------------------------------- training path
    def tokenize(self, texts: Sequence[str], max_length: int | None = None) -> dict[str, torch.Tensor]:
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
        return self.tokenizer(list(texts), padding=True, truncation=True,
                              max_length=max_length or self.max_length, return_tensors="pt")

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        token_states = self.transformer(**inputs).last_hidden_state
        embeddings = pool(token_states.float(), features["attention_mask"], self.pooling)
        return F.normalize(embeddings, p=2, dim=1) if self.normalize else embeddings

    def embed(self, texts: Sequence[str], max_length: int | None = None) -> torch.Tensor:
        """Tokenise and run ``forward`` on this encoder's device, keeping the graph (for losses)."""
        features = {k: v.to(self.device) for k, v in self.tokenize(texts, max_length).items()}
        return self(features)

    # ---------------------------------------------------------------- inference path
    def _autocast(self):
        if self.device.type == "cuda" and self.bf16_on_gpu:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    def pad(self, tokens: dict[str, list[list[int]]]) -> dict[str, torch.Tensor]:
        """A batch of unpadded token lists (``input_ids``, optionally ``token_type_ids``) as right-padded
        tensors with their ``attention_mask``: as wide as the longest row, rounded up to a multiple of
        ``pad_to_multiple_of`` but never past this encoder's ``max_length``."""
        width = max(len(row) for row in tokens["input_ids"])
        if self.pad_to_multiple_of:
            multiple = self.pad_to_multiple_of
            width = max(width, min(-(-width // multiple) * multiple, self.max_length))
        # the tokenizer's own pad_to_multiple_of would round past max_length (200 → 256 at 64), so the width is ours;
        # numpy then torch.from_numpy: 2.7 ms per 64 × 128 batch, where return_tensors="pt" takes 8.4 ms
        padded = self.tokenizer.pad(tokens, padding="max_length", max_length=width, padding_side="right",
                                    return_attention_mask=True, return_tensors="np")
        return {key: torch.from_numpy(value.astype(np.int64, copy=False)) for key, value in padded.items()}

    @torch.inference_mode()
    def encode(self, texts: Sequence[str] | Iterable[str], batch_size: int = 64, max_length: int | None = None,
               show_progress: bool = False, num_threads: int | None = None) -> np.ndarray:
        """Embed ``texts`` to a float32 array [N, D] in input order."""
        texts = list(texts)
        onnx = self._onnx if self._onnx is not None and self._onnx.runs() else None  # settled before a batch
        if num_threads is not None and onnx is None:
            torch.set_num_threads(num_threads)
        if not texts:
            return np.zeros((0, self.embedding_dimension), dtype=np.float32)
        was_training = self.training
        if onnx is None:
            self.eval()
        out = np.empty((len(texts), self.embedding_dimension), dtype=np.float32)
        window = batch_size * _SORT_WINDOW_BATCHES
        progress = progress_bar(len(texts), "encoded", enabled=show_progress, unit="texts")
        try:
            for start in range(0, len(texts), window):
                chunk = texts[start: start + window]
                if self.do_lower_case:
                    chunk = [t.lower() for t in chunk]
                tokens = self.tokenizer(chunk, truncation=True, max_length=max_length or self.max_length,
                                        padding=False, return_attention_mask=False)
                ids = tokens["input_ids"]
                type_ids = tokens.get("token_type_ids")
                order = sorted(range(len(chunk)), key=lambda i: -len(ids[i]))
                for rows in token_budget_batches(order, [len(i) for i in ids], batch_size,
                                                 pad_to_multiple_of=self.pad_to_multiple_of):
                    batch = {"input_ids": [ids[i] for i in rows]}
                    if type_ids is not None:
                        batch["token_type_ids"] = [type_ids[i] for i in rows]
                    if onnx is not None:
                        features = {k: v.numpy() for k, v in self.pad(batch).items()}
                        # the session's threads follow torch's, which actors and servers pin
                        out[[start + i for i in rows]] = onnx.embed(features, num_threads or torch.get_num_threads())
                    else:
                        features = {k: v.to(self.device, non_blocking=True)
                                    for k, v in self.pad(batch).items()}
                        with self._autocast():
                            embeddings = self(features)
                        out[[start + i for i in rows]] = embeddings.float().cpu().numpy()
                    progress.update(len(rows))
        finally:
            progress.close()
            if onnx is None:
                self.train(was_training)
        return out

    # ---------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a sentence-transformers folder that ``SentenceTransformer(path)`` and ``load`` both read."""
        import transformers

        target = Path(path)
        target.mkdir(parents=True, exist_ok=True)
        self.transformer.save_pretrained(str(target), safe_serialization=True)
        self.tokenizer.save_pretrained(str(target))
        from importlib.metadata import PackageNotFoundError, version

        versions = {"torch": torch.__version__, "transformers": transformers.__version__}
        try:  # the installed version, read from its metadata: importing the package costs seconds
            versions["sentence_transformers"] = version("sentence-transformers")
        except PackageNotFoundError:
            versions["sentence_transformers"] = "3.0.0"
        write_layout(target, pooling=self.pooling, normalize=self.normalize, max_seq_length=self.max_length,
                     embedding_dimension=self.embedding_dimension, versions=versions)
        return target
