"""The ``contrastext`` command and the ``jobs/`` entry point, run for real (no Ray: only --print-config)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from contrastext.cli import main
from contrastext.config import FitJobConfig, load_config

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: contrastext" in out
    for command in ("fit", "embed", "resolve"):
        assert command in out


def test_no_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_fit_print_config_applies_overrides(capsys):
    assert main(["fit", "--print-config", "--set", "train.batch_size=8", "--set", "output.name=cli"]) == 0
    out = capsys.readouterr().out
    assert "batch_size: 8" in out
    parsed = yaml.safe_load(out)
    assert parsed["train"]["batch_size"] == 8
    assert parsed["output"]["name"] == "cli"
    # what is printed is a complete config: it loads back to the same thing
    assert FitJobConfig.model_validate(parsed) == load_config(
        FitJobConfig, overrides=["train.batch_size=8", "output.name=cli"])


def test_fit_print_config_reads_a_config_file(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text("train:\n  epochs: 4\n  batch_size: 12\n", encoding="utf-8")
    assert main(["fit", "-c", str(path), "--print-config", "--set", "train.batch_size=6"]) == 0
    parsed = yaml.safe_load(capsys.readouterr().out)
    assert parsed["train"]["epochs"] == 4
    assert parsed["train"]["batch_size"] == 6


@pytest.mark.parametrize(("override", "named"), [
    ("train.batch_size=1", "batch_size"),
    ("train.batch_sise=8", "batch_sise"),
    ("train.batch_size", "key.path=value"),
])
def test_fit_invalid_override_returns_2_with_a_message(capsys, override, named):
    assert main(["fit", "--print-config", "--set", override]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "contrastext fit: invalid configuration" in captured.err
    assert named in captured.err


def test_fit_missing_config_file_returns_2(tmp_path, capsys):
    missing = tmp_path / "absent.yaml"
    assert main(["fit", "--print-config", "-c", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err


def test_resolve_bundled_model_prints_an_existing_folder(capsys):
    assert main(["resolve", "bundled:minilm"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.is_dir()
    assert (path / "modules.json").is_file()


def test_resolve_local_folder(tiny_encoder_dir, capsys):
    assert main(["resolve", str(tiny_encoder_dir)]) == 0
    assert Path(capsys.readouterr().out.strip()) == tiny_encoder_dir


def test_resolve_unknown_model_returns_1_with_a_message(capsys):
    assert main(["resolve", "no-such/model"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("contrastext resolve:")
    assert "no-such/model" in captured.err


def test_embed_writes_one_row_per_non_empty_line(tiny_encoder_dir, tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("a first sentence\n\nthe second one\nand a third\n", encoding="utf-8")
    target = tmp_path / "out.npy"
    assert main(["embed", str(source), str(target), "--model", str(tiny_encoder_dir), "--batch-size", "2"]) == 0
    embeddings = np.load(target)
    assert embeddings.shape == (3, 32)
    assert embeddings.dtype == np.float32
    assert np.isfinite(embeddings).all()
    assert "3 texts" in capsys.readouterr().out

    # the same texts encoded directly give the same vectors
    from contrastext.models import TextEncoder

    direct = TextEncoder.from_pretrained(str(tiny_encoder_dir)).encode(
        ["a first sentence", "the second one", "and a third"], batch_size=8)
    np.testing.assert_allclose(embeddings, direct, rtol=1e-4, atol=1e-5)


def test_jobs_entry_point_prints_the_config():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "jobs/contrastive_fit.py", "--print-config", "--set", "train.batch_size=8"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "batch_size: 8" in proc.stdout
    parsed = yaml.safe_load(proc.stdout)
    assert FitJobConfig.model_validate(parsed).train.batch_size == 8


def test_jobs_entry_point_rejects_a_bad_override():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "jobs/contrastive_fit.py", "--print-config", "--set", "train.epochs=0"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "invalid configuration" in proc.stderr and "epochs" in proc.stderr
