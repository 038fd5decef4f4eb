"""The guard's record on the docs page is generated from the benchmark's summary JSON, and names the rule the
job ships."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import guard_record  # noqa: E402
import pytest  # noqa: E402

from contrastext.methods.wcsbert.guard import PROTOTYPE_MARGIN, TRAINED_PROTOTYPE_MARGIN  # noqa: E402


def test_each_page_is_its_summary_rendered():
    # seed 0: the record the rules were chosen on; seeds 1 to 3: other draws and sets, which test them; seeds 4
    # to 8: made with the blend head (seed 7 reading 512 tokens of each text)
    for seed in (0, 1, 2, 3, *guard_record.BLEND_SEEDS):
        summary = json.loads(guard_record.summary_path(seed).read_text(encoding="utf-8"))
        assert summary.get("seed", 0) == seed
        assert guard_record.page_path(seed).read_text(encoding="utf-8") == guard_record.render_page(summary)


def test_the_overview_is_the_blend_era_summaries_rendered():
    summaries = [json.loads(guard_record.summary_path(seed).read_text(encoding="utf-8"))
                 for seed in guard_record.BLEND_SEEDS]
    page = guard_record.OVERVIEW.read_text(encoding="utf-8")
    assert page == guard_record.render_overview(summaries)
    rows = sum(len([row for row in summary["sets"] if not row["selection"]]) for summary in summaries)
    assert f"| all | {rows} |" in page


def test_the_readme_table_is_the_current_draw_rendered():
    summary = json.loads(guard_record.summary_path(guard_record.README_SEED).read_text(encoding="utf-8"))
    assert guard_record.render_readme_table(summary) in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.integration
@pytest.mark.slow
def test_the_readme_draw_reads_each_set_as_the_class_does_by_default():
    """Each set of the README's draw was read at what ``max_length="auto"`` settles for its pool (the texts'
    token counts alone), and the draw has sets of both lengths."""
    import argparse

    from conftest import shared_data

    for data in ("ag_news/test.csv", "20newsgroups/20ng_bydate_test.jsonl.gz", "bbcsport/bbcsport.jsonl"):
        shared_data(data)  # a skip where the real data is absent
    summary = json.loads(guard_record.summary_path(guard_record.README_SEED).read_text(encoding="utf-8"))
    assert summary["read_tokens"] == "auto"
    draw = argparse.Namespace(seed=guard_record.README_SEED, pool_rows=1000, eval_rows=800, holdout=0.2)
    read = {row["set"]: row["read_tokens"] for row in summary["sets"]}
    assert read == {name: guard_record.auto_tokens(guard_record.SETS[name], draw) for name in read}
    assert set(read.values()) == {128, 512}


@pytest.mark.integration
def test_auto_reads_each_record_back_from_the_folder_of_its_length_and_refuses_one_read_otherwise(tmp_path):
    import argparse
    import shutil

    from conftest import shared_data

    shared_data("20newsgroups/20ng_bydate_test.jsonl.gz")
    shared_data("ag_news/test.csv")
    records = ROOT / "benchmarks" / "results" / "guard_records"
    draw = tmp_path / "seed8"
    shutil.copytree(records / "seed8" / "agnews", draw / "agnews")
    shutil.copytree(records / "seed8_read512" / "20ng_names", tmp_path / "seed8_read512" / "20ng_names")
    args = argparse.Namespace(seed=8, pool_rows=1000, eval_rows=800, holdout=0.2, out=draw, rules_only=True,
                              sets=["agnews", "20ng_names"], read_tokens="auto")
    assert [(r["set"], r["read_tokens"]) for r in guard_record.collect_records(args)] == \
        [("agnews", 128), ("20ng_names", 512)]
    # at 128 tokens for every set, 20ng_names has no record: a replay says so rather than leave the set out
    with pytest.raises(SystemExit, match="no record to replay \\(20ng_names at 128"):
        guard_record.collect_records(argparse.Namespace(**{**vars(args), "read_tokens": 128}))
    # a record read at 512 found where 128 is asked for is refused, not mixed in
    shutil.copytree(tmp_path / "seed8_read512" / "20ng_names", draw / "20ng_names")
    with pytest.raises(SystemExit, match="read 512 tokens of each text, not 128"):
        guard_record.collect_records(argparse.Namespace(**{**vars(args), "read_tokens": 128}))


def test_a_summary_made_at_other_tokens_is_not_replaced(tmp_path):
    summary = tmp_path / "summary.json"
    guard_record.refuse_other_tokens(summary, 128)  # none yet
    summary.write_text(json.dumps({"seed": 8, "read_tokens": "auto"}))
    guard_record.refuse_other_tokens(summary, "auto")
    for other in (128, None):
        with pytest.raises(SystemExit, match="made with --read-tokens auto"):
            guard_record.refuse_other_tokens(summary, other)


def test_auto_keeps_a_set_read_at_more_than_128_tokens_beside_the_draws_folder():
    draw = Path("records") / "seed8"
    assert guard_record.record_folder(draw, "auto", 128) == draw
    assert guard_record.record_folder(draw, "auto", 512) == Path("records") / "seed8_read512"
    assert guard_record.record_folder(draw, 512, 512) == draw  # a number asked for: --out as given


def test_the_shipped_rule_is_the_guards_margins_and_the_blend():
    assert guard_record.ROUND_BY_PROMPTS.endswith(f"+{PROTOTYPE_MARGIN} else prompts (round 0) / blend (trained)")
    assert guard_record.SHIPPED in guard_record.RULES
    assert guard_record.MARGINS.endswith(f"+{PROTOTYPE_MARGIN} (round 0) / +{TRAINED_PROTOTYPE_MARGIN} (trained)")
    # the second draw was made under the margins alone, which its page marks as shipped
    summary = json.loads(guard_record.summary_path(1).read_text(encoding="utf-8"))
    assert summary["shipped"] == guard_record.MARGINS
    assert guard_record.MARGINS in {row["rule"] for row in summary["rules"]}
    # the first record was made under the earlier rule, which its page marks as shipped
    for seed in guard_record.BLEND_SEEDS:
        with_blend = json.loads(guard_record.summary_path(seed).read_text(encoding="utf-8"))
        assert with_blend["shipped"] == guard_record.SHIPPED
        assert guard_record.SHIPPED in {row["rule"] for row in with_blend["rules"]}
    first = json.loads(guard_record.SUMMARY.read_text(encoding="utf-8"))
    assert "shipped" not in first and guard_record.EARLIER in {row["rule"] for row in first["rules"]}


def test_a_record_delivers_what_the_rule_chooses():
    """On a hand-made record: round 1 raises the prompt head's guard, round 2 lowers it; on round 1 the
    prototypes score 0.03 above the prompts (within the margin), so round 1's prompts are delivered."""
    def candidate(accuracy: dict, guard: dict) -> dict:
        part = lambda head: {"guard": guard[head], "kappa0": guard[head], "anchored": 1.0,  # noqa: E731
                             "kappa_own": guard[head], "agreement": 0.9}
        return {head: {"accuracy": accuracy[head], "macro_f1": accuracy[head], "trained": part(head),
                       "held_out": part(head)} for head in ("prompts", "prototypes")}

    record = {"set": "made", "labels": ["a", "b"], "aliases": False, "pool": 10, "eval": 10,
              "pool_shares": [0.5, 0.5], "selection": {}, "seconds": 1.0, "rounds": [{"kept": 6}, {"kept": 7}],
              "candidates": {
                  "0": candidate({"prompts": 0.6, "prototypes": 0.7}, {"prompts": 0.4, "prototypes": 0.5}),
                  "1": candidate({"prompts": 0.8, "prototypes": 0.75}, {"prompts": 0.6, "prototypes": 0.63}),
                  "2": candidate({"prompts": 0.7, "prototypes": 0.7}, {"prompts": 0.5, "prototypes": 0.5})}}
    row = guard_record.set_summary(record)
    assert (row["delivered"]["round"], row["delivered"]["head"]) == (1, "prompts")
    assert row["oracle"]["accuracy"] == 0.8 and row["untrained"]["accuracy"] == 0.6
    assert guard_record.RULES["last round, prototypes"](record) == (2, "prototypes")
    # a trained round's prototypes 0.07 above its prompts: the earlier rule delivered them, the shipped one
    # needs 0.1 there; on the round-0 model 0.07 is enough
    record["candidates"]["1"] = candidate({"prompts": 0.8, "prototypes": 0.75}, {"prompts": 0.6, "prototypes": 0.67})
    assert guard_record.RULES[guard_record.EARLIER](record) == (1, "prototypes")
    assert guard_record.RULES[guard_record.MARGINS](record) == (1, "prompts")
    # a record made before the blend head: the shipped rule falls back to the margins
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (1, "prompts")
    # with the blend recorded, a trained round is delivered with it
    for r in ("0", "1", "2"):
        record["candidates"][r]["blend"] = dict(record["candidates"][r]["prompts"], accuracy=0.9)
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (1, "blend")
    assert guard_record.set_summary(record)["oracle"]["head"] == "blend"
    # the round-0 model kept: its prototypes where they lead by the margin, else its prompts
    record["candidates"]["1"]["prompts"]["trained"]["guard"] = 0.3
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (0, "prototypes")  # guard 0.5 against 0.4
    blend_0 = record["candidates"]["0"]["blend"]
    record["candidates"]["0"] = candidate({"prompts": 0.6, "prototypes": 0.7}, {"prompts": 0.4, "prototypes": 0.43})
    record["candidates"]["0"]["blend"] = blend_0
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (0, "prompts")
    blend_0 = guard_record.ROUND_BY_PROMPTS.replace("else prompts", "else blend")
    assert guard_record.RULES[blend_0](record) == (0, "blend")
    # a round is kept where it raises the guard, and with a margin only where it raises it by more than that
    record["candidates"]["1"]["prompts"]["trained"]["guard"] = 0.404  # round 0's prompts: 0.4
    record["candidates"]["2"]["prompts"]["trained"]["guard"] = 0.3
    margin = guard_record.ROUND_BY_PROMPTS.replace("round, ", "round by +0.005, ")
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (1, "blend")
    assert guard_record.RULES[margin](record) == (0, "prompts")
    record["candidates"]["1"]["prompts"]["trained"]["guard"] = 0.406
    assert guard_record.RULES[margin](record) == (1, "blend")


