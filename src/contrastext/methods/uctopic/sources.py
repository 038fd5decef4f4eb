"""Reading the inputs of the UCTopic stages: documents (files or folders), CoNLL entities, Wikipedia pages."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from contrastext import storage
from contrastext.data.sources import describe, load_texts
from contrastext.methods.uctopic.config import PhraseSource, PretrainSettings
from contrastext.methods.uctopic.phrases import ConllStats, PhraseInstance, read_conll_entities

if TYPE_CHECKING:
    import ray.data


@dataclass
class Instances:
    instances: list[PhraseInstance]
    source: str
    extractor: str
    documents: list[str] = field(default_factory=list)  # the documents' texts (document sources)
    counts: dict = field(default_factory=dict)


def sample_instances(instances: list[PhraseInstance], limit: int | None, seed: int) -> list[PhraseInstance]:
    """At most ``limit`` of ``instances`` (a seeded choice, in their order); all of them when ``limit`` is None."""
    if limit is None or len(instances) <= limit:
        return instances
    keep = sorted(random.Random(seed).sample(range(len(instances)), limit))
    return [instances[i] for i in keep]


def load_phrase_source(source: PhraseSource, seed: int = 0) -> Instances:
    """Phrase instances of CoNLL entities or of candidate phrases in documents."""
    if source.conll:
        stats = ConllStats()
        found = read_conll_entities(source.conll, source.labels, stats, documents=source.conll_documents)
        kept = sample_instances(found, source.max_instances, seed)
        counts = {"sentences": stats.sentences, "entities": dict(stats.entities), "instances": len(kept),
                  "malformed_lines": dict(stats.skipped)}
        return Instances(kept, source.conll, "conll", counts=counts)
    if source.documents:
        from contrastext.methods.uctopic.candidates import NgramSettings, document_phrases

        docs = load_texts(source.documents, seed=seed)
        found, extractor = document_phrases(docs.texts, extractor=source.extractor, spacy_model=source.spacy_model,
                                            ngram=NgramSettings(**source.ngram.model_dump()))
        kept = sample_instances(found, source.max_instances, seed)
        counts = {"documents": len(docs.texts), "documents_skipped": dict(docs.skipped),
                  "phrase_instances_found": len(found), "instances": len(kept),
                  "distinct_phrases": len({i.key for i in kept})}
        return Instances(kept, describe(source.documents), extractor, documents=docs.texts, counts=counts)
    raise ValueError("no phrase source: set conll (a CoNLL-style file) or documents (a file or folder)")


_PAGE_BATCH_ROWS = 256


def iter_wiki_pages(settings: PretrainSettings) -> tuple[Iterator, str]:
    """Pages with links (Page objects from a dump, or dict rows of a pages table) and where they come from.

    Both are read lazily, and only up to ``max_pages``.
    """
    from itertools import islice

    if settings.pages:
        batch_rows = min(settings.max_pages or _PAGE_BATCH_ROWS, _PAGE_BATCH_ROWS)
        batches = _table_batches(settings.pages, ["text", "links"], batch_rows)  # opened now: errors show here
        rows = (row for batch in batches for row in batch.to_pylist())
        return islice(rows, settings.max_pages), settings.pages
    from contrastext.data.samples import find_dump_sample
    from contrastext.data.wikipedia import Page, iter_dump

    dump = settings.dump or str(find_dump_sample())
    pages = (p for p in iter_dump(dump, links=True) if isinstance(p, Page))
    return islice(pages, settings.max_pages), dump


def _table_batches(location: str, columns: list[str], batch_rows: int) -> Iterator:
    """Record batches of a parquet/jsonl file or folder (local or URI), read as they are consumed."""
    import pyarrow.dataset as pads

    filesystem, path = storage.resolve(location)
    kind = "json" if location.endswith((".jsonl", ".json")) else "parquet"
    dataset = pads.dataset(path, filesystem=filesystem, format=kind)
    # little read-ahead: a consumer that stops early leaves at most a couple of batches read in vain
    return dataset.to_batches(columns=columns, batch_size=batch_rows, batch_readahead=1, fragment_readahead=1)


def wiki_pages_dataset(settings: PretrainSettings) -> tuple[ray.data.Dataset, str]:
    """Pages with ``text`` and ``links`` as a Ray dataset, up to ``max_pages``, and where they come from.

    A pages table (parquet/jsonl file or folder, local or URI) is read by Ray's own readers; an XML dump by
    one task per chunk of the dump (the whole file unless it is split by a multistream index).
    """
    import ray.data

    if settings.pages:
        filesystem, path = storage.resolve(settings.pages)
        if settings.pages.endswith((".jsonl", ".json")):
            pages = ray.data.read_json(path, filesystem=filesystem).select_columns(["text", "links"])
        else:
            pages = ray.data.read_parquet(path, filesystem=filesystem).select_columns(["text", "links"])
        source = settings.pages
    else:
        from contrastext.data.samples import find_dump_sample
        from contrastext.data.wikipedia import plan_dump_chunks

        source = settings.dump or str(find_dump_sample())
        # workers may not share the driver's working directory
        chunks = plan_dump_chunks(source if storage.is_uri(source) else str(Path(source).resolve()))
        pages = ray.data.from_items([asdict(chunk) for chunk in chunks]).flat_map(_dump_chunk_pages)
    if settings.max_pages:
        pages.context.execution_options.preserve_order = True  # the first max_pages pages, in file order
        pages = pages.limit(settings.max_pages)
    return pages, source


def _dump_chunk_pages(chunk: dict) -> Iterator[dict]:
    from contrastext.data.wikipedia import DumpChunk, Page, iter_dump_chunk

    for page in iter_dump_chunk(DumpChunk(**chunk), links=True):
        if isinstance(page, Page) and page.text and page.links:
            yield {"text": page.text, "links": [{"target": s.target, "start": s.start, "end": s.end}
                                                for s in page.links]}
