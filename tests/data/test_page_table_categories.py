"""A page table in the build_corpus pages layout carries its own categories."""

from __future__ import annotations

from contrastext.data.wikipedia import Page, iter_table_pages


def test_a_page_tables_own_categories_are_used_without_a_categories_table():
    rows = [{"page_id": 7, "title": "Ada", "text": "Ada was a mathematician.",
             "categories": ["1815_births", "English mathematicians", "1815 births"]},
            {"id": "8", "url": "u", "title": "Bob", "text": "Bob."}]
    pages = list(iter_table_pages(rows, None))
    assert all(isinstance(p, Page) for p in pages)
    assert pages[0].categories == ["1815 births", "English mathematicians"]
    assert pages[1].categories == []


def test_a_categories_table_takes_precedence_over_the_rows_column():
    rows = [{"page_id": 7, "title": "Ada", "text": "Ada.", "categories": ["Own"]}]
    (page,) = iter_table_pages(rows, ("page_id", {7: ["From table"]}))
    assert page.categories == ["From table"]
    (page,) = iter_table_pages([{**rows[0], "page_id": 9}], ("page_id", {7: ["From table"]}))
    assert page.categories == []
