"""contrastext.config: defaults, YAML loading, --set overrides, validation errors, round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from contrastext.config import (
    EncoderConfig,
    FitJobConfig,
    OutputConfig,
    TrainConfig,
    apply_overrides,
    dump_config,
    load_config,
    parse_override,
)
from contrastext.models.resolve import DEFAULT_MODEL

# --- defaults ---------------------------------------------------------------------------------------

def test_train_config_defaults():
    config = TrainConfig()
    assert config.epochs == 1
    assert config.batch_size == 32
    assert config.max_steps is None
    assert config.columns == ("anchor", "positive")
    assert config.no_duplicates is True
    assert config.checkpoint_every_steps == 500
    assert config.keep_checkpoints == 2
    assert config.seed == 42
    assert config.max_failures == 0
    assert config.encoder.model == DEFAULT_MODEL
    assert config.encoder.pooling is None
    assert config.encoder.max_length == 128
    assert config.encoder.allow_download is False
    assert config.optimizer.lr == pytest.approx(2e-5)
    assert config.optimizer.warmup_ratio == pytest.approx(0.1)
    assert config.optimizer.max_grad_norm == pytest.approx(1.0)
    assert config.loss.name == "mnr"
    assert config.loss.params == {}
    assert config.scaling.num_workers == 1
    assert config.scaling.use_gpu is False


def test_fit_job_config_defaults_differ_from_plain_train_config():
    config = FitJobConfig()
    assert config.pairs is None
    assert config.max_rows is None
    assert config.eval_fraction == pytest.approx(0.1)
    # the quick-start job overrides a few TrainConfig defaults through its default factory
    assert config.train.batch_size == 16
    assert config.train.epochs == 1
    assert config.train.checkpoint_every_steps is None
    assert config.output.name == "quickstart"
    assert config.output.storage_path == "runs"
    assert config.ray.address is None
    assert config.ray.num_cpus is None


def test_default_factories_give_independent_objects():
    first, second = TrainConfig(), TrainConfig()
    first.loss.params["scale"] = 10.0
    assert second.loss.params == {}


# --- parse_override / apply_overrides ---------------------------------------------------------------

@pytest.mark.parametrize(("item", "path", "value"), [
    ("train.batch_size=64", ["train", "batch_size"], 64),
    ("train.bf16=false", ["train", "bf16"], False),
    ("train.optimizer.lr=0.001", ["train", "optimizer", "lr"], 0.001),
    ("train.columns=[text, label]", ["train", "columns"], ["text", "label"]),
    ("ray.address=null", ["ray", "address"], None),
    ("output.name=my-run", ["output", "name"], "my-run"),
    ("output.name=", ["output", "name"], ""),
    ("pairs=data/a=b.jsonl", ["pairs"], "data/a=b.jsonl"),  # split on the first '=' only
    (" train.seed =7", ["train", "seed"], 7),
    # PyYAML alone reads these as strings (YAML 1.1 wants a dot); config reads them as floats (YAML 1.2)
    ("train.loss.params.temperature=5e-2", ["train", "loss", "params", "temperature"], 0.05),
    ("train.optimizer.lr=1E-4", ["train", "optimizer", "lr"], 1e-4),
    ("x=-2.5e+3", ["x"], -2500.0),
    ("x=[1e-3, 2]", ["x"], [0.001, 2]),
    ("x=1e", ["x"], "1e"),
    ("x=e5", ["x"], "e5"),
])
def test_parse_override_reads_values_as_yaml(item, path, value):
    assert parse_override(item) == (path, value)


def test_parse_override_without_equals_is_rejected():
    with pytest.raises(ValueError, match="key.path=value"):
        parse_override("train.batch_size")


def test_parse_override_with_empty_key_is_rejected():
    with pytest.raises(ValueError, match="empty key"):
        parse_override("=3")


def test_apply_overrides_creates_and_updates_nested_keys():
    data = {"train": {"batch_size": 16, "optimizer": {"lr": 1.0}}}
    result = apply_overrides(data, ["train.batch_size=8", "train.optimizer.lr=0.5",
                                    "train.loss.params.scale=20", "pairs=x.parquet"])
    assert result is data
    assert data == {"train": {"batch_size": 8, "optimizer": {"lr": 0.5}, "loss": {"params": {"scale": 20}}},
                    "pairs": "x.parquet"}


def test_apply_overrides_later_wins():
    assert apply_overrides({}, ["a=1", "a=2"]) == {"a": 2}


def test_apply_overrides_through_a_value_is_rejected():
    with pytest.raises(ValueError, match="'batch_size' is a value, not a section"):
        apply_overrides({"train": {"batch_size": 16}}, ["train.batch_size.x=1"])


# --- load_config ------------------------------------------------------------------------------------

def _write(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_without_file_or_overrides_is_the_defaults():
    assert load_config(FitJobConfig) == FitJobConfig()


def test_load_config_from_yaml_file(tmp_path):
    path = _write(tmp_path, """
