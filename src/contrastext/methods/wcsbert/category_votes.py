"""Category votes of kept pages, counted a page batch at a time and reduced a bucket of categories at a time.

Each kept page votes, on each of its distinct categories, for its pseudo-label and that label's best alias.
A category goes to the label most of its pages carry, a tie to the label of the most confident page; its
alias likewise. The same two steps serve one process (``category_pairs``) and Ray Data's workers
(``write_category_pairs``): votes are pre-counted per batch of pages, then reduced per bucket of categories
(categories hashed into buckets), so no process ever holds every category of a large pool.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from contrastext.methods.wcsbert.pseudo_labels import PseudoLabels

MAX_PLACES = 1 << 16  # a category's place on its page, packed below the page's confidence rank

VOTE_SCHEMA = pa.schema([("category", pa.string()), ("key", pa.int32()), ("votes", pa.int64()),
                         ("first", pa.int64()), ("bucket", pa.int32())])
WINNER_SCHEMA = pa.schema([("category", pa.string()), ("label", pa.int32()), ("alias", pa.int32()),
                           ("first_seen", pa.int64()), ("conflict", pa.bool_())])


@dataclass(frozen=True)
class KeptPages:
    """What a vote needs of each kept page, sorted by page id (a few bytes a kept page, shipped to workers)."""

    ids: np.ndarray  # int64, sorted
    key: np.ndarray  # int32: label * n_aliases + alias
    first: np.ndarray  # int64: the page's rank in order of confidence, times MAX_PLACES
    n_labels: int
    n_aliases: int

    @classmethod
    def of(cls, page_ids: np.ndarray, pseudo: PseudoLabels, n_labels: int, n_aliases: int) -> "KeptPages":
        """``page_ids[i]`` is pool item ``i``'s page id; the kept items are ``pseudo.kept``."""
        if pseudo.alias.size and int(pseudo.alias.max()) >= n_aliases:  # it would count towards the next label
            raise ValueError(f"alias index {int(pseudo.alias.max())} outside the label set's {n_aliases} aliases")
        kept = pseudo.kept
        order = kept[np.argsort(-pseudo.confidence[kept], kind="stable")]
        rank = np.empty(len(pseudo.label), np.int64)
        rank[order] = np.arange(len(order))
        label = pseudo.label[kept].astype(np.int64)
        alias = pseudo.alias[kept, label] if pseudo.alias.ndim == 2 else pseudo.alias[kept]
        ids = np.asarray(page_ids, np.int64)[kept]
        by_id = np.argsort(ids, kind="stable")
        return cls(ids=ids[by_id], key=(label * n_aliases + alias).astype(np.int32)[by_id],
                   first=(rank[kept] * MAX_PLACES)[by_id], n_labels=n_labels, n_aliases=n_aliases)


def bucket_of(categories: pa.Array, buckets: int) -> np.ndarray:
    """A stable bucket per category name (the same in every process and run)."""
    return (_name_hashes(categories) % np.uint64(buckets)).astype(np.int32)


def _name_hashes(names: pa.Array, key: str | None = None) -> np.ndarray:
    """A stable 64-bit hash per string (pandas' SipHash; ``key``: 16 characters, None for pandas' own)."""
    import pandas as pd

    strings = np.asarray(names.to_numpy(zero_copy_only=False), dtype=object)
    return pd.util.hash_array(strings) if key is None else pd.util.hash_array(strings, hash_key=key)


