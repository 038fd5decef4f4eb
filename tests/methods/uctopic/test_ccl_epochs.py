"""CCL's epoch loop and its label-free choice, on phrase vectors built so that the answer is known."""

import numpy as np
import pytest

from contrastext.methods.epochs import run_epochs
from contrastext.methods.uctopic.ccl import CCLEpochs, mention_masked_sentences
from contrastext.methods.uctopic.phrases import PhraseInstance

CONTEXTS = {  # each type's mentions occur in sentences of its own words
    "PER": "{} said on Tuesday that the coach and the striker would sign",
    "LOC": "heavy rain fell over {} where the river flooded the valley",
    "ORG": "shares of {} rose after the company reported quarterly profit",
}


def _instances(per_type: int = 30) -> list[PhraseInstance]:
    instances = []
    for kind, template in CONTEXTS.items():
        for i in range(per_type):
            mention = f"{kind.lower()}name{i % 10}"
            sentence = template.format(mention)
            start = sentence.index(mention)
            instances.append(PhraseInstance(sentence, start, start + len(mention), key=mention, label=kind))
    return instances


def _vectors(assignment: np.ndarray, seed: int, spread: float) -> np.ndarray:
    """Rows near one of three orthogonal directions, by ``assignment``."""
    rng = np.random.default_rng(seed)
    centres = np.eye(3, 16, dtype=np.float32) * 4
    return centres[assignment] + rng.normal(scale=spread, size=(len(assignment), 16)).astype(np.float32)


def _runner(instances, trained_assignment: np.ndarray, select_seen: list) -> CCLEpochs:
    """The start model groups the instances by type; the 'trained' one groups them by ``trained_assignment``,
    tighter (as CCL makes its own clusters). Training is replaced by a name: the choice is what is tested."""
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    vectors = {"start": _vectors(types, 0, 1.0), "epoch_1": _vectors(trained_assignment, 1, 0.3)}

    vectors["epoch_2"] = _vectors(trained_assignment, 2, 0.2)

    def make_pairs(epoch, embeddings, clusters):
        select_seen.append((epoch, embeddings))
        return [{"anchor": "a", "positive": "b"}], {"pairs": 1}

    runner = CCLEpochs(instances, "start", 3, encode=lambda model: vectors[model],
                       train=lambda epoch, model, rows: (f"epoch_{epoch}", {"loss": 0.5, "steps": 1, "from": model}),
                       make_pairs=make_pairs, gold=[inst.label for inst in instances], seed=0)
    runner.vectors = vectors
    return runner


@pytest.mark.parametrize("select_by", ["anchored_silhouette", "context_silhouette"])
def test_the_start_model_is_kept_when_ccl_scrambles_the_types(select_by):
    instances = _instances()
    scrambled = np.random.default_rng(5).integers(0, 3, len(instances))
    seen: list = []
    runner = _runner(instances, scrambled, seen)
    outcome = run_epochs(runner, 1, select_by)
    start, trained = outcome.rows
    assert [epoch for epoch, _ in seen] == [1] and seen[0][1] is runner.vectors["start"]  # epoch 0's vectors
    assert trained["gold_nmi"] < 0.1 < 0.9 < start["gold_nmi"]  # the built-in failure
    # CCL's own space scores its tight clusters best: that score alone would deliver the failure
    assert trained["silhouette"] > start["silhouette"]
    assert trained["context_silhouette"] < start["context_silhouette"]
    assert outcome.chosen["epoch"] == 0 and outcome.chosen["model"] == "start"
    # the trained clusters do not hold together in the start model's space: the anchored score falls with them
    assert trained["start_silhouette"] < 0.1 * start["start_silhouette"]
    assert trained["anchored_silhouette"] < start["anchored_silhouette"] == start["silhouette"]
    # and the report says how far the clusters moved from the start model's
    assert start["start_agreement"] == 1.0 and abs(trained["start_agreement"]) < 0.1


def test_the_trained_epoch_is_delivered_when_it_tightens_the_same_clusters():
    instances = _instances()
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    outcome = run_epochs(_runner(instances, types, []), 1, "anchored_silhouette")
    start, trained = outcome.rows
    assert trained["start_silhouette"] == pytest.approx(start["silhouette"])  # the same partition
    assert trained["start_agreement"] == pytest.approx(1.0)
    assert trained["anchored_silhouette"] == pytest.approx(trained["silhouette"])
    assert trained["silhouette"] > start["silhouette"]
    assert outcome.chosen["epoch"] == 1
    # the context score cannot tell the two apart: a tie goes to the earlier epoch
    assert trained["context_silhouette"] == pytest.approx(start["context_silhouette"])
    assert run_epochs(_runner(instances, types, []), 1, "context_silhouette").chosen["epoch"] == 0
    assert run_epochs(_runner(instances, types, []), 1, "silhouette").chosen["epoch"] == 1
    assert run_epochs(_runner(instances, types, []), 1, "last").chosen["model"] == "epoch_1"


def test_the_context_leaves_the_mention_out():
    instance = _instances(1)[0]
    assert mention_masked_sentences([instance]) == [CONTEXTS["PER"].format("").strip()]


