"""Which setting changes make a finished WC-SBERT stage run again."""

from contrastext.pipelines.wcsbert import _comparable, _differences


def test_stage_settings_compare_only_what_both_sides_have():
    old = {"pool": {"texts": {"path": "a.csv"}}, "rounds": {"rounds": 3, "init": "previous"}}
    assert _differences(_comparable(old), _comparable({"pool": {"texts": {"path": "a.csv", "join": "space"}},
                                                       "rounds": {"rounds": 5, "init": "previous"}})) == []
    changed = _differences(_comparable(old), _comparable({"pool": {"texts": {"path": "b.csv"}},
                                                          "rounds": {"rounds": 3, "init": "base"}}))
    assert sorted(changed) == [".pool.texts.path", ".rounds.init"]
