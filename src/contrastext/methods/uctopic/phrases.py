"""Phrase instances — a sentence and a character span in it — from Wikipedia links, CoNLL files and documents.

* Wikipedia: every ``[[Target|anchor]]`` link of a page becomes an instance of the sentence holding it,
  keyed by its target page; two instances with the same target (or the same anchor text) are a positive pair.
* CoNLL-style NER files: every entity is an instance, its type the gold label.
* Raw documents: candidate phrases from :mod:`contrastext.methods.uctopic.candidates`.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import io
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import IO, TYPE_CHECKING

from contrastext import storage

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n+")


@dataclass
class PhraseInstance:
    """One mention: ``sentence[start:end]`` is the phrase; ``key`` groups mentions of the same thing."""

    sentence: str
    start: int
    end: int
    key: str
    label: str | None = None  # gold type where the data has one (CoNLL)
    document: int = -1  # index of the source document / page
    offset: int = 0  # where the sentence starts in its document

    @property
    def phrase(self) -> str:
        return self.sentence[self.start:self.end]


@dataclass
class SentenceSpan:
    text: str
    start: int  # character offset in the document
    end: int


class OffsetSentenceSplitter:
    """Rule-based sentences (spaCy's blank English tokenizer + ``sentencizer``) that keep document offsets.

    No statistical model is loaded; blank lines also end a sentence.
    """

    def __init__(self, max_sentence_chars: int = 1000) -> None:
        import spacy

        self._nlp = spacy.blank("en")
        self._nlp.add_pipe("sentencizer")
        self._nlp.max_length = 10_000_000
        self.max_sentence_chars = max_sentence_chars

    def split(self, text: str) -> list[SentenceSpan]:
        return self.split_many([text])[0]

    def split_many(self, texts: Sequence[str]) -> list[list[SentenceSpan]]:
        paragraphs: list[tuple[int, int, str]] = []  # (document, offset, text)
        for i, text in enumerate(texts):
            position = 0
            for match in list(_PARAGRAPH_BREAK.finditer(text)) + [None]:
                end = match.start() if match else len(text)
                if text[position:end].strip():
                    paragraphs.append((i, position, text[position:end]))
                position = match.end() if match else len(text)
        out: list[list[SentenceSpan]] = [[] for _ in texts]
        docs = self._nlp.pipe((p for _, _, p in paragraphs), batch_size=256)
        for (i, offset, _), doc in zip(paragraphs, docs):
            for sentence in doc.sents:
                start, end = _strip_span(doc.text, sentence.start_char, sentence.end_char)
                while start < end:  # over-long "sentences" (lists, tables) are cut at a space
                    stop = _cut(doc.text, start, end, self.max_sentence_chars)
                    s, e = _strip_span(doc.text, start, stop)
                    if s < e:
                        out[i].append(SentenceSpan(doc.text[s:e], offset + s, offset + e))
                    start = stop
        return out


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _cut(text: str, start: int, end: int, limit: int) -> int:
    if end - start <= limit:
        return end
    space = text.rfind(" ", start + 1, start + limit)
    return space if space > start else start + limit


# ------------------------------------------------------------------------------------------- Wikipedia

def wiki_link_instances(pages: Iterable, splitter: OffsetSentenceSplitter | None = None,
                        min_sentence_words: int = 4) -> Iterator[PhraseInstance]:
    """Link mentions of pages (``contrastext.data.wikipedia.Page`` read with ``links=True``, or dict rows
    with ``text`` and ``links`` [{target, start, end}]), one instance per link inside one sentence."""
    from contrastext.data.wikitext import normalize_title

    splitter = splitter or OffsetSentenceSplitter()
    for number, page in enumerate(pages):
        text = page["text"] if isinstance(page, dict) else page.text
        links = page.get("links") if isinstance(page, dict) else page.links
        if not text or not links:
            continue
        sentences = splitter.split(text)
        starts = [s.start for s in sentences]
        for link in links:
            target, start, end = ((link["target"], link["start"], link["end"]) if isinstance(link, dict)
                                  else (link.target, link.start, link.end))
            if not target or not 0 <= start < end <= len(text):
                continue
            k = bisect.bisect_right(starts, start) - 1
            if k < 0:
                continue
            sentence = sentences[k]
            if end > sentence.end or len(sentence.text.split()) < min_sentence_words:
                continue  # a link across a sentence boundary, or a heading / list fragment
            s, e = _strip_span(text, start, end)
            if s >= e:
                continue
            yield PhraseInstance(sentence.text, s - sentence.start, e - sentence.start,
                                 key=normalize_title(target), document=number, offset=sentence.start)


@dataclass
class PairStats:
    instances: int = 0
    keys_with_pairs: int = 0
    pairs: int = 0
    by_source: Counter = field(default_factory=Counter)


def positive_pairs(instances: Sequence[PhraseInstance], *, keep_probability: float = 0.5,
                   max_pairs_per_key: int = 20, by_mention: bool = True, seed: int = 0,
                   stats: PairStats | None = None) -> list[dict]:
    """Training rows of positive pairs: two different sentences mentioning the same target (or, with
    ``by_mention``, the same anchor text). Both mentions are masked, except that with probability
    ``keep_probability`` one of the two (chosen at random) is kept visible.

    Row columns: ``anchor``, ``anchor_start``, ``anchor_end``, ``anchor_mask``, the same for ``positive``,
    ``key`` (what the pair shares; no two rows of a batch share it) and ``topic`` (-1: none).

    Each group draws its pairs with :func:`group_pairs` (seeded by the group, so the result does not depend on
    how instances are partitioned); a pair drawn by two groups is kept once, under the first group in sorted
    order. The rows are ordered by their seeded pair id. :func:`positive_pair_dataset` builds the same rows
    with Ray Data.
    """
    groups: dict[str, list[PhraseInstance]] = defaultdict(list)
    for inst in instances:
        for group in mention_groups(inst.key, inst.phrase, by_mention):
            groups[group].append(inst)
    seen: set[int] = set()
    rows: list[dict] = []
    stats = stats if stats is not None else PairStats()
    stats.instances = len(instances)
    for group, members in sorted(groups.items()):
        drawn = [r for r in group_pairs(group, members, seed=seed, keep_probability=keep_probability,
                                        max_pairs_per_key=max_pairs_per_key) if r["pair_id"] not in seen]
        seen.update(r["pair_id"] for r in drawn)
        rows.extend(drawn)
        if drawn:
            stats.keys_with_pairs += 1
            stats.by_source[group.split(":", 1)[0]] += len(drawn)
    rows.sort(key=lambda r: r["pair_id"])
    for row in rows:
        del row["pair_id"]
    stats.pairs = len(rows)
    return rows


def mention_groups(key: str, phrase: str, by_mention: bool) -> list[str]:
    """The groups a mention belongs to: its link target and, with ``by_mention``, its lowercased anchor text."""
    return [f"target:{key}", f"mention:{phrase.lower()}"] if by_mention else [f"target:{key}"]


def group_pairs(group: str, members: Sequence[PhraseInstance], *, seed: int, keep_probability: float,
                max_pairs_per_key: int) -> list[dict]:
    """Up to ``max_pairs_per_key`` pair rows of one group's mentions, each with a ``pair_id``.

    The draw depends only on the group's name, its mentions (in any order) and ``seed``; two mentions with the
    same sentence, span and key count as one mention of a pair (repeated pages give no repeated pairs).
    """
    ordered = sorted(members, key=_mention_identity)
    rng = random.Random(_stable_hash(f"{seed}\x00{group}", signed=False))
    seen: set[int] = set()
    rows: list[dict] = []
    for a, b in cross_sentence_pairs(range(len(ordered)), ordered, rng):
        pair = pair_id(ordered[a], ordered[b], seed)
        if pair in seen:
            continue
        seen.add(pair)
        rows.append({**pair_row(ordered[a], ordered[b], rng, keep_probability, group=group), "pair_id": pair})
        if len(rows) >= max_pairs_per_key:
            break
    return rows


def pair_id(a: PhraseInstance, b: PhraseInstance, seed: int) -> int:
    """A signed 64-bit hash of the two mentions and the seed: the same pair under any group gets the same id."""
    return _stable_hash(repr((seed, _mention_identity(a), _mention_identity(b))), signed=True)


def _mention_identity(inst: PhraseInstance) -> tuple[str, int, int, str]:
    return inst.sentence, inst.start, inst.end, inst.key


def _stable_hash(text: str, signed: bool) -> int:
    # Python's hash() of a str differs between processes; Ray workers must agree
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=signed)


def cross_sentence_pairs(members: Sequence[int], instances: Sequence[PhraseInstance],
                         rng: random.Random) -> Iterator[tuple[int, int]]:
    """Every pair ``(a, b)``, ``a < b``, of ``members`` (indices into ``instances``) whose sentences differ, each
    once, in a random order drawn lazily: O(m log m) to start and O(log m) per pair, never the m² list.

    With the members ordered by sentence, the partners of the member at position ``x`` are the positions from
    the end of its sentence's run onwards; numbering those pairs in order lets a drawn number be decoded into a
    pair, and a sparse Fisher–Yates shuffle draws the numbers without repeats.
    """
    order = sorted(members, key=lambda i: instances[i].sentence)
    run_ends = _run_ends([instances[i].sentence for i in order])
    first_pair = list(accumulate((len(order) - end for end in run_ends), initial=0))
    total = first_pair[-1]
    swapped: dict[int, int] = {}
    for drawn in range(total):
        j = rng.randrange(drawn, total)
        number = swapped.get(j, j)
        swapped[j] = swapped.get(drawn, drawn)
        x = bisect.bisect_right(first_pair, number) - 1
        a, b = order[x], order[run_ends[x] + number - first_pair[x]]
        yield (a, b) if a < b else (b, a)


def _run_ends(values: Sequence[str]) -> list[int]:
    """For each position of a sorted sequence, the position just after its run of equal values."""
    ends = [0] * len(values)
    end = len(values)
    for x in range(len(values) - 1, -1, -1):
        if x + 1 < len(values) and values[x] != values[x + 1]:
            end = x + 1
        ends[x] = end
    return ends


def pair_row(a: PhraseInstance, b: PhraseInstance, rng: random.Random | None, keep_probability: float,
             group: str, topic: int = -1) -> dict:
    mask_a = mask_b = rng is not None
    if rng is not None and rng.random() < keep_probability:
        if rng.random() < 0.5:
            mask_a = False
        else:
            mask_b = False
    return {"anchor": a.sentence, "anchor_start": a.start, "anchor_end": a.end, "anchor_mask": mask_a,
            "positive": b.sentence, "positive_start": b.start, "positive_end": b.end, "positive_mask": mask_b,
            "key": group, "topic": topic}


# ------------------------------------------------------------------------------------- pairs on Ray Data

_MENTION_COLUMNS = ("sentence", "start", "end", "key")


@dataclass
class PairDatasets:
    mentions: ray.data.Dataset  # materialised: one row per link mention
    pairs: ray.data.Dataset  # lazy: the rows of :func:`positive_pairs`


def positive_pair_dataset(pages: ray.data.Dataset, *, keep_probability: float = 0.5,
                          max_pairs_per_key: int = 20, by_mention: bool = True, seed: int = 0,
                          min_sentence_words: int = 4) -> PairDatasets:
    """:func:`positive_pairs` of the link mentions of ``pages`` (rows with ``text`` and ``links``), with Ray
    Data: pages → mentions → one group per target (and anchor text) → each group's pairs → one row per pair.

    The mentions are materialised in the object store, the pairs left lazy; nothing that grows with the pages
    is held by the caller. The pairs are ordered by their seeded pair id.
    """
    mentions = pages.map_batches(page_mentions, batch_format="pyarrow",
                                 fn_kwargs={"min_sentence_words": min_sentence_words}).materialize()
    return mention_pair_dataset(mentions, keep_probability=keep_probability, max_pairs_per_key=max_pairs_per_key,
                                by_mention=by_mention, seed=seed)


def mention_pair_dataset(mentions: ray.data.Dataset, *, keep_probability: float = 0.5, max_pairs_per_key: int = 20,
                         by_mention: bool = True, seed: int = 0) -> PairDatasets:
    """The pairs of materialised mention rows (``sentence``, ``start``, ``end``, ``key``): one group per key
    (and anchor text) → each group's pairs → one row per pair, ordered by their seeded pair id."""
    partitions = max(1, mentions.num_blocks())  # as many as the mentions' blocks, not a fixed 200
    grouped = mentions.map_batches(with_groups, batch_format="pyarrow", fn_kwargs={"by_mention": by_mention})
    drawn = grouped.groupby("group", num_partitions=partitions).map_groups(
        draw_group_pairs, batch_format="pyarrow",
        fn_kwargs={"seed": seed, "keep_probability": keep_probability, "max_pairs_per_key": max_pairs_per_key})
    # a pair can be drawn under its target and under its anchor text: keep it once, as positive_pairs does
    unique = (drawn.groupby("pair_id", num_partitions=partitions).map_groups(first_group_of_pair,
                                                                             batch_format="pyarrow")
              if by_mention else drawn.sort("pair_id"))
    return PairDatasets(mentions, unique.drop_columns(["pair_id"]))


def page_mentions(pages: pa.Table, min_sentence_words: int) -> pa.Table:
    """The link mentions of a batch of pages: ``sentence``, ``start``, ``end``, ``key``."""
    import pyarrow as pa

    found = wiki_link_instances(pages.select(["text", "links"]).to_pylist(), sentence_splitter(), min_sentence_words)
    columns: dict[str, list] = {name: [] for name in _MENTION_COLUMNS}
    for inst in found:
        for name, value in zip(_MENTION_COLUMNS, _mention_identity(inst)):
            columns[name].append(value)
    return pa.table(columns, schema=mention_schema())


def with_groups(mentions: pa.Table, by_mention: bool) -> pa.Table:
    """Each mention once per group it belongs to, with a ``group`` column (see :func:`mention_groups`)."""
    import pyarrow as pa

    flat = [{"group": group, **row} for row in mentions.to_pylist()
            for group in mention_groups(row["key"], row["sentence"][row["start"]:row["end"]], by_mention)]
    return pa.Table.from_pylist(flat, schema=mention_schema().insert(0, pa.field("group", pa.string())))


def draw_group_pairs(members: pa.Table, *, seed: int, keep_probability: float,
                     max_pairs_per_key: int) -> pa.Table:
    """:func:`group_pairs` of one group's mention rows."""
    import pyarrow as pa

    group = members.column("group")[0].as_py()
    instances = [PhraseInstance(r["sentence"], r["start"], r["end"], key=r["key"])
                 for r in members.select(list(_MENTION_COLUMNS)).to_pylist()]
    rows = group_pairs(group, instances, seed=seed, keep_probability=keep_probability,
                       max_pairs_per_key=max_pairs_per_key)
    return pa.Table.from_pylist(rows, schema=_pair_schema())


def first_group_of_pair(drawn: pa.Table) -> pa.Table:
    """The row of a pair drawn by several groups that the first group in sorted order drew."""
    return drawn.sort_by("key").slice(0, 1)


def mention_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("sentence", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("key", pa.string())])


