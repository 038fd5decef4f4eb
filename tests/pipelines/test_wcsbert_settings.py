"""Which setting changes make a finished WC-SBERT round run again."""

from contrastext.config import EncoderConfig, load_config
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.text_positives import TextPositivesConfig
from contrastext.methods.wcsbert.stored_rounds import round_settings
from contrastext.stages import as_json, setting_differences


def _with_rounds(config: WCSBertConfig, **changes) -> WCSBertConfig:
    return config.model_copy(update={"rounds": config.rounds.model_copy(update=changes)})


def test_how_many_rounds_run_and_when_to_stop_do_not_change_a_finished_round():
    config = WCSBertConfig()
    longer = _with_rounds(config, rounds=5, patience=3, min_change=0.5, guard=False, guard_sample=10,
                          still_learning=None)
    assert setting_differences(round_settings(config, "m0"), round_settings(longer, "m0")) == []
    other = _with_rounds(config, init="base", reencode=not config.rounds.reencode)
    assert sorted(setting_differences(round_settings(config, "m0"), round_settings(other, "m0"))) == [
        "rounds.init", "rounds.reencode"]
    assert setting_differences(round_settings(config, "m0"), round_settings(config, "round_1/model")) == ["from"]
    # the tokens read to score the pool label it: a round made reading another number runs again
    longer_texts = config.model_copy(update={"encoder": config.encoder.model_copy(update={"max_length": 512})})
    assert setting_differences(round_settings(config, "m0"), round_settings(longer_texts, "m0")) == [
        "read_max_length"]


def test_the_job_pseudo_labels_and_trains_its_rounds_through_the_wcsbert_class():
    from contrastext.config import load_config
    from contrastext.methods.wcsbert.model import WCSBert
    from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher
    from contrastext.pipelines.wcsbert import method_of

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
    assert method.train.encoder == EncoderConfig(model=config.encoder.model, pooling="cls", max_length=48,
                                                 backend=config.encoder.backend)
    assert (method.max_pairs_per_label, method.guard_sample, method.patience) == (7, 50, 2)
    prompts = load_config(WCSBertConfig, overrides=["rounds.pseudo_labels=prompts"])
    assert isinstance(method_of(prompts).teacher, PromptTeacher)


def test_a_round_runs_again_when_same_label_pairs_or_the_balance_change_and_not_for_the_heads():
    for source, changed in [("texts", ["rounds.text_positives.same_label"]), ("wikipedia", [])]:
        config = load_config(WCSBertConfig, overrides=[f"pool.source={source}"])
        # same-label pairs asked off: a plain-text pool's round changes, a Wikipedia pool has none anyway
        off = as_json(round_settings(_with_rounds(config, text_positives=TextPositivesConfig(same_label=False)),
                                     "m0"))
        assert setting_differences(off, round_settings(config, "m0")) == changed
    config = load_config(WCSBertConfig)
    smallest = load_config(WCSBertConfig, overrides=["rounds.selection.balance_to=smallest"])
    assert setting_differences(as_json(round_settings(smallest, "m0")), round_settings(config, "m0")) == [
        "rounds.selection.balance_to"]
    prompts_only = load_config(WCSBertConfig, overrides=["rounds.heads=[prompts]"])
    assert setting_differences(as_json(round_settings(config, "m0")), round_settings(prompts_only, "m0")) == []
    # a marker written by a version with other settings (here one without calibration) runs the round again
    older = as_json(round_settings(config, "m0"))
    del older["rounds"]["calibration"]
    assert setting_differences(older, round_settings(config, "m0")) == ["rounds.calibration"]


def test_a_pool_not_reencoded_is_scored_with_its_prompts_only():
    """The stored embeddings of a pool that is not re-encoded are an earlier model's: no prototypes from them."""
    from contrastext.methods.wcsbert.stored_rounds import StoredGuard

    assert StoredGuard(None, load_config(WCSBertConfig), None).heads == ["prompts", "prototypes", "blend"]
    stale = load_config(WCSBertConfig, overrides=["rounds.reencode=false"])
    assert StoredGuard(None, stale, None).heads == ["prompts"]


def test_an_evaluation_is_measured_again_when_the_labels_the_model_or_the_evaluation_set_change(tmp_path, capsys):
    from types import SimpleNamespace

    from contrastext.methods.wcsbert.evaluation import evaluation_stage
    from contrastext.methods.wcsbert.job_run import JobRun

    measured = []

    def compute(folder: str) -> dict:
        measured.append(folder)
        return {"accuracy": 0.5 + len(measured) / 100}

    def evaluation(config: WCSBertConfig, source: str = "vital, 1000 rows", made_with=None) -> dict:
        run = JobRun(config, str(tmp_path), None, "", SimpleNamespace(source=source), timings={}, method=None,
                     encode_pool=None)
        return evaluation_stage(run, "pretrained", str(tmp_path / "pretrain"), "pretrain/model",
                                made_with or {"pretrain": {"steps": 10}}, compute)

    config = load_config(WCSBertConfig)
    assert evaluation(config) == {"accuracy": 0.51}
    assert evaluation(config) == {"accuracy": 0.51} and len(measured) == 1  # the same: read back
    assert "pretrained evaluation: done in an earlier run" in capsys.readouterr().out
    aliases = load_config(WCSBertConfig, overrides=["labels.aliases={People: [Biography]}"])
    assert evaluation(aliases) == {"accuracy": 0.52}  # other aliases: measured again, not the earlier labels'
    assert "other settings (labels.aliases" in capsys.readouterr().out
    assert evaluation(aliases, made_with={"pretrain": {"steps": 20}}) == {"accuracy": 0.53}  # another model
    assert evaluation(aliases, source="vital, 500 rows", made_with={"pretrain": {"steps": 20}}) == {"accuracy": 0.54}
    assert measured == [str(tmp_path / "pretrain" / "evaluation")] * 4


def test_a_finished_rounds_guard_scores_are_kept_only_when_made_on_the_same_sample(tmp_path):
    from contrastext.methods.wcsbert.job_run import JobRun
    from contrastext.methods.wcsbert.stored_rounds import StoredModel, StoredRounds
    from contrastext.stages import Stage

    config = load_config(WCSBertConfig)
    run = JobRun(config, str(tmp_path), None, "", None, timings={}, method=None, encode_pool=None)
    start = StoredModel("m0", str(tmp_path / "round_0" / "embeddings"))
    scored = {"round": 1, "model": "round_1/model", "embeddings": "round_1/embeddings", "guard": 0.6,
              "guard_kappa": 0.6, "guard_anchored": 1.0, "head": "prompts", "guard_heads": {"prompts": 0.6},
              "guard_key": "sample-a"}
    Stage("wcsbert", "round 1", str(tmp_path / "round_1"), round_settings(config, "m0")).mark_done(scored)
    record, model = StoredRounds(run, "m0", None, "sample-a").train(1, start)
    assert record == scored and model == StoredModel("round_1/model", "round_1/embeddings")
    # another guard sample (or neighbourhood count): the round stays done, its guard fields go to be made again
    record, _ = StoredRounds(run, "m0", None, "sample-b").train(1, start)
    assert not [key for key in record if key.startswith("guard")] and record["model"] == "round_1/model"
