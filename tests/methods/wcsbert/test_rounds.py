"""The self-training loop shared by WCSBert and the job: which round and head it keeps, when it stops, and
when it asks the guard. The runner and guard here are small hand-made ones with known scores; the class and
the job run the loop with their real ones (tests/methods/wcsbert/test_wcsbert_class.py, tests/pipelines)."""

from __future__ import annotations

import numpy as np
import pytest

from contrastext.methods.wcsbert.guard import GuardScore, HeadScores
from contrastext.methods.wcsbert.heads import LabelHead
from contrastext.methods.wcsbert.rounds import run_rounds
from contrastext.methods.wcsbert.stopping import RoundStop


def _head(kind: str, model: str) -> LabelHead:
    vectors = np.eye(2, dtype=np.float32) if model.endswith("0") else np.eye(2, dtype=np.float32)[::-1].copy()
    return LabelHead(kind, vectors, np.arange(2), 2)


class Guard:
    """Scores models named "m0", "m1", …: ``values[model]`` is (prompt head, prototype head)."""

    heads = ("prompts", "prototypes")

    def __init__(self, values: dict[str, tuple[float, float]]):
        self.values, self.scored = values, []

    def score(self, model: str | None = None) -> HeadScores:
        model = model or "m0"
        self.scored.append(model)
        prompts, prototypes = self.values[model]
        return HeadScores({"prompts": GuardScore(prompts, 1.0), "prototypes": GuardScore(prototypes, 1.0)},
                          {kind: _head(kind, model) for kind in self.heads})


class Runner:
    """Round r trains "m{r}"; ``finished`` rounds are read back with the records an earlier run kept."""

    def __init__(self, finished: dict[int, dict] | None = None, changed: dict[int, float] | None = None):
        self.finished, self.trained, self.shown = finished or {}, [], []
        self.changed = changed or {}  # round → the share of its teacher's labels changed (default 0.5)

    def train(self, r: int, model: str) -> tuple[dict, str]:
        if r in self.finished:
            return dict(self.finished[r]), f"m{r}"
        self.trained.append((r, model))
        return {"round": r, "labels_changed": self.changed.get(r, 0.5)}, f"m{r}"

    def finish(self, record: dict, model: str) -> dict:
        self.shown.append(record["round"])
        return record | {"shown": True}


def test_keeps_the_best_round_and_stops_after_the_guard_falls():
    guard = Guard({"m0": (0.50, 0.52), "m1": (0.60, 0.58), "m2": (0.55, 0.70), "m3": (0.9, 0.9)})
    runner = Runner()
    outcome = run_rounds(runner, "m0", 3, RoundStop(3, guard_0=0.50), guard)
    assert runner.trained == [(1, "m0"), (2, "m1")] and runner.shown == [1, 2]  # round 3 never runs
    assert outcome.chosen_round == 1 and outcome.model == "m1" and outcome.head.kind == "prompts"
    assert "did not improve for 1 round" in outcome.stop.reason
    assert [r["guard"] for r in outcome.records] == [0.60, 0.55] and all(r["shown"] for r in outcome.records)
    # round 2's prototypes beat its prompts by more than the margin: its record says so, but round 1 is kept
    assert outcome.records[1]["head"] == "prototypes" and outcome.records[0]["head"] == "prompts"
    assert guard.scored == ["m0", "m1", "m2"]  # each model once


def test_no_round_delivers_the_start_model_with_the_head_the_guard_chooses():
    guard = Guard({"m0": (0.40, 0.60)})
    outcome = run_rounds(Runner(), "m0", 0, RoundStop(0, guard_0=0.40), guard)
    assert outcome.records == [] and outcome.model == "m0" and outcome.chosen_round == 0
    assert outcome.head.kind == "prototypes" and outcome.stop.reason == "no rounds configured"


def test_without_the_guard_the_last_round_is_kept_with_no_head():
    runner = Runner()
    outcome = run_rounds(runner, "m0", 2, RoundStop(2))
    assert outcome.chosen_round == 2 and outcome.model == "m2" and outcome.head is None
    assert "guard" not in outcome.records[0]


