"""The import structure of the package, read from the source (nothing is imported): layers and cycles."""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SRC = REPO_ROOT / "src"
METHOD_PACKAGES = ("contrastext.methods", "contrastext.serve", "contrastext.pipelines")
#: each method's home: its class (``model``), its config and its parts; its job is ``pipelines/<job>.py``
METHOD_HOMES = {"wcsbert": "wcsbert", "shuffle_divide": "shuffle_divide", "supcon": "supcon_classify",
                "uctopic": "uctopic"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=None)
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted((SRC / "contrastext").rglob("*.py"))}


def _imported(module: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in the file, at any depth (a function's imports count too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.append((node.lineno, base, [alias.name for alias in node.names]))
    return found


@lru_cache(maxsize=None)
def _graph() -> dict[str, frozenset[str]]:
    """Module → the contrastext modules it imports (``from package import submodule`` names the submodule)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        targets = set()
        for _, imported, names in _imported(module, path):
            if imported in modules:
                targets.add(imported)
            targets.update(f"{imported}.{name}" for name in names if f"{imported}.{name}" in modules)
        graph[module] = frozenset(targets - {module})
    return graph


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_graph_sees_the_package():
    graph = _graph()
    assert "contrastext.train.objectives" in graph and "contrastext.serve.app" in graph
    assert "contrastext.train.objectives" in graph["contrastext.train.fit"]


def _imports_between(lower: str, upper: str) -> list[str]:
    return sorted(f"{module} imports {target}" for module, targets in _graph().items()
                  if _inside(module, lower) for target in targets if _inside(target, upper))


@pytest.mark.parametrize("method", METHOD_PACKAGES)
def test_train_imports_no_method_package(method):
    assert not _imports_between("contrastext.train", method)


@pytest.mark.parametrize("lower", ["contrastext.data", "contrastext.models", "contrastext.losses",
                                   "contrastext.metrics", "contrastext.evaluators"])
def test_building_blocks_import_no_method_package_and_no_training(lower):
    for upper in (*METHOD_PACKAGES, "contrastext.train"):
        assert not _imports_between(lower, upper)


def test_methods_import_no_pipeline():
    """The jobs compose the methods, not the other way round (shared layouts live in contrastext.data)."""
    assert not _imports_between("contrastext.methods", "contrastext.pipelines")


@pytest.mark.parametrize("method", sorted(METHOD_HOMES))
def test_each_method_has_one_home_with_its_class_and_a_job(method):
    modules = _modules()
    assert f"contrastext.methods.{method}.model" in modules
    assert f"contrastext.pipelines.{METHOD_HOMES[method]}" in modules


def test_no_method_code_outside_its_home():
    """A module named after a method, or one of the old homes, exists only under methods/<name>/ and its job;
    losses keep one file each in contrastext.losses (a loss is a building block, as in sentence-transformers)."""
    names = {*METHOD_HOMES, "selftrain", "uctopic", "shuffle_divide_epochs", "classify_settings", "negatives"}
    jobs = {f"contrastext.pipelines.{job}" for job in METHOD_HOMES.values()}
    outside = [module for module in _modules() if module not in jobs and not _inside(module, "contrastext.losses")
               and not any(_inside(module, f"contrastext.methods.{method}") for method in METHOD_HOMES)
               and names & set(module.split(".")[1:])]
    assert outside == []


def test_a_moved_module_names_its_new_home():
    import importlib

    from contrastext.moved import MOVED, new_home

    for old, new in MOVED.items():
        assert new in _modules(), new
        with pytest.raises(ModuleNotFoundError) as failed:
            importlib.import_module(old + ".teachers" if old.endswith("selftrain") else old)
        missing = failed.value.name  # the old path, or the old package above it, which names its members' homes
        assert _inside(old, missing) and f"{missing} moved to {new_home(missing)}" in str(failed.value)
        assert new in str(failed.value)
    # the names of a module that became a package still import from it
    from contrastext.methods.shuffle_divide import ShuffleDivide, save_clusters
    from contrastext.methods.shuffle_divide.model import save_clusters as saved_at_home

    assert save_clusters is saved_at_home and ShuffleDivide.__module__ == "contrastext.methods.shuffle_divide.model"


def _cycles(graph: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}) \
        == [["a", "b", "c"]]


@pytest.mark.parametrize("pair", [("contrastext.train.objectives", "contrastext.methods.uctopic.objective"),
                                  ("contrastext.serve.app", "contrastext.serve.topics")])
def test_former_cycles_stay_broken(pair):
    first, second = pair
    graph = _graph()
    assert not (second in graph[first] and first in graph[second])


def test_no_import_cycles():
    """No module imports itself back through others, even through an import inside a function."""
    assert _cycles(_graph()) == []


def _code_files() -> list[Path]:
    """The package, the job scripts and the benchmarks: everything but the tests, which may reach inside."""
    return sorted([*(SRC / "contrastext").rglob("*.py"), *(REPO_ROOT / "jobs").rglob("*.py"),
                   *(REPO_ROOT / "benchmarks").rglob("*.py")])


def test_no_module_imports_another_modules_private_name():
    offending = []
    for path in _code_files():
        module = _module_name(path) if path.is_relative_to(SRC) else path.stem
        for line, imported, names in _imported(module, path):
            if imported.split(".")[0] != "contrastext":
                continue
            private = [name for name in names if name.startswith("_") and not name.startswith("__")]
            if private:
                offending.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {', '.join(private)} from {imported}")
    assert not offending, "\n".join(offending)
