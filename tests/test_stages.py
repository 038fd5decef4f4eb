"""Stage: the done-marker that compares settings, the clock and the console lines of a job's stages."""

from __future__ import annotations

import json
import re
import time

import pytest

from contrastext import storage
from contrastext.stages import DONE_FILE, Stage, as_json, fingerprint, setting_differences

SETTINGS = {"model": "bundled:minilm", "train": {"lr": 2e-5, "columns": ("anchor", "positive")}, "seed": 0}


def test_a_finished_stage_is_skipped_with_its_result_and_says_so(tmp_path, capsys):
    folder = str(tmp_path / "round_1")
    first = Stage("job", "round 1", folder, SETTINGS)
    assert first.finished() is None  # never run
    result = {"pairs": 12, "loss": 0.5}
    assert first.mark_done(result) is result
    record = json.loads((tmp_path / "round_1" / DONE_FILE).read_text())
    assert record["stage"] == "round 1" and record["result"] == result
    assert record["settings"]["train"]["columns"] == ["anchor", "positive"]  # as JSON reads it back
    capsys.readouterr()

    again = Stage("job", "round 1", folder, SETTINGS).finished()
    assert again is not None and again["result"] == result
    out = capsys.readouterr().out
    assert out.startswith("[job] round 1: done in an earlier run with these settings, skipped"), out
    assert folder in out


def test_other_settings_are_named_and_the_stage_runs_again(tmp_path, capsys):
    folder = str(tmp_path / "pretrain")
    Stage("job", "pretrain", folder, SETTINGS).mark_done({"steps": 3})
    changed = {**SETTINGS, "train": {**SETTINGS["train"], "lr": 1e-4}}
    assert Stage("job", "pretrain", folder, changed).finished() is None
    assert "[job] pretrain: " in (out := capsys.readouterr().out) and "other settings (train.lr)" in out
    # a setting added to the code since the marker was written, or removed since, is a difference too
    assert Stage("job", "pretrain", folder, {**SETTINGS, "new_option": True}).finished() is None
    assert "other settings (new_option)" in capsys.readouterr().out
    removed = {key: value for key, value in SETTINGS.items() if key != "seed"}
    assert Stage("job", "pretrain", folder, removed).finished() is None
    assert "other settings (seed)" in capsys.readouterr().out
    assert Stage("job", "pretrain", folder, SETTINGS).finished()["result"] == {"steps": 3}


def test_setting_differences_name_nested_paths():
    assert sorted(setting_differences({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": 1, "c": 5}, "d": 4})) == ["a.c", "d"]
    assert setting_differences({"a": 1, "c": {"d": 1}}, {"a": 1, "b": 2, "c": {}}) == ["b", "c.d"]
    assert setting_differences([1, 2], [1, 3]) == ["."]


def test_how_a_fit_runs_is_not_a_setting_of_what_it_makes():
    from contrastext.config import TrainConfig

    unset, on, off = (as_json({"train": TrainConfig(in_process=mode).model_dump(mode="json")})
                      for mode in (None, True, False))
    assert "in_process" not in unset["train"] and on["train"]["in_process"] is True
    assert setting_differences(unset, on) == setting_differences(on, off) == []
    assert fingerprint(unset) == fingerprint(on) == fingerprint(off)
    assert fingerprint({"train": {"lr": 1}}) != fingerprint({"train": {"lr": 2}})


def test_the_clock_and_a_progress_line(capsys):
    stage = Stage("build_corpus", "pages")
    time.sleep(0.05)
    assert stage.seconds >= 0.05
    stage.progress("read unit", 2, 5, 1_500, "pages")
    line = capsys.readouterr().out.strip()
    match = re.fullmatch(r"\[build_corpus\] pages: read unit 2/5 done: 1,500 pages \(([\d,]+\.\d) pages/s\)", line)
    assert match, line
    assert 0 < float(match.group(1).replace(",", "")) <= 1_500 / 0.05


def test_a_stage_without_a_folder_has_no_marker():
    with pytest.raises(ValueError, match="no folder"):
        Stage("job", "epoch 1").mark_done()


def test_the_marker_lives_on_object_storage_too(s3_bucket, capsys):
    folder = f"{s3_bucket}/runs/wcsbert/corpus"
    Stage("wcsbert", "corpus", folder, SETTINGS).mark_done({"pages": 106})
    assert storage.read_json(f"{folder}/{DONE_FILE}")["result"] == {"pages": 106}
    assert Stage("wcsbert", "corpus", folder, SETTINGS).finished()["result"] == {"pages": 106}
    assert Stage("wcsbert", "corpus", folder, {**SETTINGS, "seed": 1}).finished() is None
    assert "other settings (seed)" in capsys.readouterr().out


def _work(folder, *names: str) -> None:
    for name in names:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "checkpoint").write_text("step 3")


def test_begin_keeps_what_an_attempt_with_these_settings_left_and_deletes_the_rest(tmp_path):
    folder, elsewhere = tmp_path / "round_1", tmp_path / "train" / "epoch_001"
    _work(folder, "fit", "model")
    _work(elsewhere.parent, elsewhere.name)
    Stage("wcsbert", "round 1", str(folder), SETTINGS).begin("fit", "model", str(elsewhere))
    # no record says which settings made them: deleted, and this attempt recorded
    assert not (folder / "fit").exists() and not (folder / "model").exists() and not elsewhere.exists()
    assert json.loads((folder / "attempt.json").read_text())["settings"] == as_json(SETTINGS)

    _work(folder, "fit")  # the attempt is interrupted; run again with the same settings, its fit resumes
    Stage("wcsbert", "round 1", str(folder), SETTINGS).begin("fit")
    assert (folder / "fit" / "checkpoint").read_text() == "step 3"

    Stage("wcsbert", "round 1", str(folder), {**SETTINGS, "seed": 1}).begin("fit")  # other settings
    assert not (folder / "fit").exists()


def test_begin_after_a_stage_finished_with_other_settings_starts_over(tmp_path):
    folder = tmp_path / "pretrain"
    stage = Stage("wcsbert", "pretrain", str(folder), SETTINGS)
    stage.begin("fit")
    _work(folder, "fit")
    stage.mark_done({"steps": 3})
    (folder / "attempt.json").unlink()  # only the marker says which settings made the fit
    Stage("wcsbert", "pretrain", str(folder), SETTINGS).begin("fit")
    assert (folder / "fit").exists()
    changed = Stage("wcsbert", "pretrain", str(folder), {**SETTINGS, "seed": 1})
    assert changed.finished() is None
    changed.begin("fit")
    assert not (folder / "fit").exists()


def test_timings_add_up_each_part_and_the_total():
    from contrastext.stages import Timings

    timings = Timings()
    with timings.measure("encode"):
        time.sleep(0.02)
    with pytest.raises(RuntimeError):
        with timings.measure("train"):  # a part that fails is timed too
            raise RuntimeError("stopped")
    with timings.measure("encode"):
        time.sleep(0.02)
    assert list(timings) == ["encode", "train"] and timings["encode"] >= 0.04 and timings["train"] < 0.02
    assert timings.total() >= timings["encode"] and json.loads(json.dumps(timings))["total"] == timings["total"]
