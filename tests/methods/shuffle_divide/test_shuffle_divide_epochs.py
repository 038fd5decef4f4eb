"""The Shuffle & Divide epoch loop that the class and the job share: which epoch is delivered, which models
may go, and where the negatives' groups come from."""

import math

import numpy as np
import pytest

from contrastext.methods.epochs import (
    chosen_epoch,
    run_epochs,
    score_epoch,
    stale_epochs,
    training_groups,
)
from contrastext.methods.shuffle_divide.negatives import BatchNegatives, OtherClusterNegatives


class ScoredEpochs:
    """Epochs whose scores are given, recording the calls the loop makes."""

    def __init__(self, scores):
        self.scores, self.calls, self.stale = scores, [], []

    def run_epoch(self, epoch, previous):
        self.calls.append((epoch, None if previous is None else previous["epoch"]))
        return {"epoch": epoch, "model": f"m{epoch}", "tfidf_silhouette": self.scores[epoch]}

    def epoch_finished(self, rows, select_by):
        self.stale.append(stale_epochs(rows, select_by))


def test_each_epoch_starts_from_the_last_and_the_best_by_the_label_free_score_is_delivered():
    runner = ScoredEpochs([0.20, 0.31, 0.25, math.nan])
    outcome = run_epochs(runner, 3, "tfidf_silhouette")
    assert runner.calls == [(0, None), (1, 0), (2, 1), (3, 2)]
    assert outcome.chosen["epoch"] == 1 and [r["epoch"] for r in outcome.rows] == [0, 1, 2, 3]
    # epoch 0 goes once epoch 1 beats it; epoch 2 once epoch 3 is made (1 stays: the best)
    assert runner.stale == [[], [0], [0], [0, 2]]
    assert run_epochs(ScoredEpochs([0.3, 0.1]), 1, "last").chosen["epoch"] == 1
    assert run_epochs(ScoredEpochs([0.3]), 0, "tfidf_silhouette").chosen["epoch"] == 0


def test_a_tie_keeps_the_earlier_epoch_and_no_score_at_all_keeps_the_last():
    rows = [{"epoch": 0, "silhouette": 0.4}, {"epoch": 1, "silhouette": 0.4}]
    assert chosen_epoch(rows, "silhouette")["epoch"] == 0
    assert chosen_epoch([{"epoch": 0, "silhouette": math.nan}, {"epoch": 1}], "silhouette")["epoch"] == 1


class Counting:
    def __init__(self, ids):
        self.ids, self.calls = ids, 0

    def fit_predict(self, embeddings):
        self.calls += 1
        return np.asarray(self.ids)


def test_the_previous_clusters_are_the_groups_unless_the_rule_clusters_on_its_own():
    method, own = Counting([0, 0, 1]), Counting([2, 2, 2])
    embedded = []

    def previous_embeddings():
        embedded.append(1)
        return np.eye(3)

    assert training_groups(BatchNegatives(), method, np.array([0, 1, 1]), previous_embeddings) is None
    groups = training_groups(OtherClusterNegatives(), method, np.array([0, 1, 1]), previous_embeddings)
    assert groups.tolist() == [0, 1, 1] and groups.dtype == np.int64 and not embedded and method.calls == 0
    assert training_groups(OtherClusterNegatives(own), method, np.array([0, 1, 1]),
                           previous_embeddings).tolist() == [2, 2, 2]
    assert training_groups(OtherClusterNegatives(), method, None, previous_embeddings).tolist() == [0, 0, 1]
    assert len(embedded) == 2 and method.calls == 1


def test_an_epoch_is_scored_in_the_reference_space_and_by_labels_when_given():
    embeddings = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]], np.float32)
    assignments, scores = score_epoch(embeddings, Counting([0, 0, 1, 1]), labels=["a", "a", "b", "b"],
                                      reference=np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]))
    assert assignments.tolist() == [0, 0, 1, 1]
    assert scores["acc"] == 1.0 and scores["tfidf_silhouette"] == pytest.approx(1.0)
    assert 0.8 < scores["silhouette"] < 1.0
    _, plain = score_epoch(embeddings, Counting([0, 0, 1, 1]))
    assert set(plain) == {"silhouette"}


class EveryOtherDocument:
    """A user's negatives rule: groups by position, whatever the clusters."""

    group_column = "group"

    def groups(self, embeddings, clusterer):
        return np.arange(len(embeddings)) % 2


def test_a_users_negatives_rule_groups_the_documents_itself():
    groups = training_groups(EveryOtherDocument(), Counting([0, 0, 0]), np.array([2, 2, 2]), lambda: np.eye(3))
    assert groups.tolist() == [0, 1, 0]