def test_the_shipped_rule_leaves_round_0_by_the_prompts_and_a_trained_round_by_the_blend():
    """As ``methods.wcsbert.stopping.RoundStop`` chooses with the blend among the heads (the default;
    tests/methods/wcsbert/test_rounds.py)."""
    def candidate(accuracy: float, prompts: float, prototypes: float, blend: float) -> dict:
        def entry(guard: float) -> dict:
            part = {"guard": guard, "kappa0": guard, "anchored": 1.0, "kappa_own": guard, "agreement": 0.9}
            return {"accuracy": accuracy, "macro_f1": accuracy, "trained": part, "held_out": part}
        return {"prompts": entry(prompts), "prototypes": entry(prototypes), "blend": entry(blend)}

    # round 2's prompts rise, its blend falls: the old rule delivers round 2, the shipped one round 1
    record = {"candidates": {"0": candidate(0.6, 0.50, 0.52, 0.60), "1": candidate(0.8, 0.55, 0.56, 0.58),
                             "2": candidate(0.7, 0.57, 0.60, 0.57)}}
    assert guard_record.RULES[guard_record.ROUND_BY_PROMPTS](record) == (2, "blend")
    assert guard_record.RULES[guard_record.SHIPPED](record) == (1, "blend")
    # unless round 2's teacher changed at least still_learning of the pool's labels (the job's setting)
    from contrastext.methods.wcsbert.config import RoundsConfig

    still_learning = RoundsConfig().still_learning
    assert guard_record.SHIPPED.endswith(f">= {still_learning} above round 0")
    for changed, kept in ((still_learning, 2), (still_learning - 0.01, 1)):
        record["rounds"] = [{"labels_changed": None}, {"labels_changed": changed}]
        assert guard_record.RULES[guard_record.SHIPPED](record) == (kept, "blend")
        assert guard_record.RULES[guard_record.BLEND_GUARD](record) == (1, "blend")
    # never a round whose prompts fall below round 0's, however many labels its teacher changed
    record["candidates"]["2"] = candidate(0.7, 0.49, 0.60, 0.57)
    assert guard_record.RULES[guard_record.SHIPPED](record) == (1, "blend")
    # round 1's prompts do not beat round 0's: round 0, with its prototypes where they lead by the margin
    record["candidates"]["1"] = candidate(0.8, 0.49, 0.70, 0.90)
    assert guard_record.RULES[guard_record.SHIPPED](record) == (0, "prompts")
    record["candidates"]["0"] = candidate(0.6, 0.50, 0.56, 0.60)
    assert guard_record.RULES[guard_record.SHIPPED](record) == (0, "prototypes")
    # a record made before the blend head: the margins, as the rule shipped then (round 1's prototypes lead its
    # prompts by more than the trained margin)
    record["candidates"]["1"] = candidate(0.8, 0.55, 0.70, 0.58)
    record["candidates"]["2"] = candidate(0.7, 0.54, 0.60, 0.57)
    for r in record["candidates"].values():
        del r["blend"]
    assert guard_record.RULES[guard_record.SHIPPED](record) == guard_record.RULES[guard_record.MARGINS](record) \
        == (1, "prototypes")


