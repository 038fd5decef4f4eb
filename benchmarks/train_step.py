"""Training throughput: the Ray Train loop with N CPU workers vs a plain single-process loop.

    python benchmarks/train_step.py [--pairs 1024] [--batch-size 32] [--workers 2] [--max-length 64]
                                    [--log-every 4] [--use-gpu] [--ray-only] [--objective phrase]

Same model (bundled MiniLM), same real pairs (AG News title → description), same loss (MNR), same global
batch (the Ray run splits it across workers, so each step does the same work). Steady-state pairs/s
comes from the steps after the first log window of each run; Ray's start-up is reported apart.
``--use-gpu`` gives each Ray Train worker a GPU; ``--ray-only`` leaves out the single-process baseline.
``--objective phrase`` trains UCTopic's phrase objective instead (Ray only): the title's and the description's
first words as the two mentions, masked as in pretraining, span-pooled by the ``PhraseEncoder``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from _common import ag_news_rows, write_result  # noqa: E402

from contrastext.config import EncoderConfig, OutputConfig, RayConfig, ScalingSettings, TrainConfig  # noqa: E402
from contrastext.losses import MultipleNegativesRankingLoss  # noqa: E402
from contrastext.models import DEFAULT_MODEL, TextEncoder  # noqa: E402
from contrastext.report import format_table  # noqa: E402


def single_process(pairs: list[tuple[str, str]], batch_size: int, max_length: int, warmup_steps: int,
                   device: str = "cpu") -> dict:
    encoder = TextEncoder.from_pretrained(DEFAULT_MODEL, max_length=max_length, device=device)
    encoder.train()
    optimizer = torch.optim.AdamW(encoder.parameters(), lr=2e-5)
    loss_fn = MultipleNegativesRankingLoss()
    timed_rows, started = 0, None
    for step, start in enumerate(range(0, len(pairs), batch_size)):
        if step == warmup_steps:
            started = time.perf_counter()
        batch = pairs[start: start + batch_size]
        embeddings = encoder.embed([a for a, _ in batch] + [p for _, p in batch])
        loss = loss_fn(*embeddings.split(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), 1.0)
        optimizer.step()
        if started is not None:
            timed_rows += len(batch)
    return {"pairs_per_s": timed_rows / (time.perf_counter() - started), "threads": torch.get_num_threads()}


def phrase_rows(pairs: list[tuple[str, str]]) -> list[dict]:
    """UCTopic pair rows: each text's first word as its mention, both masked (the pretraining's usual case)."""
    rows = []
    for i, (a, p) in enumerate(pairs):
        a_end, p_end = len(a.split()[0]), len(p.split()[0])
        rows.append({"anchor": a, "anchor_start": 0, "anchor_end": a_end, "anchor_mask": True,
                     "positive": p, "positive_start": 0, "positive_end": p_end, "positive_mask": True,
                     "key": f"pair:{i}", "topic": -1})
    return rows


def ray_train(pairs: list[tuple[str, str]], batch_size: int, workers: int, max_length: int,
              log_every: int, use_gpu: bool = False, objective: str = "embedding") -> dict:
    import ray.data

    from contrastext.runtime import init_ray
    from contrastext.train import fit

    started = time.perf_counter()
    init_ray(RayConfig())
    scaling = ScalingSettings(num_workers=workers, use_gpu=use_gpu)
    config = TrainConfig(encoder=EncoderConfig(model=DEFAULT_MODEL, max_length=max_length),
                         batch_size=batch_size // workers, scaling=scaling, objective=objective,
                         checkpoint_every_steps=None, log_every_steps=log_every, shuffle_buffer_rows=0)
    if objective == "phrase":
        from contrastext.methods.uctopic.objective import PhraseObjective  # noqa: F401 -- registers the objective

        rows = phrase_rows(pairs)
    else:
        rows = [{"anchor": a, "positive": p} for a, p in pairs]
    with tempfile.TemporaryDirectory() as tmp:
        result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=tmp, name="bench"))
    wall = time.perf_counter() - started
    windows = result.window_rows_per_s
    steady = windows[1:] or windows  # the first window includes compilation and data start-up
    pairs_per_s = sum(steady) / len(steady)
    return {"pairs_per_s": pairs_per_s, "steps_per_s": pairs_per_s / batch_size, "windows_pairs_per_s": windows,
            "wall_s_incl_startup": wall, "wall_pairs_per_s": len(rows) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=32, help="global batch of both runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--log-every", type=int, default=4, help="steps per throughput window")
    parser.add_argument("--use-gpu", action="store_true", help="one GPU per Ray Train worker")
    parser.add_argument("--ray-only", action="store_true", help="skip the single-process baseline")
    parser.add_argument("--objective", choices=["embedding", "phrase"], default="embedding",
                        help="phrase: UCTopic's phrase objective (implies --ray-only)")
    args = parser.parse_args()
    args.ray_only = args.ray_only or args.objective == "phrase"
    pairs = ag_news_rows(args.pairs)
    device = "cuda" if args.use_gpu else "cpu"
    plain = None if args.ray_only else single_process(pairs, args.batch_size, args.max_length, args.log_every,
                                                      device)
    distributed = ray_train(pairs, args.batch_size, args.workers, args.max_length, args.log_every, args.use_gpu,
                            args.objective)
    ratio = distributed["pairs_per_s"] / plain["pairs_per_s"] if plain else None
    result = {"pairs": len(pairs), "global_batch": args.batch_size, "workers": args.workers,
              "use_gpu": args.use_gpu, "max_length": args.max_length, "cpu_count": os.cpu_count(),
              "objective": args.objective,
              "single_process": plain, "ray_train": distributed, "ratio_ray_over_single": ratio}
    kind = "GPU" if args.use_gpu else "CPU"
    rows = [
        [f"Ray Train, {args.workers} {kind} workers, steady state", distributed["pairs_per_s"]],
        ["Ray Train incl. Ray + worker start-up", distributed["wall_pairs_per_s"]],
    ]
    if plain:
        rows.insert(0, [f"single process ({plain['threads']} torch threads)", plain["pairs_per_s"]])
        rows.append(["ratio Ray / single (steady state)", ratio])
    loss = "phrase InfoNCE (UCTopic)" if args.objective == "phrase" else "MNR"
    title = f"{loss}, global batch {args.batch_size}, {len(pairs)} AG News pairs (pairs/s)"
    print(format_table(rows, headers=[title, "value"]))
    name = "train_step_phrase" if args.objective == "phrase" else "train_step"
    print(f"written to {write_result(name, result)}")


if __name__ == "__main__":
    main()
