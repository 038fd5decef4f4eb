from __future__ import annotations

from contrastext.data.pages import PAGE_SCHEMA, PAGE_SCHEMA_WITH_LINKS, pages_table


def test_pages_table_has_the_pages_layout():
    row = {"page_id": 3, "title": "Cat", "text": "The cat.", "categories": ["Felines"]}
    table = pages_table([row])
    assert table.schema.equals(PAGE_SCHEMA) and table.to_pylist() == [row]
    linked = pages_table([{**row, "links": [{"target": "Mammal", "start": 0, "end": 3}]}], links=True)
    assert linked.schema.equals(PAGE_SCHEMA_WITH_LINKS)
    assert PAGE_SCHEMA_WITH_LINKS.names[:4] == PAGE_SCHEMA.names