def _pair_schema() -> pa.Schema:
    import pyarrow as pa

    side = [("{}", pa.string()), ("{}_start", pa.int64()), ("{}_end", pa.int64()), ("{}_mask", pa.bool_())]
    fields = [(name.format(s), kind) for s in ("anchor", "positive") for name, kind in side]
    return pa.schema(fields + [("key", pa.string()), ("topic", pa.int64()), ("pair_id", pa.int64())])


@functools.lru_cache(maxsize=1)
def sentence_splitter() -> OffsetSentenceSplitter:
    """One splitter per process (loading spaCy's blank pipeline costs time)."""
    return OffsetSentenceSplitter()


# ------------------------------------------------------------------------------------------- CoNLL

@dataclass
class ConllStats:
    sentences: int = 0
    documents: int = 0  # ``-DOCSTART-`` lines seen (a file without them is one document)
    entities: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)


def read_conll_entities(path: str | Path, labels: Sequence[str] | None = None,
                        stats: ConllStats | None = None,
                        documents: tuple[int, int] | None = None) -> list[PhraseInstance]:
    """Entities of a CoNLL-2003-style file (token first column, IOB1/IOB2 tag last column) as instances.

    A line with a tab is split on tabs, so an entity type may hold spaces; any other line on whitespace.
    The sentence text is its tokens joined by spaces; ``label`` is the entity type; ``key`` the lowercased
    mention. ``labels`` keeps only those types; ``documents`` = (first, end) only the entities of those documents
    (counted from 0 by their ``-DOCSTART-`` lines; end excluded). Malformed lines are counted in
    ``stats.skipped``. ``path`` is a local file or a URI (``s3://…``).
    """
    source = path if storage.is_uri(path) else Path(path)
    if not storage.is_file(source):
        raise FileNotFoundError(f"CoNLL file {source} does not exist")
    stats = stats if stats is not None else ConllStats()
    wanted = set(labels) if labels else None
    out: list[PhraseInstance] = []
    tokens: list[tuple[str, str]] = []

    def flush() -> None:
        if not tokens:
            return
        in_range = documents is None or documents[0] <= max(stats.documents - 1, 0) < documents[1]
        if not in_range:
            tokens.clear()
            return
        stats.sentences += 1
        sentence, spans = _conll_sentence(tokens)
        for start, end, kind in spans:
            stats.entities[kind] += 1
            if wanted is None or kind in wanted:
                out.append(PhraseInstance(sentence, start, end, key=sentence[start:end].lower(), label=kind,
                                          document=stats.sentences - 1))
        tokens.clear()

    with _open_text(source) as f:
        for line in f:
            parts = _conll_columns(line)
            if not parts or parts[0] == "-DOCSTART-":
                flush()
                stats.documents += bool(parts)
            elif len(parts) < 2:
                stats.skipped["line with fewer than 2 columns"] += 1
            else:
                tag = parts[-1]
                if tag != "O" and not re.fullmatch(r"[BIES]-\S(?:.*\S)?", tag):
                    stats.skipped["unknown NER tag"] += 1
                    tag = "O"
                tokens.append((parts[0], tag))
    flush()
    if not out:
        where = f" in documents {documents[0]}..{documents[1] - 1}" if documents else ""
        raise ValueError(f"{source}: no entities{f' of types {sorted(wanted)}' if wanted else ''}{where} found "
                         f"({stats.documents} documents; skipped lines: {dict(stats.skipped) or 'none'})")
    return out


