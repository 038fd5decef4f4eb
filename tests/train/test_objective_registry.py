"""Objectives are found by name in a registry that method packages add to."""

from __future__ import annotations

import subprocess
import sys

import pytest

from contrastext.config import TrainConfig
from contrastext.train import OBJECTIVES, Objective, build_objective, register_objective


def test_built_in_objectives_are_registered():
    assert {"embedding", "classify"} <= set(OBJECTIVES)


def test_a_registered_objective_is_built(monkeypatch):
    monkeypatch.setattr("contrastext.train.objectives.OBJECTIVES", dict(OBJECTIVES))

    class Recording(Objective):
        pass

    from contrastext.train import objectives

    register_objective("phrase", Recording)
    assert objectives.OBJECTIVES["phrase"] is Recording
    built = build_objective(TrainConfig(objective="phrase"))
    assert type(built) is Recording and built.config.objective == "phrase"


def test_an_unregistered_objective_is_a_clear_error(monkeypatch):
    monkeypatch.setattr("contrastext.train.objectives.OBJECTIVES",
                        {k: v for k, v in OBJECTIVES.items() if k != "phrase"})
    with pytest.raises(ValueError, match="no objective 'phrase' is registered"):
        build_objective(TrainConfig(objective="phrase"))


def test_the_phrase_objective_registers_itself_on_import():
    code = ("from contrastext.train import OBJECTIVES\nassert 'phrase' not in OBJECTIVES\n"
            "from contrastext.methods.uctopic.objective import PhraseObjective\nassert OBJECTIVES['phrase'] is PhraseObjective\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