pairs: data/pairs.parquet
max_rows: 1000
train:
  batch_size: 64
  epochs: 3
  columns: [question, answer]
  optimizer:
    lr: 0.0001
  loss:
    name: ntxent
    params: {temperature: 0.05}
output:
  storage_path: s3://bucket/runs
  name: exp1
""")
    config = load_config(FitJobConfig, path)
    assert config.pairs == "data/pairs.parquet"
    assert config.max_rows == 1000
    assert config.train.batch_size == 64
    assert config.train.epochs == 3
    assert config.train.columns == ("question", "answer")
    assert config.train.optimizer.lr == pytest.approx(1e-4)
    assert config.train.loss.name == "ntxent"
    assert config.train.loss.params == {"temperature": 0.05}
    assert config.output.storage_path == "s3://bucket/runs"
    assert config.output.name == "exp1"
    # keys the file leaves out keep their defaults
    assert config.eval_fraction == pytest.approx(0.1)
    assert config.train.seed == 42


def test_a_partial_section_keeps_the_jobs_other_defaults_as_set_does(tmp_path):
    # a ``train:`` block in the file changes what it names; the quick-start's batch size stays, as with --set
    config = load_config(FitJobConfig, _write(tmp_path, "train:\n  epochs: 2\n  optimizer: {lr: 0.001}\n"
                                                        "output: {storage_path: s3://bucket/runs}\n"))
    assert config.train.epochs == 2 and config.train.optimizer.lr == pytest.approx(1e-3)
    assert config.train.batch_size == 16 and config.train.checkpoint_every_steps is None
    assert config.train.optimizer.weight_decay == TrainConfig().optimizer.weight_decay
    assert config.output.storage_path == "s3://bucket/runs" and config.output.name == "quickstart"
    assert config == load_config(FitJobConfig, overrides=["train.epochs=2", "train.optimizer.lr=0.001",
                                                          "output.storage_path=s3://bucket/runs"])


def test_a_free_mapping_in_the_file_replaces_the_default_one(tmp_path):
    from contrastext.methods.wcsbert.config import WCSBertConfig

    # the job's default aliases belong to its default labels: a file's labels and aliases replace them whole
    config = load_config(WCSBertConfig, _write(tmp_path, "labels:\n  names: [Tennis, Golf]\n"
                                                         "  aliases: {Golf: [putting]}\n"))
    assert config.labels.names == ["Tennis", "Golf"] and config.labels.aliases == {"Golf": ["putting"]}
    assert config.labels.template == WCSBertConfig().labels.template and config.output.name == "wcsbert"


def test_a_data_source_in_the_file_replaces_the_default_one(tmp_path):
    from contrastext.methods.wcsbert.config import WCSBertConfig
    from contrastext.methods.supcon.config import SupconClassifyConfig

    # another file's reader and columns must not meet the default dataset's (the Vital articles)
    config = load_config(WCSBertConfig, _write(tmp_path, "pool:\n  texts: {path: notes.jsonl}\n"))
    assert config.pool.texts.path == "notes.jsonl" and config.pool.texts.dataset is None
    assert config.pool.max_rows == WCSBertConfig().pool.max_rows  # the section's other settings stay
    # the classify job's earlier keys name both sources: they do not meet the default 20NG sources
    data = load_config(SupconClassifyConfig, _write(tmp_path, "data: {train_file: a.jsonl, test_file: b.jsonl}\n")).data
    assert (data.train.path, data.test.path) == ("a.jsonl", "b.jsonl")


def test_another_loss_does_not_inherit_the_default_losss_params(tmp_path):
    from contrastext.methods.shuffle_divide.config import ShuffleDivideConfig

    # Shuffle & Divide's default loss is NT-Xent with a temperature, which MNR does not take
    assert ShuffleDivideConfig().train.loss.params == {"temperature": 0.1}
    from_file = load_config(ShuffleDivideConfig, _write(tmp_path, "train:\n  loss: {name: mnr}\n"))
    assert from_file.train.loss.name == "mnr" and from_file.train.loss.params == {}
    assert load_config(ShuffleDivideConfig, overrides=["train.loss.name=mnr"]).train.loss == from_file.train.loss
    for overrides in (["train.loss.name=mnr", "train.loss.params.scale=20"],
                      ["train.loss.params.scale=20", "train.loss.name=mnr"],
                      ["train.loss={name: mnr, params: {scale: 20}}", "train.loss.name=mnr"],
                      ["train={loss: {name: mnr, params: {scale: 20}}}", "train.loss.name=mnr"]):
        assert load_config(ShuffleDivideConfig, overrides=overrides).train.loss.params == {"scale": 20}
    # the same loss keeps its parameters, and a file's parameters alone keep the default loss
    assert load_config(ShuffleDivideConfig, overrides=["train.loss.name=ntxent"]).train.loss.params == {
        "temperature": 0.1}
    only_params = load_config(ShuffleDivideConfig, _write(tmp_path, "train:\n  loss: {params: {temperature: 0.2}}\n"))
    assert only_params.train.loss.name == "ntxent" and only_params.train.loss.params == {"temperature": 0.2}


def test_empty_yaml_file_is_the_defaults(tmp_path):
    assert load_config(FitJobConfig, _write(tmp_path, "")) == FitJobConfig()


def test_overrides_keep_the_job_defaults():
    config = load_config(FitJobConfig, overrides=["train.seed=7"])
    assert config.train.seed == 7
    # overrides are applied over the model's defaults, so the quick-start factory still holds
    assert config.train.batch_size == 16
    assert config.train.checkpoint_every_steps is None
    assert config.output.name == "quickstart"


def test_yaml_typed_overrides():
    config = load_config(FitJobConfig, overrides=[
        "train.batch_size=8", "train.bf16=false", "train.columns=[text, label]",
        "train.loss.name=supcon", "train.loss.params.temperature=0.1", "train.max_steps=5",
        "ray.num_cpus=2", "train.optimizer.max_grad_norm=null",
    ])
    assert config.train.batch_size == 8 and isinstance(config.train.batch_size, int)
    assert config.train.bf16 is False
    assert config.train.columns == ("text", "label")
    assert config.train.loss.name == "supcon"
    assert config.train.loss.params == {"temperature": 0.1}
    assert config.train.max_steps == 5
    assert config.ray.num_cpus == 2
    assert config.train.optimizer.max_grad_norm is None


def test_scientific_notation_reaches_free_form_loss_params_as_a_float(tmp_path):
    # typed fields would coerce "1e-4" anyway; loss.params is dict[str, Any] and is passed to the loss as is
    config = load_config(FitJobConfig, overrides=["train.loss.params.temperature=5e-2"])
    assert config.train.loss.params == {"temperature": 0.05}
    assert isinstance(config.train.loss.params["temperature"], float)

    path = _write(tmp_path, "train:\n  loss:\n    name: ntxent\n    params: {temperature: 5e-2}\n")
    params = load_config(FitJobConfig, path).train.loss.params
    assert params == {"temperature": 0.05} and isinstance(params["temperature"], float)


def test_override_on_top_of_a_file(tmp_path):
    path = _write(tmp_path, "train:\n  batch_size: 64\n  epochs: 3\noutput:\n  name: from-file\n")
    config = load_config(FitJobConfig, path, ["train.batch_size=8", "output.storage_path=/tmp/x"])
    assert config.train.batch_size == 8       # the override wins over the file
    assert config.train.epochs == 3           # the file's other values stay
    assert config.output.name == "from-file"
    assert config.output.storage_path == "/tmp/x"


def test_unknown_top_level_key_is_rejected_by_name(tmp_path):
    with pytest.raises(ValidationError) as info:
        load_config(FitJobConfig, _write(tmp_path, "pairz: x.parquet\n"))
    errors = info.value.errors()
    assert [e["type"] for e in errors] == ["extra_forbidden"]
    assert errors[0]["loc"] == ("pairz",)
    assert "pairz" in str(info.value)


def test_unknown_nested_override_key_is_rejected_by_name():
    with pytest.raises(ValidationError) as info:
        load_config(FitJobConfig, overrides=["train.batch_sise=8"])
    errors = info.value.errors()
    assert [e["type"] for e in errors] == ["extra_forbidden"]
    assert errors[0]["loc"] == ("train", "batch_sise")
    assert "batch_sise" in str(info.value)


@pytest.mark.parametrize(("override", "loc"), [
    ("train.batch_size=1", ("train", "batch_size")),
    ("train.optimizer.warmup_ratio=2", ("train", "optimizer", "warmup_ratio")),
    ("train.optimizer.lr=0", ("train", "optimizer", "lr")),
    ("train.epochs=0", ("train", "epochs")),
    ("eval_fraction=1", ("eval_fraction",)),
    ("train.loss.name=triplet", ("train", "loss", "name")),
    ("train.encoder.pooling=sum", ("train", "encoder", "pooling")),
    ("train.batch_size=many", ("train", "batch_size")),
])
def test_bad_values_are_rejected(override, loc):
    with pytest.raises(ValidationError) as info:
        load_config(FitJobConfig, overrides=[override])
    assert [e["loc"] for e in info.value.errors()] == [loc]


def test_bad_value_in_a_file_is_rejected(tmp_path):
    with pytest.raises(ValidationError) as info:
        load_config(FitJobConfig, _write(tmp_path, "train:\n  batch_size: 1\n"))
    assert [e["loc"] for e in info.value.errors()] == [("train", "batch_size")]


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_top_level_is_rejected(tmp_path, text):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match="top level must be a mapping") as info:
        load_config(FitJobConfig, path)
    assert not isinstance(info.value, ValidationError)
    assert str(path) in str(info.value)


def test_override_without_equals_is_rejected_by_load_config():
    with pytest.raises(ValueError, match="not of the form key.path=value"):
        load_config(FitJobConfig, overrides=["train.batch_size"])


def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        load_config(FitJobConfig, tmp_path / "absent.yaml")


# --- dump_config ------------------------------------------------------------------------------------

def test_dump_config_round_trips_through_load_config(tmp_path):
    config = load_config(FitJobConfig, overrides=[
        "pairs=data/p.jsonl", "train.batch_size=8", "train.columns=[q, a]", "train.loss.name=ntxent",
        "train.loss.params.temperature=0.05", "train.optimizer.lr=0.0003", "output.storage_path=s3://b/r",
        "train.max_steps=3",
    ])
    text = dump_config(config)
    assert "batch_size: 8" in text
    path = _write(tmp_path, text, "dumped.yaml")
    assert load_config(FitJobConfig, path) == config


def test_dump_config_of_defaults_round_trips(tmp_path):
    config = TrainConfig()
    assert load_config(TrainConfig, _write(tmp_path, dump_config(config))) == config


def test_dump_config_keeps_field_order():
    text = dump_config(FitJobConfig())
    top_level = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert top_level == list(FitJobConfig.model_fields)


# --- OutputConfig.run_dir ---------------------------------------------------------------------------

def test_run_dir_of_a_relative_local_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_dir = OutputConfig(storage_path="runs", name="exp").run_dir()
    assert Path(run_dir).is_absolute()
    assert Path(run_dir) == tmp_path.resolve() / "runs" / "exp"


def test_run_dir_expands_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Path(OutputConfig(storage_path="~/runs", name="exp").run_dir()) == tmp_path.resolve() / "runs" / "exp"


@pytest.mark.parametrize("storage", ["s3://bucket/runs", "s3://bucket/runs/"])
def test_run_dir_of_a_uri_stays_a_uri(storage):
    assert OutputConfig(storage_path=storage, name="exp").run_dir() == "s3://bucket/runs/exp"


# ---------------------------------------------------------------------------------------- EncoderConfig.load
def test_encoder_config_load_applies_every_setting(tiny_encoder_dir):
    import numpy as np

    from contrastext.models import TextEncoder

    texts = ["a short sentence", "another, somewhat longer sentence about nothing in particular"]
    settings = EncoderConfig(model=str(tiny_encoder_dir), pooling="max", normalize=True, max_length=8)
    encoder = settings.load(device="cpu")
    assert (encoder.pooling, encoder.normalize, encoder.max_length) == ("max", True, 8)
    vectors = encoder.encode(texts)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # the folder's own settings (mean pooling, no normalisation, 64 tokens) give other vectors
    plain = TextEncoder.from_pretrained(tiny_encoder_dir, device="cpu")
    assert (plain.pooling, plain.normalize, plain.max_length) == ("mean", False, 64)
    assert not np.allclose(plain.encode(texts), vectors, atol=1e-3)


def test_encoder_config_load_takes_another_model_and_token_limit(tiny_encoder_dir, tmp_path):
    from contrastext.models import TextEncoder

    other = TextEncoder.load(tiny_encoder_dir)
    other.pooling = "cls"  # saved into the copy's folder, so the copy is told apart from the original
    copy = other.save(tmp_path / "copy")
    settings = EncoderConfig(model="no-such-model-anywhere", normalize=False, max_length=16)
    encoder = settings.load(copy, max_length=12, device="cpu")
    assert (encoder.pooling, encoder.normalize, encoder.max_length) == ("cls", False, 12)
    assert settings.load(copy, device="cpu").max_length == 16
    with pytest.raises(Exception, match="no-such-model-anywhere"):
        settings.load(device="cpu")


def test_the_backend_defaults_to_auto_and_the_environment_can_name_another(monkeypatch):
    from contrastext.predict.config import PredictConfig
    from contrastext.serve.config import ServedModelConfig

    def defaults():
        return (EncoderConfig().backend, ServedModelConfig().backend,
                PredictConfig(model="bundled:minilm", input={"path": "in.parquet"}).backend)

    monkeypatch.delenv("CONTRASTEXT_BACKEND", raising=False)
    assert defaults() == ("auto", "auto", "auto")
    monkeypatch.setenv("CONTRASTEXT_BACKEND", "onnx")
    assert defaults() == ("onnx", "onnx", "onnx")
    assert EncoderConfig(backend="torch").backend == "torch"  # a named backend is kept
    monkeypatch.setenv("CONTRASTEXT_BACKEND", "tensorrt")
    with pytest.raises(ValueError, match="Unknown backend 'tensorrt'"):
        EncoderConfig()
