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


def test_import_contrastext_imports_no_torch():
    loaded = _modules_after("import contrastext")
    assert "torch" not in loaded and "contrastext.methods" not in loaded  # the façades load on first use


@pytest.mark.parametrize("name", ["WCSBert", "ShuffleDivide", "SupConClassifier", "PhraseTopicModel",
                                  "PromptTeacher", "PrototypeTeacher", "SphericalKMeans"])
def test_each_facade_imports_without_torch(name):
    """A façade class loads torch when it first builds a model, not when it is imported."""
    loaded = _modules_after(f"from contrastext import {name}")
    assert "torch" not in loaded and "ray" not in loaded


def test_the_package_names_are_the_classes_of_their_homes():
    import contrastext
    from contrastext.clustering import SphericalKMeans
    from contrastext.data.pair_builders import ShuffleDividePairs, TfidfNeighbourPairs
    from contrastext.methods.shuffle_divide.model import ShuffleDivide
    from contrastext.methods.shuffle_divide.negatives import BatchNegatives, OtherClusterNegatives
    from contrastext.methods.supcon.model import SupConClassifier
    from contrastext.methods.uctopic.model import PhraseTopicModel
    from contrastext.methods.wcsbert.model import WCSBert
    from contrastext.methods.wcsbert.teachers import PromptTeacher, PrototypeTeacher

    homes = {"WCSBert": WCSBert, "ShuffleDivide": ShuffleDivide, "SupConClassifier": SupConClassifier,
             "PhraseTopicModel": PhraseTopicModel, "PromptTeacher": PromptTeacher,
             "PrototypeTeacher": PrototypeTeacher, "SphericalKMeans": SphericalKMeans,
             "ShuffleDividePairs": ShuffleDividePairs, "TfidfNeighbourPairs": TfidfNeighbourPairs,
             "BatchNegatives": BatchNegatives, "OtherClusterNegatives": OtherClusterNegatives}
    assert sorted(contrastext.__all__) == sorted(homes)
    assert all(getattr(contrastext, name) is cls for name, cls in homes.items())
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        contrastext.Nothing
