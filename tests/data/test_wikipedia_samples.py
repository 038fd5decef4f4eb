"""Finding the real dump sample: the data folder, the cache, and a real fetch through pip into a tmp cache."""

import pytest

from contrastext.data.samples import (DEFAULT_SAMPLE, SampleNotFoundError, TABLE_SAMPLE, candidate_paths,
                                      find_dump_sample)
from contrastext.data.wikipedia import Page, iter_dump
from tests.conftest import DATA_DIR, wikipedia_sample


def test_found_through_contrastext_data(monkeypatch, tmp_path):
    real = wikipedia_sample(DEFAULT_SAMPLE)  # the data folder's copy, or one fetched into the cache
    monkeypatch.setenv("CONTRASTEXT_DATA", str(real.parent.parent))
    assert find_dump_sample(fetch=False, cache=tmp_path) == real
    assert candidate_paths(DEFAULT_SAMPLE, tmp_path)[-1] == tmp_path / "wikipedia" / DEFAULT_SAMPLE


def test_cache_is_used_and_absence_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTRASTEXT_DATA", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    name = "enwiki-not-a-sample.xml.bz2"
    with pytest.raises(SampleNotFoundError, match="looked at"):
        find_dump_sample(name, fetch=False, cache=tmp_path / "cache")
    cached = tmp_path / "cache" / "wikipedia" / name
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"")
    assert find_dump_sample(name, fetch=False, cache=tmp_path / "cache") == cached


@pytest.mark.integration
@pytest.mark.slow
def test_fetch_through_pip_gives_the_same_dump(monkeypatch, tmp_path):
    """What a fresh machine does: pip download of the gensim wheel, the dump extracted into the cache."""
    monkeypatch.setenv("CONTRASTEXT_DATA", str(tmp_path / "nowhere"))
    monkeypatch.chdir(tmp_path)
    from contrastext.data import paths

    monkeypatch.setattr(paths, "_REPO_ROOT", tmp_path / "repo")  # a clone with no ../shared beside it
    try:
        fetched = find_dump_sample(TABLE_SAMPLE, cache=tmp_path / "cache")
    except SampleNotFoundError as error:
        pytest.skip(f"PyPI not reachable: {error}")
    assert fetched == tmp_path / "cache" / "wikipedia" / TABLE_SAMPLE
    pages = [p for p in iter_dump(fetched) if isinstance(p, Page)]
    assert len(pages) == 5
    beside = DATA_DIR / "wikipedia" / TABLE_SAMPLE
    if beside.is_file():  # the same bytes as the data folder's copy, where this machine has one
        assert fetched.read_bytes() == beside.read_bytes()