def test_a_finished_round_is_scored_again_only_for_the_head_it_is_delivered_with():
    guard = Guard({"m0": (0.50, 0.50), "m1": (0.60, 0.61), "m2": (0.58, 0.58)})
    earlier = {1: {"round": 1, "labels_changed": 0.4, "guard": 0.60, "head": "prompts",
                   "guard_heads": {"prompts": 0.60, "prototypes": 0.61}}}
    runner = Runner(finished=earlier)
    outcome = run_rounds(runner, "m0", 2, RoundStop(2, guard_0=0.50), guard)
    assert runner.trained == [(2, "m1")] and outcome.chosen_round == 1
    # m1's record kept its scores; it is scored once more, at the end, to make the head it is delivered with
    assert guard.scored == ["m0", "m2", "m1"] and outcome.head.kind == "prompts"
    # a record scored with other heads than those asked for is scored again when it is read back
    other = {1: {**earlier[1], "guard_heads": {"prompts": 0.60}}}
    guard.scored.clear()
    run_rounds(Runner(finished=other), "m0", 1, RoundStop(1, guard_0=0.50), guard)
    assert guard.scored == ["m0", "m1"]


def test_settled_pseudo_labels_stop_the_rounds():
    guard = Guard({"m0": (0.5, 0.5), "m1": (0.6, 0.6), "m2": (0.7, 0.7)})
    stop = RoundStop(5, guard_0=0.5, min_change=0.6)  # every round changes 0.5 of the labels
    outcome = run_rounds(Runner(), "m0", 5, stop, guard)
    assert len(outcome.records) == 1 and outcome.chosen_round == 1
    assert outcome.stop.reason.startswith("pseudo-labels settled")


@pytest.mark.parametrize("rounds", [1, 2])
def test_the_guards_round_0_score_is_taken_when_not_given(rounds):
    guard = Guard({"m0": (0.9, 0.9), "m1": (0.5, 0.5), "m2": (0.4, 0.4)})
    outcome = run_rounds(Runner(), "m0", rounds, RoundStop(rounds, guard_0=0.9), guard)
    assert guard.scored[0] == "m0" and outcome.chosen_round == 0 and outcome.model == "m0"


class BlendGuard(Guard):
    """As ``Guard``, with the blend asked for too (scored as the prompts are) and the trained models told apart."""

    heads = ("prompts", "prototypes", "blend")

    def score(self, model: str | None = None) -> HeadScores:
        name = model or "m0"
        self.scored.append(name)
        prompts, prototypes = self.values[name]
        return HeadScores({"prompts": GuardScore(prompts, 1.0), "prototypes": GuardScore(prototypes, 1.0),
                           "blend": GuardScore(prompts, 1.0)}, {kind: _head(kind, name) for kind in self.heads},
                          trained=model is not None)


def test_a_kept_round_is_delivered_with_the_blend_also_when_read_back():
    values = {"m0": (0.50, 0.60), "m1": (0.60, 0.75), "m2": (0.55, 0.58)}
    outcome = run_rounds(Runner(), "m0", 2, RoundStop(2, guard_0=0.50), BlendGuard(values))
    assert outcome.chosen_round == 1 and outcome.head.kind == "blend"
    assert [r["head"] for r in outcome.records] == ["blend", "blend"]  # a trained round's prototypes' lead aside
    # an earlier run's finished rounds, read back: nothing trained, the kept round's blend made again
    runner, guard = Runner({r["round"]: r for r in outcome.records}), BlendGuard(values)
    again = run_rounds(runner, "m0", 2, RoundStop(2, guard_0=0.50), guard)
    assert runner.trained == [] and again.chosen_round == 1 and again.head.kind == "blend"
    assert guard.scored == ["m0", "m1"]  # the round-0 model, then the kept one for its head
    # the round-0 model kept: its prototypes, which lead its prompts by more than the margin
    kept_0 = run_rounds(Runner(), "m0", 1, RoundStop(1, guard_0=0.50), BlendGuard({**values, "m1": (0.4, 0.9)}))
    assert kept_0.chosen_round == 0 and kept_0.head.kind == "prototypes"


class ThreeHeadGuard(Guard):
    """``values[model]`` is (prompt head, prototype head, blend), each scored on its own."""

    heads = ("prompts", "prototypes", "blend")

    def score(self, model: str | None = None) -> HeadScores:
        name = model or "m0"
        self.scored.append(name)
        return HeadScores({kind: GuardScore(value, 1.0) for kind, value in zip(self.heads, self.values[name])},
                          {kind: _head(kind, name) for kind in self.heads}, trained=model is not None)


