"""The job's ``encoder.max_length=auto``: settled from the first texts of its pool, as they are encoded."""

import pytest
from conftest import NEWS_DOCUMENTS

from contrastext.config import load_config
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.pool import first_texts, write_text_pool
from contrastext.methods.wcsbert.read_length import settle_read_length


def _config(*more: str) -> WCSBertConfig:
    return load_config(WCSBertConfig, overrides=["encoder.model=bundled:minilm", *more])


def test_the_job_reads_128_tokens_of_a_pool_of_short_texts_and_512_of_long_ones(tmp_path):
    short = write_text_pool(NEWS_DOCUMENTS, str(tmp_path / "short.parquet"))
    long = write_text_pool([" ".join([text] * 12) for text in NEWS_DOCUMENTS], str(tmp_path / "long.parquet"))
    config = _config()
    assert config.encoder.max_length == "auto"
    with pytest.raises(ValueError, match="settle it from the pool"):
        config.encoder.load()

    settled, read = settle_read_length(config, short)
    assert settled.encoder.max_length == read["tokens"] == 128 and read["median_tokens"] <= 128
    assert settled.encoder.load().max_length == 128 and config.encoder.max_length == "auto"
    settled, read = settle_read_length(config, long)
    assert settled.encoder.max_length == read["tokens"] == 512 and read["median_tokens"] > 128
    assert read["texts_measured"] == len(NEWS_DOCUMENTS)
    # the pool is measured as it is encoded: cut at pool.max_words, the long texts are short
    cut, read = settle_read_length(_config("pool.max_words=20"), long)
    assert cut.encoder.max_length == 128 and read["median_tokens"] <= 128
    assert all(len(text.split()) <= 20 for text in first_texts(long, 100, 20))


def test_a_length_given_is_kept_and_a_bad_one_refused(tmp_path):
    given = _config("encoder.max_length=256")
    settled, read = settle_read_length(given, str(tmp_path / "never-read.parquet"))  # nothing is read
    assert settled is given and read == {"asked": 256, "tokens": 256}
    for wrong in ("long", "0"):
        with pytest.raises(ValueError, match="max_length"):
            _config(f"encoder.max_length={wrong}")


def test_the_first_texts_are_a_bounded_sample_of_the_pool(tmp_path):
    pool = write_text_pool([f"text {i}" for i in range(50)] + [""] * 3, str(tmp_path / "pool.parquet"))
    assert first_texts(pool, 10, 200) == [f"text {i}" for i in range(10)]
    assert len(first_texts(pool, 1000, 200)) == 50  # empty texts are not measured
