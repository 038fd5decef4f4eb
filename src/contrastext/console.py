"""What a job prints: its own stage and progress lines and its tables; Ray's internals go to log files.

Quiet (every job's default):

- the ``contrastext`` loggers print at INFO in a short format (``12:04:31 message``); other libraries'
  loggers only from WARNING;
- Ray's own loggers on the driver (``ray``, ``ray.data``, ``ray.serve``, …) print only errors; what they
  log below that goes to ``<Ray session>/logs/contrastext-driver-<pid>.log`` (Ray Data also keeps its
  own ``logs/ray-data/``);
- Ray Data's progress bars are off;
- the workers' output (task and actor stdout/stderr, Ray Train's and Ray Data's logs in the workers,
  raylet messages) stays in Ray's files under ``<Ray session>/logs`` (``worker-*.out``/``.err``,
  ``train/``, ``ray-data/``). Only the lines our own training loop prints with the ``[contrastext]``
  marker are shown, once each (Ray Train's print redirection would otherwise show them twice);
- Python warnings raised by Ray go to the driver's log file;
- Hugging Face's download / weight-loading progress bars are off;
- one line at start says where the logs are;
- our own progress bars (``progress_bar``: encoding) show only on a terminal, for work past a few seconds.

Verbose (``--verbose``): everything Ray prints comes through, as Ray does it.

A job's entry point calls :func:`configure_console` once; :func:`contrastext.runtime.init_ray` follows
the setting. Code that never calls it (a library user, the test suite) keeps Ray's behaviour.
"""

from __future__ import annotations

import collections
import logging
import logging.handlers
import os
import re
import sys
import threading
from dataclasses import dataclass
from typing import Any, TextIO

log = logging.getLogger(__name__)

#: Lines of the workers' output shown in quiet mode carry this marker (contrastext.train.worker).
WORKER_MARKER = "[contrastext]"
#: Shown in quiet mode; everything else Ray or a library logs stays at this level or above.
RAY_CONSOLE_LEVEL = logging.ERROR

_PROJECT_LOGGER = "contrastext"
_FORWARDER = "contrastext_console"  # our handler's name in Ray's worker-output dispatcher
_RAY_PRINTER = "ray_print_logs"  # Ray's own handler there (prints every worker line)
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_TAG = "_contrastext_console"  # marks the logging handlers this module installed


@dataclass(frozen=True)
class ConsoleSettings:
    """How much a job prints; see the module docstring."""

    verbose: bool = False


_settings: ConsoleSettings | None = None


def console_settings() -> ConsoleSettings | None:
    """The settings given to :func:`configure_console`, or None when it was never called."""
    return _settings


#: A progress bar appears only once its work has run this long: short work prints nothing.
PROGRESS_DELAY_S = 2.0


def progress_bar(total: int, description: str, *, enabled: bool = True, unit: str = "it"):
    """A tqdm bar on stderr for long work: shown only when ``enabled``, stderr is a terminal and the work
    has run for ``PROGRESS_DELAY_S``; otherwise a bar that prints nothing (``update``/``close`` still work)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, disable=None if enabled else True,
                delay=PROGRESS_DELAY_S, dynamic_ncols=True)


def ray_quiet(verbose: bool | None = None) -> bool:
    """Whether Ray should be started quiet: ``not verbose`` when given, else the console's setting.

    Without a configured console (library use, tests) Ray prints as it always does.
    """
    if verbose is not None:
        return not verbose
    return _settings is not None and not _settings.verbose


class ShortFormatter(logging.Formatter):
    """``12:04:31 message``; warnings and errors also name their level and logger."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")
        self._loud = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record) if record.levelno < logging.WARNING else self._loud.format(record)


def _remove_own_handlers(logger: logging.Logger) -> None:
    for handler in [h for h in logger.handlers if getattr(h, _TAG, False)]:
        logger.removeHandler(handler)
        handler.close()


def configure_console(verbose: bool = False, stream: TextIO | None = None) -> ConsoleSettings:
    """Set up this process's console for a job; call once, before its work (and before Ray starts).

    ``stream``: where log lines go (default ``sys.stderr``, as :func:`logging.basicConfig`).
    """
    global _settings
    _settings = ConsoleSettings(verbose=verbose)
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return _settings

    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S",
                            stream=stream)
    root.setLevel(logging.WARNING)
    project = logging.getLogger(_PROJECT_LOGGER)
    _remove_own_handlers(project)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(ShortFormatter())
    setattr(handler, _TAG, True)
    project.addHandler(handler)
    project.setLevel(logging.INFO)
    project.propagate = False
    _quiet_hugging_face()
    return _settings


