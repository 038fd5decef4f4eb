"""``max_length="auto"``: how many tokens of each text to read, from the texts themselves (no label read).

Two lengths were measured. Short texts (the Vital leads, median 104 tokens; AG News, 52) are read best at 128:
the quick start's Vital leads delivered 1.7 and 2.0 points less at 512 (two seeds). Long ones (20 Newsgroups
posts, median about 300; BBCSport articles, 383) gain from 512, since at 128 a text is its first paragraph
(docs/methods/wcsbert.md, "How many tokens to read"). So ``auto`` reads 128 where the median text of a seeded
sample fits in 128 tokens, else 512, or what the model can where that is fewer. The job settles it from a seeded
sample of its pool's texts as they are encoded (cut at ``pool.max_words``), before anything is encoded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from contrastext.methods.wcsbert.config import READ_MAX_LENGTH

if TYPE_CHECKING:
    from contrastext.methods.wcsbert.config import WCSBertConfig

#: what ``auto`` reads of texts whose median is longer than READ_MAX_LENGTH tokens
LONG_READ_MAX_LENGTH = 512
#: texts whose tokens are counted
SAMPLE = 1000


def median_tokens(texts: Sequence[str], tokenizer, sample: int = SAMPLE, seed: int = 0) -> float:
    """The median token count (special tokens included, nothing truncated) of a seeded sample of ``texts``."""
    if not len(texts):
        raise ValueError("no text to measure")
    rows = np.random.default_rng(seed).choice(len(texts), min(sample, len(texts)), replace=False)
    counts = [len(ids) for ids in tokenizer([texts[i] for i in rows], add_special_tokens=True,
                                            truncation=False, verbose=False)["input_ids"]]
    return float(np.median(counts))


def auto_read_length(texts: Sequence[str], encoder, seed: int = 0) -> int:
    """READ_MAX_LENGTH where the median text fits in it, else LONG_READ_MAX_LENGTH (the encoder then reads at
    most what its model can: ``TextEncoder.with_max_length``)."""
    return length_for(median_tokens(texts, encoder.tokenizer, seed=seed))


def length_for(median: float) -> int:
    """The tokens ``auto`` reads of texts whose median is ``median`` tokens long."""
    return READ_MAX_LENGTH if median <= READ_MAX_LENGTH else LONG_READ_MAX_LENGTH


def settle_read_length(config: "WCSBertConfig", pages: str) -> tuple["WCSBertConfig", dict[str, Any]]:
    """The job's config with ``encoder.max_length`` the tokens its model will read of each text: the number given,
    or, for ``auto``, ``length_for`` the median of a seeded sample of SAMPLE pool texts as they are encoded (no
    label read), either lowered to what the model has positions for; and what was settled, from what."""
    from contrastext.methods.wcsbert.pool import sample_texts

    asked = config.encoder.max_length
    encoder = config.encoder.load(max_length=READ_MAX_LENGTH, device="cpu", backend="torch")
    read: dict[str, Any] = {"asked": asked}
    if asked == "auto":
        texts = sample_texts(pages, SAMPLE, config.pool.max_words, seed=config.rounds.train.seed)
        if not texts:
            raise ValueError(f"encoder.max_length=auto: the pool at {pages} has no text to measure")
        read["median_tokens"] = median_tokens(texts, encoder.tokenizer)
        read["texts_measured"] = len(texts)
        asked = length_for(read["median_tokens"])
    read["tokens"] = int(encoder.with_max_length(asked).max_length)
    settled = config.model_copy(update={"encoder": config.encoder.model_copy(update={"max_length": read["tokens"]})})
    return settled, read
