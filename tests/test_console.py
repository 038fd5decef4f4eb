"""A job's console: its own lines and tables; Ray's internals only with --verbose (contrastext.console)."""

from __future__ import annotations

import itertools
import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contrastext import console
from conftest import wikipedia_sample

REPO_ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[")
RAY_INTERNALS = ("(MapBatches", "Running Dataset", "Starting execution of Dataset", "INFO worker.py",
                 "Started a local Ray instance", "logging_progress.py", "streaming_executor.py",
                 "Token authentication", "(raylet)", "pid=")


# ------------------------------------------------------------------------------------------- no Ray
def test_own_line_keeps_our_marked_lines_cleaned():
    assert console.own_line("[contrastext] step 10/40 epoch 0 loss 1.2 rows/s 30.0") == \
        "step 10/40 epoch 0 loss 1.2 rows/s 30.0"
    assert console.own_line("\x1b[36m(RayTrainWorker pid=1)\x1b[0m [contrastext] checkpoint at step 3") == \
        "checkpoint at step 3"
    assert console.own_line("\r[contrastext] old\r[contrastext] redrawn\r") == "redrawn"
    for other in ("Reporting training result 1: TrainingReport(...)", "Moving model to device: cpu",
                  "\rLoading weights: 100%|##########| 103/103", "[contrastext]", ""):
        assert console.own_line(other) is None


def test_worker_line_filter_shows_each_marked_line_once_per_process():
    shown: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record):
            shown.append(record.getMessage())

    logger = logging.getLogger("test_console.workers")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(Collect())
    forward = console.WorkerLineFilter(logger)
    # Ray Train's print redirection: the same print on stdout and (as a log record) on stderr
    forward({"pid": 7, "is_err": False, "lines": ["[contrastext] step 1/2 loss 0.5", "noise",
                                                  "[contrastext] checkpoint at step 1"]})
    forward({"pid": 7, "is_err": True, "lines": ["[contrastext] step 1/2 loss 0.5",
                                                 "Reporting training result 1: ...",
                                                 "[contrastext] checkpoint at step 1"]})
    forward({"pid": 8, "is_err": False, "lines": ["[contrastext] step 1/2 loss 0.5"]})  # another worker
    forward({"pid": 7, "is_err": False, "lines": ["[contrastext] step 2/2 loss 0.4"]})
    assert shown == ["step 1/2 loss 0.5", "checkpoint at step 1", "step 1/2 loss 0.5", "step 2/2 loss 0.4"]


def test_short_format_names_level_and_logger_only_for_warnings():
    formatter = console.ShortFormatter()
    info = logging.LogRecord("contrastext.x", logging.INFO, __file__, 1, "stage %s done", ("a",), None)
    warning = logging.LogRecord("contrastext.x", logging.WARNING, __file__, 1, "careful", (), None)
    assert re.fullmatch(r"\d\d:\d\d:\d\d stage a done", formatter.format(info))
    assert re.fullmatch(r"\d\d:\d\d:\d\d WARNING contrastext\.x: careful", formatter.format(warning))


@pytest.fixture
def restore_logging(monkeypatch):
    root, project = logging.getLogger(), logging.getLogger("contrastext")
    saved = (root.level, list(root.handlers), project.level, list(project.handlers), project.propagate)
    monkeypatch.setattr(console, "_settings", None)
    monkeypatch.setattr(console, "_quiet_hugging_face", lambda: None)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    project.setLevel(saved[2])
    project.handlers[:] = saved[3]
    project.propagate = saved[4]


def test_ray_quiet_follows_the_console_setting(restore_logging):
    assert console.ray_quiet() is False  # never configured: Ray prints as usual
    assert console.ray_quiet(verbose=False) is True
    console.configure_console(verbose=False, stream=sys.stderr)
    assert console.console_settings() == console.ConsoleSettings(verbose=False)
    assert console.ray_quiet() is True and console.ray_quiet(verbose=True) is False
    console.configure_console(verbose=True)
    assert console.ray_quiet() is False


def test_quiet_console_prints_project_info_and_only_warnings_of_others(restore_logging, tmp_path):
    import io

    stream = io.StringIO()
    console.configure_console(verbose=False, stream=stream)
    console.configure_console(verbose=False, stream=stream)  # a second call adds no second handler
    logging.getLogger("contrastext.pipelines.demo").info("stage one done")
    logging.getLogger("some.library").info("chatter")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" stage one done")
    assert logging.getLogger().level == logging.WARNING