def _quiet_hugging_face() -> None:
    """No "Loading weights" / download bars (read from the environment at import, set at runtime after)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] != "1":
        return  # the user asked for them
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()


# ------------------------------------------------------------------------------------------ Ray, quiet
def before_ray_init() -> dict[str, Any]:
    """Quiet Ray's driver-side console before ``ray.init``; returns the ``ray.init`` options to add."""
    import ray
    import ray.data  # configures the ray.data logger, adjusted below

    _quiet_ray_loggers()
    _buffer_ray_logs()
    _route_ray_warnings()
    ray.data.DataContext.get_current().enable_progress_bars = False
    # workers' output reaches the driver only to be filtered (see after_ray_init); without Ray's
    # dispatcher it is not forwarded at all
    return {"log_to_driver": _dispatcher() is not None}


def after_ray_init(context: Any = None) -> None:
    """Finish quieting Ray once it runs: logs to the session's folder, the workers' own lines only."""
    import ray.data

    _quiet_ray_loggers()  # loggers configured while Ray started
    ray.data.DataContext.get_current().enable_progress_bars = False
    logs_dir = ray_logs_dir()
    _flush_ray_logs(logs_dir)
    dispatcher = _dispatcher()
    if dispatcher is not None:
        dispatcher.remove_handler(_RAY_PRINTER)
        dispatcher.remove_handler(_FORWARDER)
        dispatcher.add_handler(_FORWARDER, WorkerLineFilter())
    _route_raylet_warnings()
    dashboard = getattr(context, "dashboard_url", None)
    where = logs_dir or "the Ray session's logs folder"
    log.info("Ray's logs and the workers' output: %s%s (--verbose prints them here)", where,
             f"; dashboard http://{dashboard}" if dashboard else "")


def forget_ray_forwarding() -> None:
    """Undo the worker-line filter (a verbose Ray started later in the same process prints as usual)."""
    dispatcher = _dispatcher()
    if dispatcher is not None:
        dispatcher.remove_handler(_FORWARDER)
    _restore_raylet_printing()


def _route_raylet_warnings() -> None:
    """The raylet's warnings (e.g. "N PYTHON worker processes have been started") go to the driver's log
    file; its errors (a worker died, out of memory) still print. Ray prints them from a thread of its own
    through ``print_to_stdstream``, not through the dispatcher, so that function is wrapped."""
    # tests/test_console.py fails if this stops working on an upgrade
    import ray._private.worker as ray_worker  # private: no public hook for the raylet's own lines

    printer = ray_worker.print_to_stdstream
    if getattr(printer, _TAG, False):
        return

    def print_or_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        lines = data.get("lines") or []
        if data.get("pid") == "raylet" and all(_ANSI.sub("", line).lstrip().startswith("WARNING") for line in lines):
            for line in lines:  # Ray's loggers write below ERROR to the driver's log file
                logging.getLogger("ray").warning("raylet: %s", _ANSI.sub("", line))
            return
        printer(data, ignore_prefix=ignore_prefix)

    setattr(print_or_log, _TAG, True)
    print_or_log.wrapped = printer  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = print_or_log


def _restore_raylet_printing() -> None:
    import ray._private.worker as ray_worker  # private: puts back Ray's own print_to_stdstream, wrapped above

    wrapped = getattr(ray_worker.print_to_stdstream, "wrapped", None)
    if wrapped is not None:
        ray_worker.print_to_stdstream = wrapped


def ray_logs_dir() -> str | None:
    """``<session>/logs`` of the Ray this process is connected to (on the head node when joined)."""
    try:  # None if Ray moves it
        import ray._private.worker as ray_worker  # private: no public API names the session's logs folder

        node = ray_worker._global_node
        return node.get_logs_dir_path() if node is not None else None
    except (ImportError, AttributeError):
        return None


def _dispatcher() -> Any:
    """Ray's dispatcher of the workers' output on the driver (a private part of Ray 2.x), or None."""
    try:  # the public log_to_driver keeps or drops every worker line, the job's and Ray's alike
        import ray._private.ray_logging as ray_logging  # private: Ray has no public per-line filter of worker output

        dispatcher = ray_logging.global_worker_stdstream_dispatcher
    except (ImportError, AttributeError):
        return None
    if not (hasattr(dispatcher, "add_handler") and hasattr(dispatcher, "remove_handler")):
        return None
    return dispatcher


def _ray_loggers() -> list[logging.Logger]:
    names = [n for n in logging.root.manager.loggerDict if n == "ray" or n.startswith("ray.")]
    return [logging.getLogger(n) for n in sorted(names)]


