"""A small fit on a Ray Train worker group against the same fit in the calling process (``train.in_process``).

    python benchmarks/fit_start.py [--pairs 64] [--repeats 3] [--model bundled:minilm]

The fit: ``--pairs`` AG News (title, description) pairs, MNR, batch 16, one epoch, 32 tokens, one CPU
worker with 2 CPUs, a checkpoint at the end and the model exported, as a self-training round does. The two
modes alternate, each ``--repeats`` times after one warm-up fit of each (imports, Ray's first tasks); the
median of each is compared. Results: ``runs/benchmarks/fit_start.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from _common import ag_news_rows, write_result  # noqa: E402


def one_fit(rows: list[dict], model: str, in_process: bool, folder: Path) -> dict:
    import ray.data

    from contrastext.config import EncoderConfig, OutputConfig, ScalingSettings, TrainConfig
    from contrastext.train import fit

    config = TrainConfig(encoder=EncoderConfig(model=model, max_length=32), batch_size=16,
                         checkpoint_every_steps=None, log_every_steps=2, shuffle_buffer_rows=0,
                         scaling=ScalingSettings(cpus_per_worker=2), in_process=in_process)
    started = time.perf_counter()
    result = fit(ray.data.from_items(rows), config, OutputConfig(storage_path=str(folder), name="fit"),
                 export_model_to=folder / "model")
    return {"seconds": time.perf_counter() - started, "steps": result.steps, "last_loss": result.last_loss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="bundled:minilm")
    args = parser.parse_args()

    from contrastext.config import RayConfig
    from contrastext.console import configure_console
    from contrastext.report import format_table
    from contrastext.runtime import init_ray

    configure_console()
    init_ray(RayConfig())
    rows = [{"anchor": title, "positive": description} for title, description in ag_news_rows(args.pairs)]
    runs: dict[str, list[dict]] = {"worker group": [], "in process": []}
    for repeat in range(args.repeats + 1):  # the first of each is a warm-up
        for mode, in_process in (("worker group", False), ("in process", True)):
            with tempfile.TemporaryDirectory(prefix="fit-start-") as tmp:
                run = one_fit(rows, args.model, in_process, Path(tmp))
            if repeat:
                runs[mode].append(run)
            print(f"{mode}{' (warm-up)' if not repeat else ''}: {run['seconds']:.2f} s, {run['steps']} steps",
                  flush=True)
    median = {mode: statistics.median(r["seconds"] for r in done) for mode, done in runs.items()}
    rows_out = [[mode, f"{median[mode]:.2f}", " ".join(f"{r['seconds']:.2f}" for r in runs[mode]),
                 str(runs[mode][0]["steps"])] for mode in runs]
    print(format_table(rows_out, ["mode", "median s", "each run (s)", "steps"]))
    speedup = median["worker group"] / median["in process"]
    saved = median["worker group"] - median["in process"]
    print(f"in process: {speedup:.1f}x faster, {saved:.1f} s less per fit")
    path = write_result("fit_start", {"pairs": args.pairs, "model": args.model, "repeats": args.repeats,
                                      "cpus": os.cpu_count(), "runs": runs, "median_s": median,
                                      "speedup": speedup, "seconds_saved_per_fit": saved})
    print(f"written {path}")


if __name__ == "__main__":
    main()
