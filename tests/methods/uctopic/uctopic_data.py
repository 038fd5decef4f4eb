"""Small phrase data shared by the UCTopic job tests (a plain module, not a conftest)."""

import json
import tracemalloc
from collections.abc import Callable

PEOPLE = ["John Smith", "Maria Lopez", "Ahmed Khan", "Li Wei"]
PLACES = ["Paris", "New York", "Berlin", "Cairo"]
ORGS = ["Reuters", "the United Nations", "Ford", "Barclays"]
TEMPLATES = ["{p} said on Monday that {o} would open an office in {l} .",
             "{o} hired {p} to lead its team in {l} .",
             "In {l} , {p} met officials from {o} ."]


def conll_text() -> str:
    """24 sentences of people, places and organisations in CoNLL-2003's 4-column layout."""
    lines = ["-DOCSTART- -X- O O", ""]
    for i in range(24):
        p, l, o = PEOPLE[i % 4], PLACES[(i // 4) % 4], ORGS[(i + 1) % 4]
        sentence = TEMPLATES[i % 3].format(p=p, l=l, o=o.replace("the ", "the|O "))
        entity_of = {w: "PER" for w in p.split()} | {w: "LOC" for w in l.split()} | {
            w: "ORG" for w in o.replace("the ", "").split()}
        for token in sentence.split():
            if token.endswith("|O"):
                lines.append(f"{token[:-2]} DT I-NP O")
            else:
                tag = f"I-{entity_of[token]}" if token in entity_of else "O"
                lines.append(f"{token} NN I-NP {tag}")
        lines.append("")
    return "\n".join(lines)


def pages_jsonl() -> str:
    """12 pages in the links layout (title, text, link spans), as JSON lines."""
    rows = []
    for i in range(12):
        place, person = PLACES[i % 4], PEOPLE[(i + 1) % 4]
        text = f"{person} travelled to {place} in the spring of year {1990 + i}. The visit was long."
        links = [{"target": person, "start": 0, "end": len(person)},
                 {"target": place, "start": text.index(place), "end": text.index(place) + len(place)}]
        rows.append({"title": f"Page {i}", "text": text, "links": links})
    return "\n".join(json.dumps(r) for r in rows)


def peak_traced_bytes(work: Callable[[], object]) -> int:
    """The peak of Python's traced allocations while ``work`` runs (tracemalloc)."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