def _quiet_ray_loggers() -> None:
    """Console handlers of Ray's loggers show errors only; their file handlers keep everything."""
    for logger in _ray_loggers():
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(handler, logging.FileHandler):
                handler.setLevel(max(handler.level, RAY_CONSOLE_LEVEL))


def _buffer_ray_logs() -> None:
    """Keep what the ``ray`` logger says until its file in the session folder exists (after ray.init)."""
    logger = logging.getLogger("ray")
    for handler in [h for h in logger.handlers if getattr(h, _TAG, False)]:  # a previous Ray's file
        logger.removeHandler(handler)
        target = handler.target
        handler.close()
        if target is not None:
            target.close()
    buffer = logging.handlers.MemoryHandler(capacity=10_000, flushLevel=logging.CRITICAL + 1)
    setattr(buffer, _TAG, True)
    logger.addHandler(buffer)


def _flush_ray_logs(logs_dir: str | None) -> None:
    logger = logging.getLogger("ray")
    for handler in [h for h in logger.handlers if getattr(h, _TAG, False)]:
        if not isinstance(handler, logging.handlers.MemoryHandler) or handler.target is not None:
            continue
        target: logging.Handler = logging.NullHandler()
        if logs_dir and os.path.isdir(logs_dir):
            target = logging.FileHandler(os.path.join(logs_dir, f"contrastext-driver-{os.getpid()}.log"),
                                         encoding="utf-8")
            target.setFormatter(logging.Formatter("%(asctime)s\t%(levelname)s %(name)s "
                                                  "%(filename)s:%(lineno)s -- %(message)s"))
        handler.setTarget(target)
        handler.flushLevel = logging.NOTSET  # from now on every record goes straight to the file
        handler.flush()


_original_showwarning = None


def _route_ray_warnings() -> None:
    """Python warnings raised by Ray (deprecations, …) → the ``ray`` logger (its file), not stderr."""
    global _original_showwarning
    import warnings

    import ray

    if _original_showwarning is not None:
        return
    ray_dir = os.path.dirname(os.path.abspath(ray.__file__)) + os.sep
    ray_categories: tuple[type[Warning], ...] = ()
    try:
        from ray.util.annotations import RayDeprecationWarning

        ray_categories = (RayDeprecationWarning,)
    except ImportError:  # pragma: no cover - another Ray
        pass
    original = _original_showwarning = warnings.showwarning

    def showwarning(message, category, filename, lineno, file=None, line=None):
        from_ray = issubclass(category, ray_categories) or os.path.abspath(filename).startswith(ray_dir)
        if from_ray:
            logging.getLogger("ray").warning("%s:%s: %s: %s", filename, lineno, category.__name__, message)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = showwarning


class WorkerLineFilter:
    """Ray's worker-output dispatcher handler for quiet mode: our marked lines, once each, else nothing.

    Called with Ray's batches (``{"lines": [...], "pid": ..., "is_err": ...}``). A line is shown when it
    carries :data:`WORKER_MARKER`; it is printed through the ``contrastext.workers`` logger without the
    marker, terminal escapes or carriage-return redraws. The same line from the same process seen among
    the last few hundred is dropped: Ray Train's print redirection writes each print to both stdout and
    stderr, which arrive as separate batches.
    """

    def __init__(self, logger: logging.Logger | None = None, memory: int = 512) -> None:
        self._logger = logger or logging.getLogger(f"{_PROJECT_LOGGER}.workers")
        self._recent: collections.OrderedDict[tuple[Any, str], None] = collections.OrderedDict()
        self._memory = memory
        self._lock = threading.Lock()

    def __call__(self, data: dict[str, Any]) -> None:
        for text in self.select(data):
            self._logger.info("%s", text)

    def select(self, data: dict[str, Any]) -> list[str]:
        """The lines of one batch to show, cleaned, in order."""
        shown = []
        pid = data.get("pid")
        for raw in data.get("lines") or ():
            text = own_line(raw)
            if text is None:
                continue
            key = (pid, text)
            with self._lock:
                if key in self._recent:
                    continue
                self._recent[key] = None
                while len(self._recent) > self._memory:
                    self._recent.popitem(last=False)
            shown.append(text)
        return shown


def own_line(raw: str) -> str | None:
    """The text of a worker output line that carries our marker, cleaned for a console; else None."""
    redraws = [part for part in _ANSI.sub("", str(raw)).split("\r") if part.strip()]
    text = redraws[-1] if redraws else ""
    at = text.find(WORKER_MARKER)
    if at < 0:
        return None
    text = text[at + len(WORKER_MARKER):].strip()
    return text or None
