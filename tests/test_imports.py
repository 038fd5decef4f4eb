"""Import weight: the command's help and the typed configs load no torch (checked in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from contrastext.cli import JOBS

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules_after(code: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    script = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_help_imports_no_torch():
    code = ("import contextlib, io\nfrom contrastext.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(['--help'])\n    except SystemExit as done:\n        assert done.code == 0\n")
    loaded = _modules_after(code)
    assert "torch" not in loaded and "ray" not in loaded


def test_python_dash_m_contrastext_prints_the_help():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "contrastext", "--help"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and "usage: contrastext" in done.stdout


@pytest.mark.parametrize("module", ["contrastext.cli", "contrastext.config", "contrastext.models.resolve",
                                    *sorted({job.config.split(":")[0] for job in JOBS.values()})])
def test_config_modules_import_no_torch(module):
    assert "torch" not in _modules_after(f"import {module}")