def page_votes(page_ids: np.ndarray, categories: pa.ListArray, kept: KeptPages, buckets: int = 1) -> pa.Table:
    """Votes of the kept pages among ``page_ids`` (their ``categories`` beside them), counted per
    (category, key): rows of ``VOTE_SCHEMA``. A category repeated on a page votes once, at its first place."""
    page_ids = np.asarray(page_ids, np.int64)
    at = np.searchsorted(kept.ids, page_ids).clip(max=max(len(kept.ids) - 1, 0))
    hit = np.flatnonzero(kept.ids[at] == page_ids) if len(kept.ids) else np.zeros(0, np.int64)
    categories = categories.take(pa.array(hit))
    lengths = pc.fill_null(pc.list_value_length(categories), 0).to_numpy()
    if not lengths.sum():
        return VOTE_SCHEMA.empty_table()
    page = np.repeat(np.arange(len(hit)), lengths)
    place = np.arange(len(page)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    occurrences = pa.table({"page": page, "category": pc.list_flatten(categories),
                            "place": np.minimum(place, MAX_PLACES - 1)})
    once = occurrences.group_by(["page", "category"], use_threads=False).aggregate([("place", "min")])
    of_page = at[hit][once.column("page").to_numpy()]
    votes = pa.table({"category": once.column("category"), "key": kept.key[of_page],
                      "first": kept.first[of_page] + once.column("place_min").to_numpy()})
    counted = votes.group_by(["category", "key"], use_threads=False).aggregate([("key", "count"), ("first", "min")])
    return pa.table({"category": counted.column("category"), "key": counted.column("key"),
                     "votes": counted.column("key_count"), "first": counted.column("first_min"),
                     "bucket": bucket_of(counted.column("category"), buckets)}, schema=VOTE_SCHEMA)


def reduce_votes(votes: pa.Table, n_labels: int, n_aliases: int) -> pa.Table:
    """Per category of ``votes`` (every vote of those categories): its label, alias, first place seen, and
    whether pages of other labels voted for it too; rows of ``WINNER_SCHEMA``."""
    if not votes.num_rows:
        return WINNER_SCHEMA.empty_table()
    encoded = pc.dictionary_encode(votes.column("category")).combine_chunks()
    names, code = encoded.dictionary, encoded.indices.to_numpy().astype(np.int64)
    keys, counts, earliest = _reduce(code * (n_labels * n_aliases) + votes.column("key").to_numpy(),
                                     votes.column("votes").to_numpy(), votes.column("first").to_numpy())
    category_label = keys // n_aliases  # sorted, as keys are
    alias = keys % n_aliases
    pair_keys, pair_counts, pair_earliest = _reduce(category_label, counts, earliest, presorted=True)
    categories, winners = _best_per_group(pair_keys // n_labels, pair_keys % n_labels, pair_counts, pair_earliest)
    winner = np.empty(len(names), np.int64)
    winner[categories] = winners
    won = category_label % n_labels == winner[category_label // n_labels]
    alias_categories, best = _best_per_group(category_label[won] // n_labels, alias[won], counts[won], earliest[won])
    best_alias = np.empty(len(names), np.int64)
    best_alias[alias_categories] = best
    first_seen = np.full(len(names), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first_seen, pair_keys // n_labels, pair_earliest)
    conflict = np.bincount(pair_keys // n_labels, minlength=len(names)) > 1
    return pa.table({"category": names, "label": winner.astype(np.int32), "alias": best_alias.astype(np.int32),
                     "first_seen": first_seen, "conflict": conflict}, schema=WINNER_SCHEMA)


def first_per_label(winners: pa.Table, cap: int | None) -> pa.Table:
    """The categories in order of first sight (the most confident pages' first), at most ``cap`` per label."""
    ordered = winners.take(pa.array(np.argsort(winners.column("first_seen").to_numpy(), kind="stable")))
    if cap is None:
        return ordered
    label = ordered.column("label").to_numpy()
    rank_in_label = np.empty(len(label), np.int64)
    for value in np.unique(label):
        at = np.flatnonzero(label == value)
        rank_in_label[at] = np.arange(len(at))
    return ordered.filter(pa.array(rank_in_label < cap))


def _reduce(keys: np.ndarray, counts: np.ndarray, first: np.ndarray,
            presorted: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct key (sorted): summed counts and the minimum ``first``."""
    if not presorted:
        order = np.argsort(keys, kind="stable")
        keys, counts, first = keys[order], counts[order], first[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
    return keys[starts], np.add.reduceat(counts, starts), np.minimum.reduceat(first, starts)


def _best_per_group(group: np.ndarray, member: np.ndarray, counts: np.ndarray,
                    earliest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the member with most votes, a tie to the one met first; and the group (both sorted by group)."""
    order = np.lexsort((earliest, -counts, group))
    group = group[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return group[starts], member[order[starts]]


@dataclass(frozen=True)
class PairsWritten:
    """A pairs file (or folder) and what the driver needs to report on it."""

    location: str
    per_label: np.ndarray  # pairs per label
    conflicts: int = 0  # categories met on kept pages of more than one label
    text_pairs: int = 0  # of them, text–text pairs (methods.wcsbert.text_positives)

    def __len__(self) -> int:
        return int(self.per_label.sum())


def default_buckets(kept_pages: int) -> int:
    """About 20,000 kept pages' categories a bucket: one bucket's votes are a few MB in one worker."""
    return int(np.clip(kept_pages // 20_000, 1, 256))


def write_category_pairs(pages: str, page_ids: np.ndarray, pseudo: PseudoLabels, prompts: list[list[str]],
                         max_pairs_per_label: int | None, location: str, seed: int,
                         buckets: int | None = None) -> PairsWritten:
    """The category pairs of the kept pages, built by Ray Data's workers and written as parquet (anchor,
    positive, label) under ``location``; ``prompts[label][alias]`` is the positive.

    The driver holds the kept pages' ids and votes (``KeptPages``, a few bytes a page), one block's summary
    at a time and, with a cap, the ``cap`` first-seen marks of each label; the categories, their votes and
    the pairs stay with the workers and in storage. Rows are in a seeded random order within each bucket of
    categories (buckets are hash partitions, so labels are mixed throughout the file).
    """
    from contrastext import storage
    from contrastext.methods.wcsbert.pool import pages_files

    n_labels, n_aliases = len(prompts), max(len(p) for p in prompts)
    kept = KeptPages.of(page_ids, pseudo, n_labels, n_aliases)
    buckets = buckets or default_buckets(len(kept.ids))
    votes = storage.parquet_dataset(pages_files(pages), columns=["page_id", "categories"]).map_batches(
        _votes_of_batch, batch_format="pyarrow", fn_kwargs={"kept": kept, "buckets": buckets})
    winners = votes.groupby("bucket", num_partitions=buckets).map_groups(
        _winners_of_bucket, batch_format="pyarrow",
        fn_kwargs={"n_labels": n_labels, "n_aliases": n_aliases, "seed": seed}).materialize()
    totals, conflicts, marks = _summary(winners, n_labels, max_pairs_per_label)
    limits = np.full(n_labels, np.iinfo(np.int64).max, np.int64)
    if max_pairs_per_label is not None:
        for label, first_seen in enumerate(marks):
            if len(first_seen) >= max_pairs_per_label:  # first-seen marks are distinct: the cap-th is the limit
                limits[label] = np.sort(first_seen)[max_pairs_per_label - 1]
    per_label = totals if max_pairs_per_label is None else np.minimum(totals, max_pairs_per_label)
    storage.delete(location)
    if per_label.sum():
        pairs = winners.map_batches(_pair_rows, batch_format="pyarrow",
                                    fn_kwargs={"prompts": prompts, "limits": limits})
        filesystem, path = storage.resolve(location)
        pairs.write_parquet(path, filesystem=filesystem)
    return PairsWritten(location=location, per_label=per_label, conflicts=conflicts)


def _summary(winners, n_labels: int, cap: int | None) -> tuple[np.ndarray, int, list[np.ndarray]]:
    """Categories per label, conflicts, and per label the ``cap`` smallest first-seen marks (a block at a time)."""
    totals = np.zeros(n_labels, np.int64)
    conflicts = 0
    marks = [np.zeros(0, np.int64) for _ in range(n_labels)]
    for block in winners.iter_batches(batch_size=None, batch_format="pyarrow"):
        label = block.column("label").to_numpy()
        totals += np.bincount(label, minlength=n_labels)
        conflicts += int(np.count_nonzero(block.column("conflict").to_numpy(zero_copy_only=False)))
        if cap is not None:
            first_seen = block.column("first_seen").to_numpy()
            for value in np.unique(label):
                both = np.concatenate([marks[value], first_seen[label == value]])
                marks[value] = np.partition(both, cap - 1)[:cap] if len(both) > cap else both
    return totals, conflicts, marks


def _votes_of_batch(batch: pa.Table, kept: KeptPages, buckets: int) -> pa.Table:
    return page_votes(batch.column("page_id").to_numpy(), batch.column("categories").combine_chunks(), kept,
                      buckets)


def _winners_of_bucket(votes: pa.Table, n_labels: int, n_aliases: int, seed: int) -> pa.Table:
    winners = reduce_votes(votes, n_labels, n_aliases)
    order = np.argsort(_name_hashes(winners.column("category"), key=f"{seed:016d}"[-16:]), kind="stable")
    return winners.take(pa.array(order))


def _pair_rows(winners: pa.Table, prompts: list[list[str]], limits: np.ndarray) -> pa.Table:
    label = winners.column("label").to_numpy()
    winners = winners.filter(pa.array(winners.column("first_seen").to_numpy() <= limits[label]))
    label = winners.column("label").to_numpy()
    alias = winners.column("alias").to_numpy()
    positive = [prompts[lab][ali] for lab, ali in zip(label.tolist(), alias.tolist())]
    return pa.table({"anchor": winners.column("category"), "positive": pa.array(positive, pa.string()),
                     "label": pa.array(label, pa.int32())})
