"""Which setting changes make a finished WC-SBERT round run again."""

from contrastext.config import load_config
from contrastext.pipelines.wcsbert import round_settings
from contrastext.selftrain.config import WCSBertConfig
from contrastext.selftrain.text_positives import TextPositivesConfig
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
    config = _with_rounds(WCSBertConfig(), text_positives=TextPositivesConfig(same_label=True))
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


def test_the_job_pseudo_labels_and_trains_its_rounds_through_the_wcsbert_class():
    from contrastext.config import load_config
    from contrastext.methods.wcsbert import WCSBert
    from contrastext.pipelines.wcsbert import method_of
    from contrastext.selftrain.teachers import PromptTeacher, PrototypeTeacher

    config = load_config(WCSBertConfig, overrides=[
        "rounds.pseudo_labels=prototypes", "rounds.prototype_fraction=0.3", "rounds.prototype_iterations=2",
        "rounds.calibration.enabled=true", "rounds.selection.top_fraction=0.4", "rounds.train.batch_size=8",
        "rounds.train.encoder.max_length=48", "encoder.pooling=cls", "rounds.max_pairs_per_label=7",
        "labels.templates=['A {label} story.', '{label}']", "rounds.guard_sample=50", "rounds.patience=2",
        "rounds.text_positives.crops=true"])
    method = method_of(config)
    assert isinstance(method, WCSBert) and method.encoder == config.encoder.model
    assert method.teacher == PrototypeTeacher(fraction=0.3, iterations=2)
    assert method.calibration == config.rounds.calibration and method.calibration.enabled
    assert method.selection == config.rounds.selection and method.selection.top_fraction == 0.4
    assert method.text_positives == config.rounds.text_positives.resolved() and method.text_positives.crops
    assert method.prompts == ("A {label} story.", "{label}") and method.template == config.labels.pair_template
    # a round trains the job's round settings, with the job's encoder (its pooling) at the round's length
    assert method.train.batch_size == 8 and method.train.loss == config.rounds.train.loss
    assert method.train.encoder == config.encoder.model_copy(update={"max_length": 48})
    assert (method.max_pairs_per_label, method.guard_sample, method.patience) == (7, 50, 2)
    prompts = load_config(WCSBertConfig, overrides=["rounds.pseudo_labels=prompts"])
    assert isinstance(method_of(prompts).teacher, PromptTeacher)


def test_a_round_made_before_same_label_pairs_were_the_default_runs_again_on_plain_texts_only():
    from contrastext.pipelines.wcsbert import settings_before_they_existed

    for source, changed in [("texts", ["rounds.text_positives.same_label"]), ("wikipedia", [])]:
        config = load_config(WCSBertConfig, overrides=[f"pool.source={source}"])
        # a marker from when same_label was off by default
        before = as_json(round_settings(_with_rounds(config, text_positives=TextPositivesConfig(same_label=False)),
                                        "m0"))
        assert setting_differences(before, round_settings(config, "m0")) == changed
        # a marker from before text pairs existed at all: those rounds had none
        older = as_json(before)
        del older["rounds"]["text_positives"]
        assert setting_differences(older, round_settings(config, "m0"),
                                   defaults=settings_before_they_existed("m0")) == (
            ["rounds.text_positives"] if changed else [])


def test_a_round_balanced_before_the_median_runs_again_and_the_heads_retrain_no_round():
    from contrastext.pipelines.wcsbert import settings_before_they_existed

    config = load_config(WCSBertConfig)
    older = as_json(round_settings(config, "m0"))
    del older["rounds"]["selection"]["balance_to"]  # a marker from when every label was held to the smallest
    assert setting_differences(older, round_settings(config, "m0"),
                               defaults=settings_before_they_existed("m0")) == ["rounds.selection.balance_to"]
    prompts_only = load_config(WCSBertConfig, overrides=["rounds.heads=[prompts]"])
    assert setting_differences(as_json(round_settings(config, "m0")), round_settings(prompts_only, "m0")) == []


def test_a_pool_not_reencoded_is_scored_with_its_prompts_only():
    """The stored embeddings of a pool that is not re-encoded are an earlier model's: no prototypes from them."""
    from contrastext.pipelines.wcsbert import _Guard

    assert _Guard(None, load_config(WCSBertConfig), None).heads == ["prompts", "prototypes"]
    stale = load_config(WCSBertConfig, overrides=["rounds.reencode=false"])
    assert _Guard(None, stale, None).heads == ["prompts"]
