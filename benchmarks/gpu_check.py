"""GPU check: encode, train, serve and scale throughput on one GPU, as one table, in at most 9 minutes.

    benchmarks/gpu_check.sh [--dry-run] [--out PATH]

Each figure comes from an existing benchmark run in its own subprocess with a time limit (its JSON is
read back from ``BENCHMARK_OUT``):

- encode: ``encode.py`` (TextEncoder bf16, TextEncoder fp32, plain sentence-transformers fp32), texts/s;
- train: ``train_step.py --ray-only --use-gpu``, Ray Train MNR steps/s with one GPU worker;
- phrase pretraining: ``train_step.py --objective phrase --use-gpu``, UCTopic's phrase objective steps/s;
- serve: ``serve.py --use-gpu``, requests/s with dynamic batching over without;
- predict: ``predict.py --rows N --skip-memory [--use-gpu]``, the predict job's rows/s with one actor, and its
  ratio to a plain loop of the same model on the same device.
- scale: ``scale.py --stages encode --pages N --use-gpu --root DIR --out FILE``, the encode stage in
  pages/s ("not run" when ``scale.py`` is absent).

``--dry-run`` (automatic without CUDA) runs the same rows on the CPU with tiny sizes; where the CPU has no
native bf16, the bf16 row shows the fp32 figure, marked as a stand-in. Progress goes to stderr, the table
to stdout, and the same table as JSON to ``--out``. Exit status 0 only if every row has a figure (the
scale row may be "not run" only when ``scale.py`` is absent). Without AG News the benchmarks run on
synthetic texts (``BENCHMARK_SYNTHETIC_IF_MISSING``), and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from _common import AG_NEWS_TEST, SYNTHETIC_IF_MISSING  # noqa: E402

BUDGET_S = 540.0
GRACE_S = 15.0  # after SIGINT on a timeout, before SIGKILL: lets Ray shut down
KILL_WAIT_S = 5.0

# Per benchmark: arguments for the full check and for the dry run, and its time limit in seconds.
SIZES: dict[str, dict[str, list[str]]] = {
    "encode": {"full": ["--texts", "2000", "--batch-size", "64", "--max-length", "256", "--repeats", "3"],
               "dry": ["--texts", "32", "--batch-size", "16", "--max-length", "64", "--repeats", "1"]},
    "train": {"full": ["--pairs", "2048", "--batch-size", "64", "--max-length", "128", "--log-every", "8"],
              "dry": ["--pairs", "64", "--batch-size", "8", "--max-length", "32", "--log-every", "4"]},
    "serve": {"full": ["--requests", "1000", "--clients", "16", "--max-batch-size", "16", "--threads", "2"],
              "dry": ["--requests", "32", "--clients", "4", "--max-batch-size", "4", "--threads", "1"]},
    "scale": {"full": ["--pages", "20000"], "dry": ["--pages", "200"]},
    "predict": {"full": ["--rows", "20000", "--skip-memory"],
                "dry": ["--rows", "200", "--chunk-rows", "64", "--batch-size", "16", "--skip-memory"]},
}
LIMIT_S = {"encode": 90.0, "train": 150.0, "phrase": 90.0, "serve": 150.0, "scale": 90.0, "predict": 120.0}


@dataclass
class Row:
    check: str
    device: str
    precision: str
    value: float | None
    unit: str
    note: str = ""


@dataclass
class Outcome:
    """What one benchmark subprocess left: its JSON result, or why there is none."""

    result: dict[str, Any] | None
    reason: str
    seconds: float


@dataclass
class Plan:
    dry_run: bool
    device: str  # "cuda" or "cpu"
    device_name: str
    bf16: bool  # whether bf16 is measured (else fp32 stands in)
    work_dir: Path
    deadline: float

    @property
    def size_key(self) -> str:
        return "dry" if self.dry_run else "full"

    def gpu_flag(self) -> list[str]:
        return [] if self.dry_run else ["--use-gpu"]


def progress(message: str) -> None:
    print(f"gpu_check: {message}", file=sys.stderr, flush=True)


def make_plan(dry_run: bool, work_dir: Path, started: float) -> Plan:
    import torch

    from contrastext.models import cpu_has_native_bf16

    cuda = torch.cuda.is_available()
    if not dry_run and not cuda:
        progress("no CUDA device: dry run on the CPU")
    dry_run = dry_run or not cuda
    device = "cpu" if dry_run else "cuda"
    name = torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({os.cpu_count()} cores)"
    bf16 = device == "cuda" or cpu_has_native_bf16()
    return Plan(dry_run, device, name, bf16, work_dir, started + BUDGET_S)


def child_env(plan: Plan, out_dir: Path) -> dict[str, str]:
    env = {**os.environ, "BENCHMARK_OUT": str(out_dir), SYNTHETIC_IF_MISSING: "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if plan.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the dry run stays on the CPU even on a GPU machine
    return env


def stop(process: subprocess.Popen) -> None:
    """Interrupt the benchmark's process group (its finally blocks shut Ray down), then kill what is left."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=KILL_WAIT_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:160] if lines else "no output"


