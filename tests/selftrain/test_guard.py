"""The label-free round guard: neighbour agreement under a fixed reference, and which round it keeps."""

import numpy as np
import pytest

from contrastext.clustering import nearest_neighbours
from contrastext.pipelines.wcsbert import RoundStop
from contrastext.selftrain.config import WCSBertConfig
from contrastext.selftrain.guard import neighbour_kappa, neighbour_reference, sample_rows


def _clusters(n_per: int = 60, k: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, 16)) * 4
    truth = np.repeat(np.arange(k), n_per)
    return centres[truth] + rng.normal(size=(len(truth), 16)), truth


def test_neighbours_exclude_the_row_itself_and_come_nearest_first():
    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [-1, 0]], dtype=np.float32)
    found = nearest_neighbours(x, 2)
    assert found.shape == (5, 2)
    assert all(i not in row for i, row in enumerate(found))
    assert found[0, 0] == 1 and found[2, 0] == 3
    duplicates = np.ones((4, 3), dtype=np.float32)  # ties: each row still gets k others, never itself
    assert all(i not in row for i, row in enumerate(nearest_neighbours(duplicates, 3)))
    with pytest.raises(ValueError):
        nearest_neighbours(x, 5)


def test_kappa_rewards_labels_that_follow_the_clusters_and_not_a_single_label():
    x, truth = _clusters()
    reference = neighbour_reference(x, np.arange(len(x)), k=8)
    rng = np.random.default_rng(1)
    noisy = truth.copy()
    flip = rng.random(len(truth)) < 0.4
    noisy[flip] = rng.integers(0, 4, flip.sum())
    right, worse = reference.agreement(truth), reference.agreement(noisy)
    assert right > 0.9 and worse < right - 0.2
    assert reference.agreement(np.zeros_like(truth)) == 0.0  # everything alike is no structure
    assert neighbour_kappa(truth, reference.neighbours) == right


def test_reference_rows_index_the_pool_order():
    x, truth = _clusters()
    rows = sample_rows(len(x), 100, seed=0)
    assert len(rows) == 100 and np.all(np.diff(rows) > 0)
    assert np.array_equal(sample_rows(50, 100, seed=0), np.arange(50))
    reference = neighbour_reference(x[rows], rows, k=5)
    pool_labels = np.full(len(x), -1)
    pool_labels[rows] = truth[rows]
    assert reference.agreement(pool_labels) > 0.9  # only the sampled rows are read


def _config(**rounds) -> WCSBertConfig:
    return WCSBertConfig.model_validate({"rounds": {"rounds": 5, "min_change": 0.0, **rounds}})


def test_the_guard_keeps_the_round_0_model_when_round_1_lowers_it():
    stop = RoundStop(_config(), guard_0=0.50)
    assert stop.after({"round": 1, "guard": 0.45, "labels_changed": 0.2}) is True
    assert stop.best_round == 0 and "round-0 model" in stop.reason


def test_the_guard_keeps_the_best_round_and_waits_out_its_patience():
    stop = RoundStop(_config(patience=2), guard_0=0.50)
    assert not stop.after({"round": 1, "guard": 0.55, "labels_changed": 0.2})
    assert not stop.after({"round": 2, "guard": 0.54, "labels_changed": 0.1})
    assert stop.after({"round": 3, "guard": 0.53, "labels_changed": 0.1})
    assert stop.best_round == 1


def test_without_the_guard_the_last_round_is_kept_until_labels_settle():
    stop = RoundStop(_config(min_change=0.05), guard_0=None)
    assert not stop.after({"round": 1, "labels_changed": None})
    assert stop.after({"round": 2, "labels_changed": 0.01}) and stop.best_round == 2
    assert "settled" in stop.reason
