"""The WC-SBERT job at test size, one preset for every test that runs the job on the tiny random encoder.

``tiny_settings`` gives the job's settings as ``--set`` strings: the preset's fixed part (two steps a stage,
small batches, the news labels below) and the paths a test chooses. A test adds only what it is about.
"""

from __future__ import annotations

import json
from pathlib import Path

#: two labelled texts per label; an evaluation file holds each of them ``copies`` times
NEWS = [("Sports", "the team won the football match and the cup final"),
        ("Sports", "a tennis player reached the final of the open championship"),
        ("Business", "shares fell as the company reported lower profits and sales"),
        ("Business", "the bank raised interest rates and the market dropped"),
        ("World", "the president met foreign ministers to discuss the war and peace talks"),
        ("World", "elections were held after the government collapsed in the capital"),
        ("Sci/Tech", "researchers released new software for faster computer chips"),
        ("Sci/Tech", "a space probe sent back images of the planet to scientists")]

TEMPLATE = "This topic is talk about {label}"
#: the news labels of the texts above, in place of the default's Vital-article topics
NEWS_LABELS = ["labels.names=[World, Sports, Business, Sci/Tech]", "labels.aliases={Sci/Tech: [Science, Technology]}",
               f"labels.template={TEMPLATE}"]

#: two steps per training stage, small batches, plots on: the preset's fixed part
TINY = ["pretrain.train.max_steps=2", "pretrain.train.batch_size=16", "pretrain.dev_min_pages=5",
        "rounds.rounds=2", "rounds.train.max_steps=2", "rounds.train.batch_size=8",
        "rounds.selection.top_fraction=0.8", "encode.batch_size=16", "plots=true"]


def news_rows(copies: int = 3) -> list[tuple[str, str]]:
    """(text, label) of every NEWS text ``copies`` times, each copy marked with its number."""
    return [(f"{text} (report {i})", label) for i in range(copies) for label, text in NEWS]


def labelled_file(path: Path, copies: int = 3) -> Path:
    """A JSON-lines file of ``news_rows(copies)`` with ``text`` and ``label`` columns."""
    path.write_text("".join(json.dumps({"text": text, "label": label}) + "\n"
                            for text, label in news_rows(copies)), encoding="utf-8")
    return path


def evaluation_on(path: Path | str) -> list[str]:
    """The settings that make a labelled JSON-lines file the evaluation set, every row of it."""
    return ["evaluation.half=null", "evaluation.max_rows=null", f"evaluation.texts.path={path}",
            "evaluation.texts.dataset=null", "evaluation.texts.columns=null", "evaluation.texts.text_columns=[text]",
            "evaluation.texts.label_column=label", "evaluation.texts.label_names=null",
            "evaluation.texts.unescape_breaks=false"]


def tiny_settings(*, model: str | Path, storage_path: str | Path, name: str = "wcsbert",
                  dump: str | Path | None = None, evaluation: str | Path | None = None) -> list[str]:
    """The preset with a test's paths: the encoder, where runs go, the dump for a Wikipedia pool (else the
    default text pool), and a labelled evaluation file (else the default's)."""
    sets = [*NEWS_LABELS, *TINY, f"encoder.model={model}", f"output.storage_path={storage_path}",
            f"output.name={name}"]
    if dump is not None:
        sets += ["pool.source=wikipedia", f"corpus.dump={dump}"]
    if evaluation is not None:
        sets += evaluation_on(evaluation)
    return sets
