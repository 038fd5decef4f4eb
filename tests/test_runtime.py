"""What every Ray worker of a job is given by ``contrastext.runtime``."""

import os

import pytest

from contrastext.runtime import worker_environment


def test_ray_train_polls_its_workers_often_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert worker_environment()["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.2"
    assert worker_environment()["HF_HUB_OFFLINE"] == "1"
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "5")
    assert worker_environment()["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "5"


@pytest.mark.ray
def test_the_workers_of_the_session_have_it(ray_session):
    @ray_session.remote
    def seen() -> dict:
        return {k: os.environ.get(k) for k in ("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "HF_HUB_OFFLINE")}

    expected = os.environ.get("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    assert ray_session.get(seen.remote()) == {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": expected, "HF_HUB_OFFLINE": "1"}
