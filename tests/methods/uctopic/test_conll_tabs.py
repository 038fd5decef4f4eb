"""A tab-separated CoNLL-style file whose entity types hold spaces (MIT-Movie's ``B-average ratings``)."""

from __future__ import annotations

from contrastext.methods.uctopic.phrases import ConllStats, read_conll_entities

TAB_SEPARATED = (
    "show\tO\n"
    "me\tO\n"
    "movies\tO\n"
    "rated\tB-average ratings\n"
    "five\tI-average ratings\n"
    "stars\tI-average ratings\n"
    "with\tO\n"
    "tom\tB-ACTOR\n"
    "hanks\tI-ACTOR\r\n"  # a Windows line end too
    "\n"
    "any\tO\n"
    "good\tB-average ratings \n"  # a stray space after the type: the column is stripped
    "comedies\tB-GENRE\n"
)


def test_tab_separated_columns_keep_entity_types_with_spaces(tmp_path):
    path = tmp_path / "movie.bio"
    path.write_text(TAB_SEPARATED, encoding="utf-8", newline="")
    stats = ConllStats()
    found = read_conll_entities(path, stats=stats)
    assert [(e.phrase, e.label) for e in found] == [
        ("rated five stars", "average ratings"), ("tom hanks", "ACTOR"),
        ("good", "average ratings"), ("comedies", "GENRE")]
    assert found[0].sentence == "show me movies rated five stars with tom hanks"
    assert stats.skipped == {} and stats.sentences == 2
    assert stats.entities == {"average ratings": 2, "ACTOR": 1, "GENRE": 1}
    kept = read_conll_entities(path, ["average ratings"])
    assert [e.key for e in kept] == ["rated five stars", "good"]


def test_whitespace_separated_lines_still_split_on_any_whitespace(tmp_path):
    path = tmp_path / "mini.conll"
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter  NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    stats = ConllStats()
    found = read_conll_entities(path, stats=stats)
    assert [(e.phrase, e.label) for e in found] == [("EU", "ORG"), ("Peter Blackburn", "PER")]
    assert stats.skipped == {}