def test_the_round_0_model_is_left_by_the_prompts_score_and_a_trained_round_by_the_blends():
    # the prompts rise in round 2, but the blend it would be delivered with falls: round 1 is kept
    values = {"m0": (0.50, 0.52, 0.60), "m1": (0.55, 0.56, 0.58), "m2": (0.57, 0.60, 0.57)}
    outcome = run_rounds(Runner(), "m0", 2, RoundStop(2, guard_0=0.50), ThreeHeadGuard(values))
    assert outcome.chosen_round == 1 and outcome.head.kind == "blend"
    assert outcome.stop.reason.startswith("the blend head's guard score did not improve for 1 round")
    # round 1 leaves the round-0 model on its prompts' score (0.55 > 0.50), though its blend is below round 0's
    assert outcome.records[0]["guard_heads"]["blend"] < values["m0"][2]
    # the blend rising in round 2 keeps it, as the prompts falling below round 1's does not stop it
    rising = {**values, "m2": (0.54, 0.50, 0.59)}
    assert run_rounds(Runner(), "m0", 2, RoundStop(2, guard_0=0.50), ThreeHeadGuard(rising)).chosen_round == 2
    # a round whose prompts do not beat the round-0 model's is not kept, whatever its blend
    flat = {**values, "m1": (0.49, 0.70, 0.90)}
    kept_0 = run_rounds(Runner(), "m0", 2, RoundStop(2, guard_0=0.50), ThreeHeadGuard(flat))
    assert kept_0.chosen_round == 0 and len(kept_0.records) == 1


def test_without_the_blend_the_prompt_heads_score_chooses_between_trained_rounds():
    """A rule between rounds delivered with their prototypes was never measured: the prompts decide there."""
    guard = Guard({"m0": (0.50, 0.50), "m1": (0.55, 0.70), "m2": (0.57, 0.68)})
    outcome = run_rounds(Runner(), "m0", 2, RoundStop(2, guard_0=0.50), guard)
    assert [r["head"] for r in outcome.records] == ["prototypes", "prototypes"]
    assert outcome.chosen_round == 2 and outcome.stop.reason == "all rounds run"


@pytest.mark.parametrize("changed, kept", [(0.15, 2), (0.13, 2), (0.10, 1)])
def test_a_teacher_that_still_relabels_many_texts_keeps_the_later_round(changed, kept):
    values = {"m0": (0.50, 0.50), "m1": (0.60, 0.60), "m2": (0.55, 0.55)}  # the blend's guard falls in round 2
    outcome = run_rounds(Runner(changed={2: changed}), "m0", 2, RoundStop(2, guard_0=0.50, still_learning=0.13),
                         BlendGuard(values))
    assert outcome.chosen_round == kept and outcome.head.kind == "blend"
    assert ("round 2 kept though the blend's guard fell" in outcome.stop.reason) == (kept == 2)
    # the guard alone keeps round 1 whatever changed
    alone = run_rounds(Runner(changed={2: changed}), "m0", 2, RoundStop(2, guard_0=0.50), BlendGuard(values))
    assert alone.chosen_round == 1


def test_changed_labels_never_take_a_round_over_the_round_0_model():
    values = {"m0": (0.50, 0.50), "m1": (0.45, 0.45)}  # round 1's prompt guard falls below the untrained model's
    outcome = run_rounds(Runner(changed={1: 0.9}), "m0", 1, RoundStop(1, guard_0=0.50, still_learning=0.13),
                         BlendGuard(values))
    assert outcome.chosen_round == 0
    # and a third round whose teacher settled is judged by the guard again: round 2 stays kept
    values = {**values, "m1": (0.60, 0.60), "m2": (0.55, 0.55), "m3": (0.50, 0.50)}
    three = run_rounds(Runner(changed={2: 0.2, 3: 0.05}), "m0", 3,
                       RoundStop(3, guard_0=0.50, still_learning=0.13), BlendGuard(values))
    assert three.chosen_round == 2 and "did not improve" in three.stop.reason
    assert "round 2 kept though the blend's guard fell: its teacher changed 20.0%" in three.stop.reason
    # never a round whose prompt head falls below the round-0 model's, however many labels its teacher changed
    falling = run_rounds(Runner(changed={2: 0.9}), "m0", 2, RoundStop(2, guard_0=0.50, still_learning=0.13),
                         BlendGuard({**values, "m2": (0.45, 0.45)}))
    assert falling.chosen_round == 1
    # with patience, only the round right after the kept one: round 3's teacher moved from rejected round 2's
    patient = run_rounds(Runner(changed={2: 0.05, 3: 0.5}), "m0", 3,
                         RoundStop(3, guard_0=0.50, still_learning=0.13, patience=2),
                         BlendGuard({**values, "m2": (0.58, 0.58), "m3": (0.57, 0.57)}))
    assert patient.chosen_round == 1
    # a round whose guard rises is kept for that, with nothing more to say
    rising = run_rounds(Runner(changed={2: 0.2}), "m0", 2, RoundStop(2, guard_0=0.50, still_learning=0.13),
                        BlendGuard({**values, "m2": (0.65, 0.65)}))
    assert rising.chosen_round == 2 and rising.stop.reason == "all rounds run"
