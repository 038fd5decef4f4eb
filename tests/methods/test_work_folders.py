"""A façade's fit writes checkpoints and models to the user's ``work_dir``, kept, or else to a temporary
folder that is gone once ``fit`` returns or fails."""

import tempfile

import pytest
from conftest import NEWS_DOCUMENTS

from contrastext import ShuffleDivide
from contrastext.methods.shuffle_divide.config import default_shuffle_divide_train
from contrastext.methods.training import work_folder

PREFIX = "contrastext-shuffle-divide-"


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    """tempfile's folder for this test, to see what a fit leaves there."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def _leftovers(root):
    return sorted(p.name for p in root.iterdir() if p.name.startswith("contrastext-"))


def test_a_temporary_folder_lives_for_the_block_and_a_given_one_is_kept(temp_root, tmp_path):
    with work_folder(None, "x") as folder:
        assert folder.parent == temp_root and folder.name.startswith("contrastext-x-")
        (folder / "model").mkdir()
    assert not folder.exists()
    with pytest.raises(RuntimeError), work_folder(None, "x") as failed:
        (failed / "model").mkdir()
        raise RuntimeError("training failed")
    assert not failed.exists()
    given = tmp_path / "runs" / "mine"
    with work_folder(given, "x") as folder:
        assert folder == given and folder.is_dir()
        (folder / "model").mkdir()
    assert (given / "model").is_dir()
    assert _leftovers(temp_root) == []


def test_a_fit_that_fails_removes_its_temporary_folder(temp_root, tiny_encoder_dir):
    with pytest.raises(ValueError, match="min_units"):
        ShuffleDivide(str(tiny_encoder_dir), min_units=100).fit(NEWS_DOCUMENTS)
    assert _leftovers(temp_root) == []


def _shuffle_divide(tiny_encoder_dir, work_dir=None) -> ShuffleDivide:
    train = default_shuffle_divide_train().model_copy(update={"batch_size": 4})
    # the last epoch is kept, whatever the clusters of a random encoder score: these tests are about its folder
    return ShuffleDivide(str(tiny_encoder_dir), n_clusters=3, epochs=1, shuffle_unit="word", train=train,
                         encode_max_length=32, select_by="last", work_dir=work_dir)


@pytest.mark.ray
@pytest.mark.slow
def test_a_fit_without_work_dir_leaves_nothing_and_keeps_its_model_in_memory(ray_session, temp_root,
                                                                              tiny_encoder_dir):
    from contrastext.models import TextEncoder

    documents = NEWS_DOCUMENTS * 2
    model = _shuffle_divide(tiny_encoder_dir).fit(documents)
    _, epoch = model.history_
    assert epoch["steps"] == 3 and epoch["model"] is None  # 12 pairs, batches of 4
    assert _leftovers(temp_root) == []
    # the trained encoder is in memory, and it is not the one training started from
    trained, start = model.transform(documents), TextEncoder.load(tiny_encoder_dir).encode(documents)
    assert trained.shape == start.shape and abs(trained - start).max() > 1e-4


@pytest.mark.ray
@pytest.mark.slow
def test_a_fit_in_a_given_work_dir_keeps_its_models(ray_session, temp_root, tiny_encoder_dir, tmp_path):
    from contrastext.models import TextEncoder

    documents = NEWS_DOCUMENTS * 2
    model = _shuffle_divide(tiny_encoder_dir, work_dir=tmp_path / "work").fit(documents)
    _, epoch = model.history_
    assert epoch["model"].startswith(str(tmp_path / "work")) and model.chosen_epoch_ == 1
    kept = TextEncoder.load(epoch["model"]).encode(documents)
    assert abs(kept - model.transform(documents)).max() < 1e-5
