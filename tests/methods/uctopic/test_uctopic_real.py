"""UCTopic on the real data: CoNLL-2003 entities, Wikipedia dump links, BBCSport topic mining (MiniLM)."""

import json
from collections import Counter

import pytest
from conftest import shared_data, wikipedia_sample

from contrastext.data.samples import DEFAULT_SAMPLE
from contrastext.methods.uctopic.phrases import ConllStats, positive_pairs, read_conll_entities, wiki_link_instances

pytestmark = pytest.mark.integration



def test_conll_testb_entities_match_the_published_counts():
    stats = ConllStats()
    found = read_conll_entities(shared_data("ner/conll2003/eng.testb"), ["PER", "LOC", "ORG"], stats)
    assert sum(stats.entities.values()) == 5648 and not stats.skipped
    assert len(found) == stats.entities["PER"] + stats.entities["LOC"] + stats.entities["ORG"]
    assert all(inst.phrase and inst.phrase == inst.phrase.strip() for inst in found)


def test_wikipedia_links_give_masked_positive_pairs():
    from itertools import islice

    from contrastext.data.wikipedia import Page, iter_dump

    pages = islice((p for p in iter_dump(wikipedia_sample(DEFAULT_SAMPLE), links=True) if isinstance(p, Page)), 8)
    instances = list(wiki_link_instances(pages))
    assert len(instances) > 200
    assert all(inst.sentence[inst.start:inst.end].strip() == inst.phrase for inst in instances)
    rows = positive_pairs(instances, seed=0)
    assert len(rows) > 50
    assert all(r["anchor"] != r["positive"] for r in rows)
    kept_visible = sum(not (r["anchor_mask"] and r["positive_mask"]) for r in rows) / len(rows)
    assert 0.35 < kept_visible < 0.65


@pytest.fixture(scope="module")
def minilm():
    from contrastext.methods.uctopic.model import PhraseTopicModel

    return PhraseTopicModel.load("bundled:minilm", max_length=64)


def test_minilm_span_vectors_cluster_conll_entities_by_type(minilm):
    import random

    from contrastext.clustering import spherical_kmeans
    from contrastext.metrics.clustering import nmi

    found = read_conll_entities(shared_data("ner/conll2003/eng.testb"), ["PER", "LOC", "ORG"])
    sample = random.Random(0).sample(found, 600)
    vectors = minilm.encoder.encode(sample)
    clusters = spherical_kmeans(vectors, 3, seed=0, nredo=3).assignments
    assert nmi([i.label for i in sample], clusters) > 0.15  # far above chance (≈ 0) for an untrained model


def test_bbcsport_topics_from_a_few_articles(minilm):
    with open(shared_data("bbcsport/bbcsport.jsonl"), encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    by_label = {}
    for record in records:
        by_label.setdefault(record["label"], []).append(record["text"])
    docs = [text for texts in by_label.values() for text in texts[:4]]  # 4 articles of each of the 5 sports
    result = minilm.mine(docs, k_min=2, k_max=6, max_phrases=1500, seed=0)
    assert 2 <= result.n_topics <= 6 and result.extractor == "ngram"
    assert all(len(t.phrases) == 10 for t in result.topics)
    assert all(docs[o.document][o.start:o.end] == o.phrase for o in result.occurrences)
    # phrases found in many articles are mostly real words and names, not stop-word fragments
    common = Counter(o.phrase.lower() for o in result.occurrences)
    assert not {"the", "of", "and", "in"} & set(common)