def _right(hits: list[bool]) -> str:
    import numpy as np

    return guard_record.packed_hits(np.array(hits))


def test_each_texts_result_reads_back_at_a_length_that_is_not_whole_bytes():
    import numpy as np

    hits = np.random.default_rng(0).random(377) < 0.7  # 377 texts: the last byte is padded
    packed = guard_record.packed_hits(hits)
    assert len(packed) == 2 * 48
    assert np.array_equal(guard_record.unpacked_hits(packed, 377), hits)


def test_the_oracles_optimism_is_the_chance_lead_of_a_resampled_best():
    """Two heads right on the same texts: no optimism. Two heads with the same accuracy on different texts: the
    oracle of a resample leads by chance. A head right on every text: it is the oracle of every resample."""
    def record(*hits: list[bool]) -> dict:
        return {"eval": len(hits[0]), "candidates": {"0": {f"h{i}": {"accuracy": sum(h) / len(h), "right": _right(h)}
                                                           for i, h in enumerate(hits)}}}

    half = [True, False] * 50
    assert guard_record.oracle_optimism(record(half, half), resamples=200) == 0.0
    other_half = [False, True] * 50
    optimism = guard_record.oracle_optimism(record(half, other_half), resamples=200)
    # two complementary heads: a resample's gap is max(0, 1 - 2a), a the share of "half"'s texts drawn (sd 0.05),
    # so about 0.1 / sqrt(2 pi) = 0.04
    assert 0.02 < optimism < 0.1
    assert guard_record.oracle_optimism(record(half, [True] * 100), resamples=200) == 0.0
    made_before = record(half, half)
    del made_before["candidates"]["0"]["h0"]["right"]
    assert guard_record.oracle_optimism(made_before) is None


