"""Wikitext → plain text, categories and link spans (synthetic wikitext covering each construct)."""

from contrastext.data.wikitext import normalize_category, normalize_title, parse_wikitext

WIKITEXT = """{{Infobox person|name=Ada|birth_date={{birth date|1815|12|10}}}}
'''Ada Lovelace''' (10 December 1815<ref name="b">{{cite book|title=Life}}</ref>) was an English
[[mathematician]] and [[Writer|writer]], chiefly known for her work on [[Charles Babbage]]'s proposed
[[Analytical Engine|mechanical general-purpose computer]].<ref>Fuegi 2003.</ref>
[[File:Ada_Lovelace.jpg|thumb|Portrait of [[Ada Lovelace|Ada]] by [[Alfred Edward Chalon]]]]
<!-- a hidden [[Category:Not a category]] -->
{| class="wikitable"
|-
! Year !! Work
|-
| 1843 || [[Notes (Lovelace)|Notes]]
|}
== Early life ==
She was the daughter of [[Lord Byron]] &amp; [[Anne Isabella Milbanke|Anne]].[[de:Ada Lovelace]]
See [http://example.org the archive] and [[:Category:Women mathematicians|the category]].
__NOTOC__
[[Category:1815 births|Lovelace, Ada]]
[[Category:women_mathematicians]]
[[Category: 1815 births ]]
"""


def test_markup_removed_and_visible_text_kept():
    parsed = parse_wikitext(WIKITEXT)
    text = parsed.text
    assert text.startswith("Ada Lovelace (10 December 1815) was an English\nmathematician and writer")
    assert "mechanical general-purpose computer" in text
    for junk in ("{{", "}}", "[[", "]]", "<ref", "cite book", "Fuegi", "thumb", "Portrait of", "wikitable",
                 "1843", "__NOTOC__", "Not a category", "http://", "de:Ada"):
        assert junk not in text, junk
    assert "Early life" in text and "Lord Byron & Anne." in text
    assert "See the archive and the category." in text


def test_categories_normalised_deduplicated_in_page_order():
    parsed = parse_wikitext(WIKITEXT)
    # the commented-out category is not one; sort keys dropped; "_" → space; first letter upper; no duplicates
    assert parsed.categories == ["1815 births", "Women mathematicians"]


def test_link_spans_point_at_visible_text():
    parsed = parse_wikitext(WIKITEXT, links=True)
    spans = {(s.target, parsed.text[s.start:s.end]) for s in parsed.links}
    assert ("Mathematician", "mathematician") in spans
    assert ("Writer", "writer") in spans
    assert ("Analytical Engine", "mechanical general-purpose computer") in spans
    assert ("Anne Isabella Milbanke", "Anne") in spans
    assert ("Category:Women mathematicians", "the category") in spans
    # links inside a dropped file caption or table do not appear
    assert not any(target in {"Alfred Edward Chalon", "Notes (Lovelace)"} for target, _ in spans)
    assert all(0 <= s.start < s.end <= len(parsed.text) for s in parsed.links)
    assert parse_wikitext(WIKITEXT).links == []  # only on request


def test_spans_survive_whitespace_and_punctuation_cleanup():
    parsed = parse_wikitext("A  {{x}} [[B]]  ,  (   ) [[C|see  c]]\n\n\n\n[[D]] .", links=True)
    assert [(s.target, parsed.text[s.start:s.end]) for s in parsed.links] == [
        ("B", "B"), ("C", "see c"), ("D", "D")]


def test_normalisation_helpers():
    assert normalize_title("  foo_bar   baz ") == "Foo bar baz"
    assert normalize_category("living_people|Smith, John") == "Living people"
    assert normalize_category("Caf&eacute;s") == "Cafés"