def run_benchmark(plan: Plan, label: str, script: str, args: list[str], result_name: str,
                  limit_s: float) -> Outcome:
    """Run ``benchmarks/<script> <args>`` within ``limit_s`` (and the budget); read the
    ``<result_name>.json`` it writes."""
    out_dir = plan.work_dir / label
    out_dir.mkdir(parents=True, exist_ok=True)
    log = plan.work_dir / f"{label}.log"
    limit = min(limit_s, plan.deadline - time.monotonic() - GRACE_S - KILL_WAIT_S)
    if limit < 10:
        return Outcome(None, "out of time (9-minute budget)", 0.0)
    command = [sys.executable, str(BENCH_DIR / script), *args]
    started = time.monotonic()
    with open(log, "w") as sink:
        sink.write(" ".join(command) + "\n")
        sink.flush()
        process = subprocess.Popen(command, cwd=BENCH_DIR.parent, env=child_env(plan, out_dir), stdout=sink,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stop(process)
            return Outcome(None, f"timed out after {limit:.0f} s (log {log})", time.monotonic() - started)
    seconds = time.monotonic() - started
    result_file = out_dir / f"{result_name}.json"
    if code != 0:
        return Outcome(None, f"exit {code}: {last_line(log)}", seconds)
    if not result_file.is_file():
        return Outcome(None, f"no {result_file.name} written (log {log})", seconds)
    return Outcome(json.loads(result_file.read_text()), "", seconds)


def not_run(check: str, plan: Plan, precision: str, unit: str, reason: str) -> Row:
    return Row(check, plan.device, precision, None, unit, f"not run: {reason}")


def encode_rows(plan: Plan) -> list[Row]:
    """TextEncoder in bf16 and fp32, and plain sentence-transformers (fp32), from one or two encode.py runs."""
    base = [*SIZES["encode"][plan.size_key], "--device", plan.device]
    limit = LIMIT_S["encode"]
    fp32 = run_benchmark(plan, "encode-fp32", "encode.py", [*base, "--precision", "fp32"], "encode", limit)
    progress(f"encode fp32: {describe(fp32)}")
    unit = "texts/s"
    rows = []
    if plan.bf16:
        bf16 = run_benchmark(plan, "encode-bf16", "encode.py", [*base, "--precision", "bf16"], "encode", limit)
        progress(f"encode bf16: {describe(bf16)}")
        rows.append(figure("encode: TextEncoder", plan, "bf16", unit, bf16, lambda r: r["ours_texts_per_s"],
                           lambda r: "sentence-transformers in bf16 autocast: "
                                     f"{r['sentence_transformers_texts_per_s']:,.0f}"))
    else:
        rows.append(figure("encode: TextEncoder", plan, "fp32 (bf16 stand-in)", unit, fp32,
                           lambda r: r["ours_texts_per_s"],
                           lambda r: "no native bf16 on this CPU: the fp32 figure below"))
    rows.append(figure("encode: TextEncoder", plan, "fp32", unit, fp32, lambda r: r["ours_texts_per_s"],
                       lambda r: f"{r['texts']} texts, batch {r['batch_size']}, max_length {r['max_length']}"))
    rows.append(figure("encode: sentence-transformers", plan, "fp32", unit, fp32,
                       lambda r: r["sentence_transformers_texts_per_s"],
                       lambda r: f"TextEncoder / sentence-transformers {r['ratio_ours_over_theirs']:.2f}"))
    return rows


def train_row(plan: Plan) -> Row:
    args = [*SIZES["train"][plan.size_key], "--workers", "1", "--ray-only", *plan.gpu_flag()]
    outcome = run_benchmark(plan, "train", "train_step.py", args, "train_step", LIMIT_S["train"])
    progress(f"train: {describe(outcome)}")
    precision = "bf16 autocast" if plan.bf16 else "fp32"  # training's own rule: bf16 where it is native
    return figure(f"train: Ray Train MNR, 1 {plan.device.upper()} worker", plan, precision, "steps/s", outcome,
                  lambda r: r["ray_train"]["steps_per_s"],
                  lambda r: f"batch {r['global_batch']}, {r['ray_train']['pairs_per_s']:,.0f} pairs/s, "
                            f"{r['ray_train']['wall_s_incl_startup']:.0f} s with Ray start-up")


def phrase_row(plan: Plan) -> Row:
    """UCTopic's phrase objective (span pooling, masked mentions) on one worker: pretraining's step rate."""
    args = [*SIZES["train"][plan.size_key], "--workers", "1", "--objective", "phrase", *plan.gpu_flag()]
    outcome = run_benchmark(plan, "phrase", "train_step.py", args, "train_step_phrase", LIMIT_S["phrase"])
    progress(f"phrase pretraining: {describe(outcome)}")
    precision = "bf16 autocast" if plan.bf16 else "fp32"
    return figure(f"train: UCTopic phrase pretraining, 1 {plan.device.upper()} worker", plan, precision, "steps/s",
                  outcome, lambda r: r["ray_train"]["steps_per_s"],
                  lambda r: f"batch {r['global_batch']}, {r['ray_train']['pairs_per_s']:,.0f} pairs/s")


def serve_row(plan: Plan) -> Row:
    args = [*SIZES["serve"][plan.size_key], "--memory-requests", "0", *plan.gpu_flag()]
    outcome = run_benchmark(plan, "serve", "serve.py", args, "serve", LIMIT_S["serve"])
    progress(f"serve: {describe(outcome)}")
    precision = outcome.result["precision"] if outcome.result else "auto"

    def note(r: dict) -> str:
        rates = {model: statistics.median(phase["requests_per_s"] for phase in r["phases"][model])
                 for model in ("batched", "unbatched")}
        return (f"{rates['batched']:,.0f} vs {rates['unbatched']:,.0f} requests/s, "
                f"mean batch {r['mean_requests_per_batch']:.1f}")

    return figure("serve: batched / unbatched", plan, precision, "ratio", outcome,
                  lambda r: r["ratio_batched_over_unbatched"], note)


def predict_row(plan: Plan) -> Row:
    """The predict job with one actor on the device against a plain loop of the same model there."""
    args = [*SIZES["predict"][plan.size_key], *plan.gpu_flag()]
    outcome = run_benchmark(plan, "predict", "predict.py", args, "predict", LIMIT_S["predict"])
    progress(f"predict: {describe(outcome)}")
    precision = "fp32" if plan.dry_run else "bf16 autocast"
    return figure(f"predict: 1 {plan.device.upper()} actor, WCSBert", plan, precision, "rows/s", outcome,
                  lambda r: r["throughput"]["job"]["steady_rows_per_s"] or r["throughput"]["job"]["rows_per_s"],
                  lambda r: f"{r['throughput']['rows']:,} rows; job / plain loop "
                            f"{r['throughput']['ratio_end_to_end']:.2f} end to end; "
                            f"10M on 8: {r['projection_10m_on_8']['hours']:.1f} h")


def scale_row(plan: Plan) -> tuple[Row, bool]:
    """The scale benchmark's encode stage; the flag says whether its absence excuses a missing figure."""
    check, unit = "scale: encode stage", "pages/s"
    if not (BENCH_DIR / "scale.py").is_file():
        progress("scale: benchmarks/scale.py absent")
        return not_run(check, plan, "-", unit, "benchmarks/scale.py absent"), True
    root = plan.work_dir / "scale-root"  # its own corpus and runs: never another run's scratch folder
    args = ["--stages", "encode", *SIZES["scale"][plan.size_key], *plan.gpu_flag(),
            "--root", str(root), "--out", str(plan.work_dir / "scale" / "scale.json")]
    outcome = run_benchmark(plan, "scale", "scale.py", args, "scale", LIMIT_S["scale"])
    shutil.rmtree(root, ignore_errors=True)
    progress(f"scale: {describe(outcome)}")
    return figure(check, plan, "-", unit, outcome, lambda r: scale_encode_stage(r)["rows_per_s"],
                  lambda r: f"{r['results'][0]['pages']:,} synthetic pages, "
                            f"{r['results'][0]['settings']['encoder']} encoder, "
                            f"{scale_encode_stage(r)['seconds']:.0f} s"), False


def scale_encode_stage(output: dict) -> dict[str, Any]:
    """The encode stage's record in scale.py's JSON: ``results[0].stages[]`` whose ``stage`` starts "encode"."""
    stages = [s for s in output["results"][0]["stages"] if s["stage"].startswith("encode")]
    if not stages:
        raise KeyError("no encode stage in scale.py's results")
    return stages[0]


def figure(check: str, plan: Plan, precision: str, unit: str, outcome: Outcome,
           value: Callable[[dict], float], note: Callable[[dict], str]) -> Row:
    """A row from a benchmark's result, or a "not run" row saying why there is no figure."""
    if outcome.result is None:
        return not_run(check, plan, precision, unit, outcome.reason)
    try:
        return Row(check, plan.device, precision, float(value(outcome.result)), unit, note(outcome.result))
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
        return not_run(check, plan, precision, unit, f"unexpected result: {error!r}")


def describe(outcome: Outcome) -> str:
    status = "done" if outcome.result is not None else f"failed ({outcome.reason})"
    return f"{status} in {outcome.seconds:.0f} s"


def render(rows: list[Row], title: str) -> str:
    from contrastext.report import format_table

    cells = [[r.check, r.device, r.precision, r.value if r.value is not None else "-", r.unit, r.note]
             for r in rows]
    return f"{title}\n" + format_table(cells, headers=["check", "device", "precision", "value", "unit", "note"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU (automatic without CUDA)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON of the table (default: gpu_check.json in a new temporary folder)")
    args = parser.parse_args()
    started = time.monotonic()
    work_dir = Path(tempfile.mkdtemp(prefix="contrastext-gpu-check-"))
    out = args.out or work_dir / "gpu_check.json"
    plan = make_plan(args.dry_run, work_dir, started)
    texts = "AG News" if AG_NEWS_TEST.is_file() else "synthetic (AG News absent)"
    progress(f"{'dry run' if plan.dry_run else 'full check'} on {plan.device_name}; logs in {work_dir}")

    rows = encode_rows(plan)
    rows.append(train_row(plan))
    rows.append(phrase_row(plan))
    rows.append(serve_row(plan))
    rows.append(predict_row(plan))
    scale, scale_excused = scale_row(plan)
    rows.append(scale)

    ok = all(r.value is not None for r in rows[:-1]) and (scale.value is not None or scale_excused)
    wall = time.monotonic() - started
    mode = "dry run (tiny sizes)" if plan.dry_run else "full"
    title = f"GPU check, {mode}, {plan.device_name}, texts: {texts}, {wall:.0f} s: {'ok' if ok else 'FAILED'}"
    print(render(rows, title), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"mode": "dry-run" if plan.dry_run else "full", "device": plan.device,
                               "device_name": plan.device_name, "texts": texts, "wall_s": wall, "ok": ok,
                               "logs": str(work_dir), "rows": [asdict(r) for r in rows]}, indent=2))
    progress(f"table written to {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