def test_a_page_of_records_with_and_without_each_texts_result():
    """A draw whose records were made before and after each text's result was kept: the optimism column shows a
    dash where there is none, and the mean is over the sets that have one."""
    record = {"set": "made", "labels": ["a", "b"], "aliases": False, "pool": 4, "eval": 4, "pool_shares": [0.5, 0.5],
              "selection": {}, "seconds": 1.0, "rounds": [{"kept": 2}], "candidates": {
                  "0": {h: {"accuracy": 0.5, "macro_f1": 0.5, "right": _right([True, False, True, False])}
                        for h in ("prompts", "prototypes")},
                  "1": {h: {"accuracy": 0.75, "macro_f1": 0.75, "right": _right([True, True, True, False])}
                        for h in ("prompts", "prototypes")}}}
    for candidate in record["candidates"].values():
        for entry in candidate.values():
            entry["trained"] = entry["held_out"] = {"guard": entry["accuracy"]}
    older = json.loads(json.dumps(record)) | {"set": "older"}
    for candidate in older["candidates"].values():
        for entry in candidate.values():
            del entry["right"]
    rows = [guard_record.set_summary(record), guard_record.set_summary(older)]
    assert rows[0]["oracle_optimism"] == 0.0 and rows[1]["oracle_optimism"] is None
    page = guard_record.render_page({"seed": 10, "noise": 0.01, "sets": rows, "rules": []})
    assert "0.00 points on average over the 1 sets" in page
    assert page.splitlines()[4].endswith("| 0.00 |") and page.splitlines()[5].endswith("| – |")
    assert "negative loss" not in page  # no weight averages recorded


