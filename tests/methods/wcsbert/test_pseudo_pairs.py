from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels
from contrastext.methods.wcsbert.pseudo_pairs import category_pairs, text_pairs
from contrastext.zeroshot import LabelSet

LABELS = LabelSet(("Sports", "Sci/Tech"), (("Sports",), ("Science", "Technology")))
T = "About {label}"


def _pseudo(labels, confidence, alias, kept):
    labels = np.asarray(labels)
    alias_matrix = np.zeros((len(labels), 2), dtype=np.int64)
    alias_matrix[np.arange(len(labels)), labels] = alias
    return PseudoLabels(label=labels, score=np.asarray(confidence), confidence=np.asarray(confidence),
                        alias=alias_matrix, kept=np.asarray(kept))


def test_text_pairs_use_the_best_alias_and_cap_per_label():
    pseudo = _pseudo([0, 1, 1, 0], [0.9, 0.8, 0.7, 0.1], [0, 1, 0, 0], kept=[0, 1, 2])
    pairs = text_pairs(["t0", "t1", "t2", "t3"], pseudo, LABELS, T)
    assert pairs.anchors == ["t0", "t1", "t2"]
    assert pairs.positives == ["About Sports", "About Technology", "About Science"]
    assert pairs.per_label(2).tolist() == [1, 2]
    capped = text_pairs(["t0", "t1", "t2", "t3"], pseudo, LABELS, T, max_pairs_per_label=1)
    assert capped.anchors == ["t0", "t1"]  # the most confident of each label


def test_category_pairs_vote_and_deduplicate():
    categories = [["Football", "Cities"], ["Physics", "Cities"], ["Physics"], ["Cities"]]
    pseudo = _pseudo([0, 1, 1, 1], [0.9, 0.8, 0.7, 0.6], [0, 0, 0, 0], kept=[0, 1, 2, 3])
    pairs = category_pairs(categories, pseudo, LABELS, T)
    rows = dict(zip(pairs.anchors, pairs.positives))
    assert rows == {"Football": "About Sports", "Cities": "About Science", "Physics": "About Science"}
    assert pairs.conflicts == 1  # "Cities" was on pages of both labels; 2 of its 3 pages say Sci/Tech
    assert len(pairs.rows()) == 3 and set(pairs.rows()[0]) == {"anchor", "positive"}


def _category_pairs_by_counters(categories, pseudo, label_set, template, max_pairs_per_label=None):
    """The per-category counter formulation, pages read in order of confidence (the reference)."""
    from collections import Counter, defaultdict

    from contrastext.methods.wcsbert.pseudo_pairs import PseudoPairs, prompt_for

    votes, aliases, first_seen = defaultdict(Counter), defaultdict(Counter), {}
    kept = pseudo.kept[np.argsort(-pseudo.confidence[pseudo.kept], kind="stable")]
    for order, i in enumerate(kept):
        label = int(pseudo.label[i])
        for category in dict.fromkeys(categories[i]):
            votes[category][label] += 1
            aliases[(category, label)][int(pseudo.alias[i, label])] += 1
            first_seen.setdefault(category, order)
    anchors, positives, labels, per_label = [], [], [], Counter()
    for category in sorted(votes, key=first_seen.__getitem__):
        label = votes[category].most_common(1)[0][0]
        if max_pairs_per_label is not None and per_label[label] >= max_pairs_per_label:
            continue
        per_label[label] += 1
        anchors.append(category)
        positives.append(prompt_for(label_set, template, label, aliases[(category, label)].most_common(1)[0][0]))
        labels.append(label)
    return PseudoPairs(anchors, positives, labels, conflicts=sum(len(c) > 1 for c in votes.values()))


def _random_pool(seed: int = 3, n: int = 400):
    rng = np.random.default_rng(seed)
    names = [f"C{i}" for i in range(60)]
    categories = [[names[j] for j in rng.zipf(1.3, size=rng.integers(0, 7)) % 60] for _ in range(n)]
    labels = rng.integers(0, 2, n)
    alias = np.zeros((n, 2), dtype=np.int64)
    alias[:, 1] = rng.integers(0, 2, n)
    confidence = np.round(rng.random(n), 1)  # ties in confidence, as margins have
    pseudo = PseudoLabels(label=labels, score=confidence, confidence=confidence, alias=alias,
                          kept=np.sort(rng.choice(n, 250, replace=False)))
    return categories, pseudo


