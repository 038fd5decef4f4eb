"""The job's ``encoder.max_length=auto``: settled from the first texts of its pool, as they are encoded."""

import pytest
from conftest import NEWS_DOCUMENTS

from contrastext.config import load_config
from contrastext.methods.wcsbert.config import WCSBertConfig
from contrastext.methods.wcsbert.pool import sample_texts, write_text_pool
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
    assert read["texts_measured"] == len(NEWS_DOCUMENTS) and read["asked"] == "auto"
    # the pool is measured as it is encoded: cut at pool.max_words, the long texts are short
    cut, read = settle_read_length(_config("pool.max_words=20"), long)
    assert cut.encoder.max_length == 128 and read["median_tokens"] <= 128
    assert all(len(text.split()) <= 20 for text in sample_texts(long, 100, 20))


def test_a_length_given_is_kept_where_the_model_can_read_it_and_a_bad_one_refused(tmp_path, tiny_encoder_dir):
    given = _config("encoder.max_length=256")
    settled, read = settle_read_length(given, str(tmp_path / "never-read.parquet"))  # no text is read
    assert settled.encoder.max_length == 256 and read == {"asked": 256, "tokens": 256}
    # the tests' small model has 128 positions: what it reads is recorded, and what auto would ask of long texts
    small = load_config(WCSBertConfig, overrides=[f"encoder.model={tiny_encoder_dir}", "encoder.max_length=512"])
    assert settle_read_length(small, str(tmp_path / "never-read.parquet"))[1] == {"asked": 512, "tokens": 128}
    for wrong in ("long", "0"):
        with pytest.raises(ValueError, match="max_length"):
            _config(f"encoder.max_length={wrong}")


def test_the_sample_is_seeded_spread_over_the_pool_and_bounded(tmp_path):
    import pyarrow.parquet as pq

    from contrastext.methods.wcsbert import pool as pool_module

    texts = [f"text {i}" for i in range(400)] + [""] * 3
    one_group = write_text_pool(texts, str(tmp_path / "pool.parquet"))
    sample = sample_texts(one_group, 50, 200, seed=1)
    assert len(sample) == 50 and sample == sample_texts(one_group, 50, 200, seed=1)
    assert sample != texts[:50] and max(int(t.split()[1]) for t in sample) > 200  # not the first rows only
    assert len(sample_texts(one_group, 1000, 200)) == 400  # empty texts are not measured
    # a pool in many row groups (as the corpus writes its pages): a share from each of at most SAMPLE_ROW_GROUPS
    folder = tmp_path / "pages"
    folder.mkdir()
    table = pq.read_table(one_group)
    pq.write_table(table.slice(0, 200), folder / "a.parquet", row_group_size=4)
    pq.write_table(table.slice(200, 200), folder / "b.parquet", row_group_size=4)  # 100 groups of 4 texts
    spread = sample_texts(str(folder), 100, 200, seed=0)
    groups = {int(t.split()[1]) // 4 for t in spread}
    assert len(spread) == 100 and len(groups) == pool_module.SAMPLE_ROW_GROUPS == 50
    assert min(groups) < 50 <= max(groups)  # from both files


def test_a_run_made_at_an_explicit_128_resumes_under_auto_settled_at_128(tmp_path):
    """The stage settings that decide what runs again are the same, so no finished stage is redone."""
    from contrastext.config import EncoderConfig
    from contrastext.methods.wcsbert.category_pretraining import pretrain_settings
    from contrastext.methods.wcsbert.stored_rounds import round_settings

    short = write_text_pool(NEWS_DOCUMENTS, str(tmp_path / "short.parquet"))
    auto, _ = settle_read_length(_config(), short)
    explicit = _config("encoder.max_length=128")
    assert round_settings(auto, "m0") == round_settings(explicit, "m0")
    assert pretrain_settings(auto) == pretrain_settings(explicit)
    # what pretraining reads does not follow the tokens read to classify
    longer = _config("encoder.max_length=512")
    assert pretrain_settings(longer) == pretrain_settings(explicit) and round_settings(longer, "m0") != \
        round_settings(explicit, "m0")
    # plain encoder settings given in code become the job's
    given = WCSBertConfig(encoder=EncoderConfig(model="bundled:minilm", max_length=64))
    assert type(given.encoder).__name__ == "ReadEncoderConfig" and given.encoder.max_length == 64
