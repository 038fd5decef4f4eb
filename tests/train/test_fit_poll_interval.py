"""The Ray Train setting a fit gives itself: how often the controller polls its workers."""

import os

import pytest

from contrastext.config import OutputConfig, TrainConfig
from contrastext.train.fit import POLL_INTERVAL_ENV, fit


@pytest.mark.ray
def test_a_fit_has_ray_train_poll_its_workers_often_unless_told_otherwise(ray_session, monkeypatch, tmp_path):
    empty = ray_session.data.from_items([{"anchor": "a", "positive": "b"}]).limit(0)
    monkeypatch.delenv(POLL_INTERVAL_ENV, raising=False)
    with pytest.raises(ValueError, match="empty"):
        fit(empty, TrainConfig(), OutputConfig(storage_path=str(tmp_path)), rows=0)
    assert os.environ[POLL_INTERVAL_ENV] == "0.2"  # Ray Train hands the driver's value to its controller
    monkeypatch.setenv(POLL_INTERVAL_ENV, "5")
    with pytest.raises(ValueError, match="empty"):
        fit(empty, TrainConfig(), OutputConfig(storage_path=str(tmp_path)), rows=0)
    assert os.environ[POLL_INTERVAL_ENV] == "5"