def test_ray_warnings_go_to_rays_logger_others_to_the_console(monkeypatch):
    import warnings

    from ray.util.annotations import RayDeprecationWarning

    shown, logged = [], []

    class Collect(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    monkeypatch.setattr(warnings, "showwarning", lambda message, *rest, **kw: shown.append(str(message)))
    monkeypatch.setattr(console, "_original_showwarning", None)
    handler = Collect()
    logging.getLogger("ray").addHandler(handler)
    try:
        console._route_ray_warnings()
        warnings.showwarning(RayDeprecationWarning("old Ray API"), RayDeprecationWarning, "/x/job.py", 3)
        warnings.showwarning(UserWarning("ours"), UserWarning, "/x/job.py", 4)
    finally:
        logging.getLogger("ray").removeHandler(handler)
    assert shown == ["ours"]
    assert len(logged) == 1 and "old Ray API" in logged[0]


def test_raylet_warnings_go_to_rays_logger_its_errors_still_print(monkeypatch):
    import ray._private.worker as ray_worker

    printed, logged = [], []

    class Collect(logging.Handler):
        def emit(self, record):
            logged.append(record.getMessage())

    monkeypatch.setattr(ray_worker, "print_to_stdstream", lambda data, ignore_prefix=False: printed.append(data))
    handler = Collect()
    logging.getLogger("ray").addHandler(handler)
    try:
        console._route_raylet_warnings()
        console._route_raylet_warnings()  # wrapped once, however often Ray is started
        ray_worker.print_to_stdstream({"lines": ["\x1b[33mWARNING: 8 PYTHON worker processes have been started"],
                                       "pid": "raylet", "is_err": False})
        died = {"lines": ["A worker died or was killed while executing a task"], "pid": "raylet", "is_err": False}
        ray_worker.print_to_stdstream(died)
        console.forget_ray_forwarding()
        assert not getattr(ray_worker.print_to_stdstream, "wrapped", None)
    finally:
        logging.getLogger("ray").removeHandler(handler)
    assert printed == [died]
    assert logged == ["raylet: WARNING: 8 PYTHON worker processes have been started"]


def test_every_job_takes_verbose():
    from contrastext.cli import JOBS, build_parser

    for name in JOBS:
        args = build_parser().parse_args([name, "--verbose"])
        assert args.verbose is True
        assert build_parser().parse_args([name]).verbose is False


# --------------------------------------------------------------------------------- real jobs, real Ray
def _run(arguments: list[str], timeout: int = 600) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, *arguments], check=False, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-5000:]
    return proc.stdout


def _dump_sample() -> Path:
    from contrastext.data.samples import DEFAULT_SAMPLE

    return wikipedia_sample(DEFAULT_SAMPLE)  # fetched into the cache where no data folder has it


def _assert_no_repeats(lines: list[str]) -> None:
    for before, after in itertools.pairwise(lines):
        assert not (before.strip() and before == after), f"printed twice: {before!r}"


@pytest.mark.slow
@pytest.mark.ray
def test_quiet_job_prints_its_stages_and_table_and_no_ray_internals(tmp_path):
    out = _run(["jobs/build_corpus.py", "--set", f"dump={_dump_sample()}",
                "--set", f"output.storage_path={tmp_path}"])
    lines = out.splitlines()
    # the job's own stage lines, the one line on Ray's logs, the table
    assert any(re.fullmatch(r"\d\d:\d\d:\d\d starting a local Ray with \d+ logical CPUs", line) for line in lines)
    where = [line for line in lines if "Ray's logs and the workers' output:" in line]
    assert len(where) == 1, out
    logs_dir = re.search(r"output: (\S+?);? ", where[0]).group(1)
    assert os.path.isdir(logs_dir)
    assert any("read unit 1/1 done" in line for line in lines), out
    assert any(line.startswith("build_corpus ") and "value" in line for line in lines), out
    assert any(line.startswith("pairs written (after dedup)") for line in lines), out
    # no Ray internals, no terminal escapes, nothing twice
    assert not ANSI.search(out), out
    for internal in RAY_INTERNALS:
        assert internal not in out, f"{internal!r} on the console:\n{out}"
    _assert_no_repeats(lines)
    # ... they are in the session's files
    driver_logs = list(Path(logs_dir).glob("contrastext-driver-*.log"))
    assert driver_logs and "Started a local Ray instance" in driver_logs[0].read_text(encoding="utf-8")
    assert (Path(logs_dir) / "ray-data" / "ray-data.log").is_file()


@pytest.mark.slow
@pytest.mark.ray
def test_verbose_job_prints_what_ray_prints(tmp_path):
    out = _run(["jobs/build_corpus.py", "--verbose", "--set", f"dump={_dump_sample()}",
                "--set", f"output.storage_path={tmp_path}"])
    assert "Started a local Ray instance" in out and "worker.py" in out
    assert "Starting execution of Dataset" in out or "Running Dataset" in out
    assert "Ray's logs and the workers' output:" not in out
    assert "pairs written (after dedup)" in out


@pytest.mark.slow
@pytest.mark.ray
def test_quiet_ray_shows_the_workers_marked_lines_once_and_nothing_else(tmp_path):
    script = tmp_path / "task.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        import ray
        from contrastext.config import RayConfig
        from contrastext.console import configure_console
        from contrastext.runtime import init_ray

        configure_console(verbose=False)
        init_ray(RayConfig(num_cpus=2))

        @ray.remote
        def work():
            print("[contrastext] step 1/1 from the task", flush=True)
            print("[contrastext] step 1/1 from the task", file=sys.stderr, flush=True)
            print("something Ray-ish from the task", flush=True)
            return 1

        assert ray.get(work.remote()) == 1
        time.sleep(5)  # the workers' output reaches the driver asynchronously
        print("finished")
    """), encoding="utf-8")
    out = _run([str(script)])
    lines = out.splitlines()
    assert [line for line in lines if line.endswith("step 1/1 from the task")] and \
        sum(line.endswith("step 1/1 from the task") for line in lines) == 1, out
    assert "something Ray-ish" not in out and "[contrastext]" not in out
    assert not ANSI.search(out), out
    assert lines[-1] == "finished"
