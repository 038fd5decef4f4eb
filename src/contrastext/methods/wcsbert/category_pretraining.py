"""WC-SBERT's first stage: MNR pretraining on Wikipedia category pairs, with held-out dev pages scored by
category retrieval (MAP@3) before and after; the pretrained model is used when it beats the untrained one
(``pretrain.use``)."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pyarrow as pa

from contrastext import storage
from contrastext.config import OutputConfig
from contrastext.methods.wcsbert.config import PretrainConfig, WCSBertConfig
from contrastext.methods.wcsbert.job_run import JOB
from contrastext.stages import Stage, Timings


def dev_pages(config: WCSBertConfig, pages_dir: str) -> tuple[list[str], list[list[str]], set[int]]:
    """Held-out dev queries: pages with exactly 3 categories (their first words → their categories).

    The candidates are chosen by id and categories alone; only the chosen pages' texts are read.
    """
    from contrastext.evaluators.category_retrieval import first_words
    from contrastext.methods.wcsbert.pool import iter_pages, page_columns

    pre = config.pretrain
    # ids only, 8 bytes each: the candidates are a fifth of all pages, their category lists would grow with
    # the corpus
    candidates = np.frombuffer(array("q", (row["page_id"] for row in iter_pages(pages_dir, ["page_id", "categories"])
                                           if len(set(row["categories"] or ())) == 3)), np.int64)
    wanted = min(len(candidates), max(int(round(pre.dev_fraction * len(candidates))), pre.dev_min_pages))
    rng = np.random.default_rng(pre.train.seed)
    ids = candidates[np.sort(rng.choice(len(candidates), wanted, replace=False))] if wanted else np.zeros(0, np.int64)
    categories = page_columns(pages_dir, ids, "categories") if len(ids) else []
    chosen = [(int(i), list(dict.fromkeys(c))) for i, c in zip(ids, categories)]
    texts = page_columns(pages_dir, ids, "text") if len(ids) else []
    kept = [(c, t) for c, t in zip(chosen, texts) if (t or "").strip()]
    return ([first_words(t, pre.query_words) for _, t in kept], [cats for (_, cats), _ in kept],
            {page_id for (page_id, _), _ in kept})


def pretrain_settings(config: WCSBertConfig) -> dict[str, Any]:
    """What the pretrained model depends on (its stage's marker compares them)."""
    # the encoder as pretraining reads it: the tokens read to classify do not change it
    return {"pretrain": config.pretrain.model_dump(mode="json"),
            "encoder": config.encoder.at_length(config.pretrain.train.encoder.max_length).model_dump()}


def pretrain_stage(config: WCSBertConfig, run: str) -> dict[str, Any]:
    from contrastext.evaluators.category_retrieval import CategoryRetrievalEvaluator
    from contrastext.train import fit

    train = config.pretrain.train.model_copy(update={"encoder": config.encoder.at_length(
        config.pretrain.train.encoder.max_length)})
    stage = Stage(JOB, "pretrain", storage.join(run, "pretrain"), pretrain_settings(config))
    done = stage.finished()
    if done is not None:
        return done["result"]
    corpus = storage.join(run, "corpus")
    queries, query_categories, dev_ids = dev_pages(config, storage.join(corpus, "pages"))
    pair_files = storage.list_files(storage.join(corpus, "pairs"), ".parquet")
    if not pair_files:
        raise ValueError(f"{storage.join(corpus, 'pairs')} holds no category pairs: nothing to pretrain on")
    # the pairs stream from storage to the training workers; the driver reads at most 100,000 of them, to count
    # the batches of a fit that max_steps does not cut short
    dataset = storage.parquet_dataset(pair_files, columns=["anchor", "positive", "page_id"])
    if dev_ids:
        dataset = dataset.map_batches(_drop_pages, batch_format="pyarrow",
                                      fn_kwargs={"held": pa.array(sorted(dev_ids), pa.int64())})
    dataset = dataset.select_columns(["anchor", "positive"])
    rows = pairs_left(pair_files, dev_ids)
    if rows == 0:
        raise ValueError(f"{storage.join(corpus, 'pairs')} holds no category pairs: nothing to pretrain on")
    # read a chunk at a time as it scores: the list of every category is never held, here or on rank 0
    evaluator = CategoryRetrievalEvaluator(queries, query_categories, storage.join(corpus, "category_counts.parquet"))
    base = train.encoder.load()
    before = evaluator(base) if queries else {}
    del base
    stage.say(f"{rows} category pairs, {len(queries)} dev pages held out; MAP@3 before "
              f"{before.get('map@3', float('nan')):.3f}")
    model = storage.join(stage.folder, "model")
    stage.begin("fit", "model")  # an interrupted fit with these settings resumes; another one's is deleted
    storage.delete(storage.join(stage.folder, "evaluation"))  # measured on the model made before
    clock = Timings()
    with clock.measure("fit"):
        result = fit(dataset, train, OutputConfig(storage_path=stage.folder, name="fit"),
                     eval_fn=evaluator if queries else None, rows=rows, export_model_to=model)
        after = evaluator(train.encoder.load(model)) if queries else {}
    out = {"pairs": rows, "dev_pages": len(queries), "steps": result.steps,
           "loss": result.mean_loss, "dev_before": before, "dev_after": after,
           "seconds": clock["fit"], "model": model}
    return stage.mark_done(out)


def pairs_left(pair_files: list[str], held: set[int]) -> int:
    """Pairs the pretraining reads: the files' row counts (parquet footers) less the held-out pages' pairs.

    Only ``page_id`` is read, and only with pages held out; ``Dataset.count()`` would read and filter every
    pair, texts included, once more before the training reads them.
    """
    import pyarrow.compute as pc

    rows = sum(storage.parquet_file(f).metadata.num_rows for f in pair_files)
    if held:
        value_set = pa.array(sorted(held), pa.int64())
        for f in pair_files:
            for batch in storage.parquet_file(f).iter_batches(columns=["page_id"], batch_size=65_536):
                rows -= pc.sum(pc.is_in(batch.column(0), value_set=value_set)).as_py() or 0
    return rows


def _drop_pages(batch: pa.Table, held: pa.Array) -> pa.Table:
    import pyarrow.compute as pc

    return batch.filter(pc.invert(pc.is_in(batch.column("page_id"), value_set=held)))


#: MAP@3 values closer than this are equal (a tie keeps the untrained model)
MAP_TIE = 1e-9


def pretrained_model_is_used(settings: PretrainConfig, result: dict[str, Any]) -> bool:
    if settings.use == "always":
        return True
    before, after = result["dev_before"].get("map@3"), result["dev_after"].get("map@3")
    if before is None or after is None:  # no dev pages: nothing says it did not help
        return True
    # MAP@3 is a mean of fractions: the same value reached by two models may differ in its last bit
    return after - before > MAP_TIE