def test_the_soup_rules_deliver_the_averaged_weights_where_the_shipped_rule_leaves_round_0():
    def candidate(prompts: float, blend: float) -> dict:
        part = lambda guard: {"trained": {"guard": guard}}  # noqa: E731
        return {"prompts": {"accuracy": 0.6} | part(prompts), "prototypes": {"accuracy": 0.6} | part(0.0),
                "blend": {"accuracy": 0.7} | part(blend)}

    soup = {"blend": {"accuracy": 0.8}}
    record = {"candidates": {"0": candidate(0.5, 0.5), "1": candidate(0.6, 0.6), "2": candidate(0.7, 0.5)},
              "soups": {"mean_r1_r2": soup}}
    rule = guard_record.RULES["guard (trained) round 0 left by the prompts, then the mean_r1_r2 weights' blend"]
    assert guard_record.RULES[guard_record.SHIPPED](record) == (1, "blend")
    assert rule(record) == ("mean_r1_r2", "blend")
    assert guard_record.candidate_entry(record, "mean_r1_r2", "blend") is soup["blend"]
    record["candidates"]["1"] = candidate(0.4, 0.9)  # round 1's prompts fall below round 0's: round 0 is kept
    assert rule(record) == guard_record.RULES[guard_record.SHIPPED](record) == (0, "prompts")
    del record["soups"]  # a record made before the soups: the shipped rule's choice
    record["candidates"]["1"] = candidate(0.6, 0.6)
    assert rule(record) == (1, "blend")


def test_averaged_weights_are_the_mean_of_the_encoders(tiny_encoder_dir):
    import torch

    from contrastext.models import TextEncoder

    first, second = TextEncoder.from_pretrained(tiny_encoder_dir), TextEncoder.from_pretrained(tiny_encoder_dir)
    with torch.no_grad():
        for p in second.transformer.parameters():
            p.add_(1.0)
    soup = guard_record.averaged([first, second])
    for name, value in soup.transformer.state_dict().items():
        a, b = first.transformer.state_dict()[name], second.transformer.state_dict()[name]
        assert torch.allclose(value.float(), (a.float() + b.float()) / 2, atol=1e-6), name
    assert soup.backend == "torch" and soup is not second
    texts = ["a short text", "another one"]
    assert not torch.allclose(torch.from_numpy(soup.encode(texts)), torch.from_numpy(first.encode(texts)))
