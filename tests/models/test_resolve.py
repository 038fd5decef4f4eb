import shutil
from pathlib import Path

import pytest

from contrastext.models import DEFAULT_MODEL, ModelNotFoundError, resolve_model_path


def test_bundled_minilm_resolves_to_a_sentence_transformers_folder():
    path = resolve_model_path(DEFAULT_MODEL)
    assert (path / "modules.json").is_file()
    assert (path / "model.safetensors").is_file()


def test_unknown_bundled_name_lists_the_available_ones():
    with pytest.raises(ModelNotFoundError, match="bundled:minilm"):
        resolve_model_path("bundled:nope")


def test_local_directory_is_used_as_is(tiny_encoder_dir):
    assert resolve_model_path(str(tiny_encoder_dir)) == tiny_encoder_dir


def test_directory_without_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="holds no model"):
        resolve_model_path(tmp_path)


def test_missing_model_names_every_place_looked_and_does_not_touch_the_hub(tmp_path):
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model_path("no-such-org-xyz/no-such-model", cache_dir=tmp_path)
    message = str(info.value)
    assert "local directory" in message and "local Hugging Face cache: no-such-org-xyz/no-such-model" in message
    assert "hub was not contacted" in message


def test_bare_name_is_also_tried_under_sentence_transformers(tmp_path):
    with pytest.raises(ModelNotFoundError, match="sentence-transformers/all-mpnet-base-v2"):
        resolve_model_path("all-mpnet-base-v2", cache_dir=tmp_path)


def _fake_hf_cache(cache: Path, repo_id: str, source) -> None:
    """Lay out ``source`` as the Hugging Face cache would after a download of ``repo_id``."""
    repo_dir = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo_dir / "snapshots" / ("0" * 40)
    shutil.copytree(source, snapshot)
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text("0" * 40)


def test_model_in_local_hf_cache_resolves_offline(tmp_path, tiny_encoder_dir):
    _fake_hf_cache(tmp_path, "acme/tiny-encoder", tiny_encoder_dir)
    path = resolve_model_path("acme/tiny-encoder", cache_dir=tmp_path)
    assert (path / "modules.json").is_file()
    assert path.is_relative_to(tmp_path)
