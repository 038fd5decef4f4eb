"""Shared fixtures: offline model hub, a tiny random encoder, one local Ray per session, the real data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Six short news documents, two each on football, interest rates and smartphones (topic mining tests)
NEWS_DOCUMENTS = [
    "The striker scored twice as Chelsea beat Arsenal in the Premier League on Saturday.",
    "Chelsea manager Jose Mourinho praised the striker after the Premier League win.",
    "The central bank raised interest rates as inflation climbed to a ten-year high.",
    "Higher interest rates from the central bank weighed on stock markets in London.",
    "The new smartphone has a faster processor and a brighter screen than last year's model.",
    "Reviewers said the smartphone screen and battery life beat rival devices.",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("CONTRASTEXT_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_data(relative: str) -> Path:
    """A file of the real evaluation data, or a skip saying where it was looked for."""
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"real data {relative} not found under {DATA_DIR} (set CONTRASTEXT_DATA)")
    return path


def tiny_bert_config():
    from transformers import BertConfig

    return BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128)


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory) -> Path:
    """A random-weight 2-layer BERT with MiniLM's tokenizer, saved in sentence-transformers format."""
    from contrastext.models import TextEncoder

    encoder = TextEncoder.from_config(tiny_bert_config(), pooling="mean", normalize=False, max_length=64)
    return encoder.save(tmp_path_factory.mktemp("tiny") / "encoder")


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session (starting Ray costs seconds)."""
    import ray

    from contrastext.config import RayConfig
    from contrastext.runtime import init_ray

    init_ray(RayConfig(num_cpus=4))
    yield ray
    ray.shutdown()