@pytest.mark.parametrize("cap", [None, 5])
def test_category_pairs_match_the_counter_formulation(cap):
    categories, pseudo = _random_pool()
    expected = _category_pairs_by_counters(categories, pseudo, LABELS, T, cap)
    got = category_pairs(categories, pseudo, LABELS, T, cap)
    assert (got.anchors, got.positives, got.labels, got.conflicts) == \
           (expected.anchors, expected.positives, expected.labels, expected.conflicts)


def _pages_folder(folder, categories, files: int, id_offset: int = 1000):
    """The pool's pages in ``files`` parquet files, in shuffled order; page id = pool index + offset."""
    folder.mkdir()
    order = np.random.default_rng(0).permutation(len(categories))
    for part in np.array_split(order, files):
        pq.write_table(pa.table({"page_id": pa.array(part + id_offset, pa.int64()),
                                 "categories": pa.array([categories[i] for i in part], pa.list_(pa.string()))}),
                       folder / f"part-{int(part[0]):05d}.parquet")
    return str(folder)


def test_ray_data_pairs_equal_the_one_process_pairs(ray_session, tmp_path, monkeypatch):
    """Pages in three files met in any order, votes reduced in four buckets of categories by Ray's workers
    (never by this process: the tally grows with the pool): the same pairs, per-label counts and conflicts as
    ``category_pairs``, labels mixed through the file."""
    from contrastext.methods.wcsbert import category_votes
    from contrastext.methods.wcsbert.category_votes import write_category_pairs
    from contrastext.methods.wcsbert.pseudo_pairs import label_prompts

    categories, pseudo = _random_pool()
    expected_pairs = {cap: category_pairs(categories, pseudo, LABELS, T, cap) for cap in (None, 5)}

    def refuse(*args, **kwargs):
        raise AssertionError("the driver tallied category votes")

    monkeypatch.setattr(category_votes, "page_votes", refuse)
    monkeypatch.setattr(category_votes, "reduce_votes", refuse)
    pages = _pages_folder(tmp_path / "pages", categories, files=3)
    page_ids = np.arange(len(categories)) + 1000
    for cap in (None, 5):
        expected = expected_pairs[cap]
        written = write_category_pairs(pages, page_ids, pseudo, label_prompts(LABELS, T), cap,
                                       str(tmp_path / f"cap{cap}"), seed=7, buckets=4)
        rows = pq.read_table(tmp_path / f"cap{cap}").to_pylist()
        assert sorted((r["anchor"], r["positive"], r["label"]) for r in rows) == \
               sorted(zip(expected.anchors, expected.positives, expected.labels))
        assert written.per_label.tolist() == expected.per_label(2).tolist() and len(written) == len(rows)
        assert written.conflicts == expected.conflicts > 0
        labels_in_order = [r["label"] for r in rows]
        assert labels_in_order != sorted(labels_in_order)  # mixed, not grouped by label


def test_categories_are_counted_per_page_once_at_their_first_place():
    from contrastext.methods.wcsbert.category_votes import KeptPages, page_votes

    pseudo = _pseudo([1, 0], [0.5, 0.9], [1, 0], kept=[0, 1])
    kept = KeptPages.of(np.asarray([10, 20]), pseudo, n_labels=2, n_aliases=2)
    votes = page_votes(np.asarray([20, 10, 30]), pa.array([["A"], ["B", "A", "B"], ["A"]]), kept)
    got = sorted(zip(*(votes.column(c).to_pylist() for c in ("category", "key", "votes", "first"))))
    # page 10 (label 1, alias 1: key 3) is the second most confident: rank 1; page 30 is not kept
    assert got == [("A", 0, 1, 0), ("A", 3, 1, 1 * 65536 + 1), ("B", 3, 1, 1 * 65536)]