def _conll_columns(line: str) -> list[str]:
    """A line's columns: split on tabs when it has any (a column may then hold spaces, as in MIT-Movie's
    ``B-average ratings``), else on any whitespace."""
    if "\t" in line:
        return [column.strip() for column in line.split("\t") if column.strip()]
    return line.split()


def _open_text(source: str | Path) -> IO[str]:
    """A local text file opened for reading, or the text of a URI (read whole) as a file."""
    if storage.is_uri(source):
        return io.StringIO(storage.read_bytes(source).decode("utf-8", errors="replace"))
    return open(source, encoding="utf-8", errors="replace")


def _conll_sentence(tokens: list[tuple[str, str]]) -> tuple[str, list[tuple[int, int, str]]]:
    text_parts: list[str] = []
    spans: list[tuple[int, int, str]] = []
    position = 0
    current: list | None = None  # [start, end, type]
    for token, tag in tokens:
        start = position
        end = start + len(token)
        text_parts.append(token)
        position = end + 1
        if tag == "O":
            current = None
            continue
        prefix, kind = tag.split("-", 1)
        continues = current is not None and current[2] == kind and prefix in ("I", "E")
        if continues:
            current[1] = end
        else:
            current = [start, end, kind]
            spans.append(current)  # type: ignore[arg-type]
    return " ".join(text_parts), [(s, e, k) for s, e, k in spans]