def test_anchored_discounts_by_the_share_kept_in_the_start_space():
    from contrastext.methods.uctopic.ccl import anchored

    assert anchored(0.2, 0.05, 0.1) == pytest.approx(0.1)  # half the start's silhouette kept
    assert anchored(0.2, 0.15, 0.1) == pytest.approx(0.2)  # more than kept: no bonus
    assert anchored(0.2, -0.01, 0.1) < 0  # clusters that no longer hold together in the start space
    assert anchored(-0.1, 0.05, 0.1) == -0.1
    assert anchored(0.2, 0.0, -0.05) == 0.2 and anchored(0.2, -0.1, -0.05) == 0.0


def test_each_epoch_trains_from_the_one_before_and_the_start_vectors_stay():
    instances = _instances()
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    seen: list = []
    runner = _runner(instances, types, seen)
    outcome = run_epochs(runner, 2, "anchored_silhouette")
    assert [row["epoch"] for row in outcome.rows] == [0, 1, 2]
    assert [row.get("from") for row in outcome.rows] == [None, "start", "epoch_1"]
    assert [epoch for epoch, _ in seen] == [1, 2] and seen[1][1] is runner.vectors["epoch_1"]
    # after the loop only the start model's vectors (the anchor) and the last epoch's are held
    assert sorted(runner.embeddings) == [0, 2]
    assert outcome.chosen["epoch"] == 2  # the tightest clusters, the same partition as the start


def test_the_start_choice_passes_a_scrambled_pretrained_model_and_takes_a_tighter_one():
    from contrastext.methods.uctopic.ccl import choose_start

    instances = _instances()
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    scrambled = np.random.default_rng(5).integers(0, 3, len(instances))
    vectors = {"untrained": _vectors(types, 0, 1.0), "scrambled": _vectors(scrambled, 1, 0.2),
               "tighter": _vectors(types, 2, 0.4)}
    gold = [inst.label for inst in instances]
    chosen, rows = choose_start(instances, ["untrained", "scrambled", "tighter"], 3, vectors.__getitem__, gold=gold)
    untrained, scrambled_row, tighter = rows
    assert [row["model"] for row in rows] == ["untrained", "scrambled", "tighter"]
    assert scrambled_row["gold_nmi"] < 0.1 and tighter["gold_nmi"] > 0.9  # the built-in answer
    assert scrambled_row["silhouette"] > tighter["silhouette"]  # own silhouette alone would take the scrambled one
    assert chosen == "tighter" and tighter["anchored_silhouette"] > untrained["anchored_silhouette"]
    # without a better candidate the anchor itself is kept
    assert choose_start(instances, ["untrained", "scrambled"], 3, vectors.__getitem__)[0] == "untrained"


@pytest.mark.parametrize("empty_from", [1, 2])
def test_an_epoch_with_nothing_to_train_on_stops_and_the_best_so_far_is_delivered(empty_from):
    instances = _instances()
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    runner = _runner(instances, types, [])
    make_pairs = runner.make_pairs

    def pairs_until(epoch, embeddings, clusters):
        return ([], {"pairs": 0}) if epoch >= empty_from else make_pairs(epoch, embeddings, clusters)

    runner.make_pairs = pairs_until
    outcome = run_epochs(runner, 3, "anchored_silhouette")
    assert [row["epoch"] for row in outcome.rows] == list(range(empty_from))
    assert outcome.stopped == f"epoch {empty_from}: no pseudo-labelled mentions to train on"
    best = max(outcome.rows, key=lambda row: row["anchored_silhouette"])
    assert outcome.chosen is best  # epoch 1 tightens the types, so it wins where it ran
    assert run_epochs(_runner(instances, types, []), 1, "anchored_silhouette").stopped is None
    assert outcome.dropped is None  # no fit ran where there was nothing to train on


def test_a_fit_with_nothing_left_to_learn_stops_the_epochs_and_is_left_out():
    instances = _instances()
    types = np.array([list(CONTEXTS).index(inst.label) for inst in instances])
    losses = {1: 0.3, 2: 0.001, 3: 0.2}

    def runner_with(min_loss):
        runner = _runner(instances, types, [])
        runner.vectors["epoch_3"] = _vectors(types, 3, 0.1)
        runner.train = lambda epoch, model, rows: (f"epoch_{epoch}", {"loss": losses[epoch], "steps": 1})
        runner.min_loss = min_loss
        return runner

    outcome = run_epochs(runner_with(0.01), 3, "anchored_silhouette")
    assert [row["epoch"] for row in outcome.rows] == [0, 1]  # epoch 2's fit learned nothing: it is left out
    assert outcome.stopped == "epoch 2: its fit had nothing left to learn (mean loss 0.0010 < 0.01)"
    assert outcome.chosen["model"] == "epoch_1"
    # the fit that ran and was left out is handed back, for the job to clear its model and count its steps
    assert outcome.dropped["epoch"] == 2 and outcome.dropped["model"] == "epoch_2"
    assert outcome.dropped["loss"] == 0.001 and outcome.dropped["steps"] == 1 and outcome.dropped["pairs"] > 0
    # without the rule every epoch runs, and the tightest (epoch 3) is delivered
    assert run_epochs(runner_with(None), 3, "anchored_silhouette").chosen["model"] == "epoch_3"
