"""The documentation: README.md and the site under docs/ (mkdocs.yml).

* every relative link of README.md and docs/ points to a file that exists, and every ``#anchor`` to a heading
  of it whose slug is the same on GitHub and on the site;
* every ``python`` block of the docs pages compiles, and runs (page by page, block after block, in a fresh
  folder, the tiny random encoder in place of ``bundled:minilm``) unless it starts with a ``# not run: <reason>``
  line or repeats one of the README's "Library use" blocks (``tests/test_readme_examples.py`` runs those);
* ``mkdocs build --strict`` passes (skipped where mkdocs-material and mkdocstrings are not installed:
  ``scripts/setup.sh`` installs them with the ``docs`` extra).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from test_readme_examples import library_use_blocks

DOCS = REPO_ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
DOCUMENTS = [REPO_ROOT / "README.md", *PAGES]
NOT_RUN = "# not run:"

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", flags=re.M | re.S)
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)")
_PYTHON = re.compile(r"^```python[^\n]*\n(.*?)^```", flags=re.M | re.S)


def _prose(text: str) -> str:
    """The Markdown outside fenced blocks and inline code spans."""
    text = _FENCE.sub("", text)
    return re.sub(r"(`+).+?\1", "", text, flags=re.S)


def _headings(path: Path) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", _FENCE.sub("", path.read_text(
        encoding="utf-8")), flags=re.M)]


def mkdocs_slug(heading: str) -> str:
    """Python-Markdown's toc slug (mkdocs)."""
    text = re.sub(r"<[^>]+>", "", heading).replace("`", "")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def github_slug(heading: str) -> str:
    """GitHub's heading anchor."""
    text = re.sub(r"<[^>]+>", "", heading).replace("`", "").strip().lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))


def relative_links(document: Path) -> list[str]:
    text = _prose(document.read_text(encoding="utf-8"))
    targets = _LINK.findall(text) + _IMAGE.findall(text)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, flags=re.I)]  # http:, mailto:, ...


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_points_to_a_file_and_heading_that_exist(document):
    broken = []
    for target in relative_links(document):
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(f"{target}: no such file")
            continue
        if anchor:
            if file.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
                continue
            headings = _headings(file)
            if anchor not in {mkdocs_slug(h) for h in headings} or anchor not in {github_slug(h) for h in headings}:
                broken.append(f"{target}: no heading with that anchor on both GitHub and the site")
    assert not broken, broken


def test_the_readme_stays_an_overview():
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)


def test_the_docs_have_the_pages_the_readme_links_to():
    linked = {(REPO_ROOT / t.partition("#")[0]).resolve() for t in relative_links(REPO_ROOT / "README.md")}
    for name in ("methods/wcsbert.md", "methods/shuffle-divide.md", "methods/uctopic.md", "methods/supcon.md",
                 "serve.md", "ray.md", "backend.md", "benchmarks.md", "tests.md", "reference/index.md"):
        assert (DOCS / name).resolve() in linked, name


def python_blocks(page: Path) -> list[str]:
    return _PYTHON.findall(page.read_text(encoding="utf-8"))


def test_the_readme_examples_are_on_the_method_pages():
    """A block that repeats a README example is left to tests/test_readme_examples.py: it must be a copy."""
    on_pages = {block for page in (DOCS / "methods").glob("*.md") for block in python_blocks(page)}
    for block in library_use_blocks():
        assert block in on_pages, block


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_every_python_block_compiles(page):
    for block in python_blocks(page):
        compile(block, str(page), "exec")


def runnable_blocks(page: Path) -> list[str]:
    readme = set(library_use_blocks())
    return [b for b in python_blocks(page) if b not in readme and not b.lstrip().startswith(NOT_RUN)]


def test_the_method_pages_have_examples_that_run():
    for page in sorted((DOCS / "methods").glob("*.md")):
        assert runnable_blocks(page), f"{page.name}: no example that runs without training"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if runnable_blocks(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_the_runnable_blocks_run(page, tiny_encoder_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []
    namespace: dict = {"print": lambda *values: printed.append(" ".join(str(v) for v in values))}
    for block in runnable_blocks(page):
        exec(compile(block.replace('"bundled:minilm"', repr(str(tiny_encoder_dir))), str(page), "exec"), namespace)
    assert printed, f"{page.name}: its examples print nothing to check"


def _have_site_tools() -> bool:
    return all(importlib.util.find_spec(name) for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers"))


@pytest.mark.slow
@pytest.mark.skipif(not _have_site_tools(), reason="mkdocs-material / mkdocstrings not installed "
                                                   "(pip install -e '.[docs]'; scripts/setup.sh installs them)")
def test_the_site_builds_without_a_warning(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "methods" / "index.html").is_file()
