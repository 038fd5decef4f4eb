"""Which setting changes make a finished WC-SBERT round run again."""

from contrastext.pipelines.wcsbert import round_settings
from contrastext.selftrain.config import WCSBertConfig
from contrastext.stages import as_json, setting_differences


def _with_rounds(config: WCSBertConfig, **changes) -> WCSBertConfig:
    return config.model_copy(update={"rounds": config.rounds.model_copy(update=changes)})


def test_how_many_rounds_run_and_when_to_stop_do_not_change_a_finished_round():
    config = WCSBertConfig()
    longer = _with_rounds(config, rounds=5, patience=3, min_change=0.5, guard=False, guard_sample=10)
    assert setting_differences(round_settings(config, "m0"), round_settings(longer, "m0")) == []
    other = _with_rounds(config, init="base", reencode=not config.rounds.reencode)
    assert sorted(setting_differences(round_settings(config, "m0"), round_settings(other, "m0"))) == [
        "rounds.init", "rounds.reencode"]
    assert setting_differences(round_settings(config, "m0"), round_settings(config, "round_1/model")) == ["from"]


def test_a_marker_that_kept_every_round_setting_still_matches():
    # markers written before the round's settings were trimmed hold all of them
    config = WCSBertConfig()
    old = as_json({**round_settings(config, "m0"), "rounds": config.rounds.model_dump(mode="json")})
    assert setting_differences(old, round_settings(_with_rounds(config, rounds=7), "m0")) == []
    assert setting_differences(old, round_settings(_with_rounds(config, init="base"), "m0")) == ["rounds.init"]


def test_a_marker_written_before_calibration_and_templates_existed():
    config = WCSBertConfig()
    old = as_json(round_settings(config, "m0"))
    del old["rounds"]["calibration"], old["labels"]["templates"]
    defaults = as_json(round_settings(WCSBertConfig(), "m0"))
    assert setting_differences(old, round_settings(config, "m0"), defaults=defaults) == []  # what ran then
    calibrated = _with_rounds(config, calibration={"enabled": True})
    ensemble = config.model_copy(update={"labels": config.labels.model_copy(update={"templates": ["{label}", "a {label}"]})})
    assert setting_differences(old, round_settings(calibrated, "m0"), defaults=defaults) == ["rounds.calibration"]
    assert setting_differences(old, round_settings(ensemble, "m0"), defaults=defaults) == ["labels.templates"]
