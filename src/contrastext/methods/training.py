"""What the façades share: the encoder a fit starts from, and one Ray Train fit on rows held in memory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from contrastext.config import OutputConfig, TrainConfig


@contextmanager
def work_folder(work_dir: str | os.PathLike[str] | None, prefix: str) -> Iterator[Path]:
    """Where a façade's fit writes its checkpoints and models: ``work_dir`` (made if missing, kept), else a
    new temporary folder, removed when the block ends, whether the fit succeeded or not. A façade loads what
    it keeps into memory before the block ends."""
    if work_dir is not None:
        folder = Path(work_dir)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    folder = Path(tempfile.mkdtemp(prefix=f"contrastext-{prefix}-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kept_path(path: str | None, work_dir: str | os.PathLike[str] | None) -> str | None:
    """``path`` (a model a fit exported) where it outlives the fit: only under a ``work_dir`` the user gave."""
    return path if work_dir is not None else None


def encoder_spec(encoder: Any, folder: Path) -> str:
    """A model spec the training workers can load: a spec as given, or an encoder object saved to ``folder``."""
    if isinstance(encoder, (str, os.PathLike)):
        return str(encoder)
    return str(encoder.save(folder))


def load_text_encoder(encoder: Any, max_length: int | None = None):
    """A ``TextEncoder`` reading up to ``max_length`` tokens, or fewer where the model has fewer positions: loaded
    from a spec (``bundled:minilm``, a folder, an HF id), or the object given (when it reads another length, a view
    of it that shares its weights; without ``max_length``, the object as it is)."""
    from contrastext.models import TextEncoder

    if isinstance(encoder, (str, os.PathLike)):
        return TextEncoder.from_pretrained(encoder, max_length=max_length, fit_positions=True)
    if max_length and hasattr(encoder, "with_max_length"):
        return encoder.with_max_length(max_length)
    return encoder


def fit_rows(rows: Any, config: TrainConfig, work_dir: Path | None, name: str, *,
             output: str | None = None, export_to: str | None = None, count: int | None = None):
    """Train ``config`` on ``rows`` (a list of dicts, made a Ray Dataset here, or a Ray Dataset that the
    workers read, ``count`` its rows when known) with ``contrastext.train.fit``; the result's ``model_path``
    is the exported model. Every call trains in a new folder under ``work_dir``, so nothing resumes an
    earlier fit by accident; with ``output`` (a folder or URI) it trains there instead, the model exported
    to ``export_to`` (default ``output/model``), and a fit interrupted there resumes from its checkpoints
    (a job's run)."""
    import ray.data

    from contrastext import storage
    from contrastext.runtime import init_ray
    from contrastext.train import fit

    if isinstance(rows, list) and not rows:
        raise ValueError("nothing to train on")
    init_ray()
    if isinstance(rows, list):
        rows, count = ray.data.from_items(rows), len(rows)
    if output is None:
        if work_dir is None:
            raise ValueError("training needs a folder: give work_dir or output")
        run = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work_dir))
        where, export = OutputConfig(storage_path=str(run), name="fit"), str(run / "model")
    else:
        if not storage.is_uri(output):
            output = str(Path(output).expanduser().resolve())  # "name" alone: a folder of the working directory
        where = OutputConfig(storage_path=storage.parent(output), name=storage.name(output))
        export = export_to or storage.join(output, "model")
    result = fit(rows, config, where, rows=count, export_model_to=export)
    if result.model_path is None:
        raise RuntimeError(f"{name}: training finished without a model to export")
    return result


def checked_texts(texts: Sequence[str], what: str = "texts") -> list[str]:
    """``texts`` as a list, or a clear error for one string, an empty list or a non-string item."""
    if isinstance(texts, str):
        raise ValueError(f"{what} must be a list of strings, not one string")
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"{what} must be a non-empty list of strings")
    return texts
