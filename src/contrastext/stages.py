"""A job's stages: what each one prints, how long it took, and the marker that lets a later run skip it.

This is the one way every job says a stage is done. A stage writes its outputs into its folder and
``done.json`` there last, recording the settings its outputs depend on (and, for a small result, the result
itself). Run again, a stage whose marker is there and whose settings match is skipped; one made with other
settings is named and run again. Settings compare whole: a setting the marker lacks (one added to the code
since) or holds alone (one removed since) is a difference too, so a marker written by an earlier version
with another set of settings makes its stage run again. The folder may be a URI.

A stage that leaves work to resume from (a fit's checkpoints) calls :meth:`Stage.begin` first: the work is
resumed only when it was started with the same settings (``attempt.json``), else it is deleted, so a stage
run again for a changed setting starts over rather than continuing what other settings made.

Console lines are ``[job] stage: message`` on stdout, so a job's own lines read the same whether it runs
alone or as a stage of another job; Ray's and the libraries' output is handled by :mod:`contrastext.console`.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import PurePath
from typing import Any

from contrastext import storage
from contrastext.manifest import write_json_atomic

DONE_FILE = "done.json"
ATTEMPT_FILE = "attempt.json"


def say(job: str, message: str) -> None:
    """One line of a job on the console: ``[job] message``."""
    print(f"[{job}] {message}", flush=True)


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, paths strings), so it compares with a marker."""
    return json.loads(json.dumps(value, default=str))


#: settings of how a stage runs, not of what it makes: never compared (a fit interrupted in one mode resumes
#: in the other)
RUN_ONLY_SETTINGS = frozenset({"in_process"})


def setting_differences(old: Any, new: Any, path: str = "") -> list[str]:
    """The dotted names of the settings that differ, including those only one side has; the
    ``RUN_ONLY_SETTINGS`` are left out at any depth."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted((old.keys() | new.keys()) - RUN_ONLY_SETTINGS, key=str)
                for d in (setting_differences(old[k], new[k], f"{path}.{k}") if k in old and k in new
                          else [f"{path}.{k}".lstrip(".")])]
    return [] if old == new else [path.lstrip(".") or "."]


def _what_it_makes(settings: Any) -> Any:
    if isinstance(settings, dict):
        return {k: _what_it_makes(v) for k, v in settings.items() if k not in RUN_ONLY_SETTINGS}
    return [_what_it_makes(v) for v in settings] if isinstance(settings, list) else settings


def fingerprint(settings: Any) -> str:
    """A short digest of ``settings``: what a later stage records of the stage that made its input, so that
    it runs again when that one is made again with other settings."""
    text = json.dumps(_what_it_makes(as_json(settings)), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Timings(dict):
    """A job's seconds per part, as its summary and ``manifest.json`` record them: ``with
    timings.measure("encode"): ...`` adds the block's seconds to that part; ``total()`` the job's so far."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.perf_counter()

    @contextmanager
    def measure(self, part: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self[part] = self.get(part, 0.0) + time.perf_counter() - started

    def total(self) -> float:
        """Seconds since the job started, recorded as ``total``."""
        self["total"] = time.perf_counter() - self.started
        return self["total"]


class Stage:
    """One stage of ``job``, named ``name``: its console lines and clock, and its done-marker in ``folder``.

    The clock starts when the stage is made. ``folder`` and ``settings`` are needed only for the marker.
    """

    def __init__(self, job: str, name: str, folder: str | None = None, settings: Mapping[str, Any] | None = None):
        self.job, self.name, self.folder = job, name, folder
        self.settings: dict[str, Any] = as_json(dict(settings or {}))
        self.started = time.perf_counter()

    @property
    def seconds(self) -> float:
        """Seconds since the stage was made."""
        return time.perf_counter() - self.started

    @property
    def marker(self) -> str:
        return storage.join(self.marker_folder, DONE_FILE)

    def say(self, message: str) -> None:
        say(self.job, f"{self.name}: {message}")

    def progress(self, what: str, done: int, total: int, amount: int, unit: str) -> None:
        """A progress line: ``what`` done out of total, ``amount`` of ``unit`` so far and their rate."""
        rate = amount / max(self.seconds, 1e-9)
        self.say(f"{what} {done}/{total} done: {amount:,} {unit} ({rate:,.1f} {unit}/s)")

    def finished(self) -> dict[str, Any] | None:
        """The marker's record when an earlier run finished this stage with these settings; None: run it."""
        try:
            record = storage.read_json(self.marker)
        except FileNotFoundError:
            return None
        changed = setting_differences(record.get("settings") or {}, self.settings)
        if changed:
            self.say(f"{self.folder} was made with other settings ({', '.join(sorted(changed)[:5])}): "
                     "running the stage again")
            return None
        self.say(f"done in an earlier run with these settings, skipped ({self.folder}; delete its {DONE_FILE} "
                 "to run it again)")
        return record

    def begin(self, *work: str) -> None:
        """Call before the stage's work, naming what in its folder an interrupted attempt leaves to resume from
        (``work``: sub-paths such as a fit's run folder, or full locations). They are kept when the last attempt
        or the finished stage had these settings; otherwise (other settings, or no record of which) they are
        deleted. Then these settings are recorded as the attempt's."""
        previous = None
        for name in (ATTEMPT_FILE, DONE_FILE):
            try:
                previous = storage.read_json(storage.join(self.marker_folder, name)).get("settings")
                break
            except FileNotFoundError:
                continue
        if previous is None or setting_differences(previous, self.settings):
            removed = []
            for part in work:
                full = storage.is_uri(part) or PurePath(part).is_absolute()
                location = part if full else storage.join(self.marker_folder, part)
                if storage.exists(location):
                    removed.append(location)
                    storage.delete(location)
            if removed:
                why = "no record of the settings that made it" if previous is None else "made with other settings"
                self.say(f"starting over: removed {', '.join(removed)} ({why})")
        write_json_atomic(storage.join(self.marker_folder, ATTEMPT_FILE),
                          {"stage": self.name, "settings": self.settings,
                           "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    @property
    def marker_folder(self) -> str:
        if self.folder is None:
            raise ValueError(f"stage {self.name!r} of {self.job} has no folder for a done-marker")
        return self.folder

    def mark_done(self, result: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """Write the marker, last: its presence says every output of the stage is in place. Returns ``result``,
        which the marker keeps when given (the record's ``result``)."""
        record: dict[str, Any] = {"stage": self.name, "settings": self.settings}
        if result is not None:
            record["result"] = as_json(result)
        record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_json_atomic(self.marker, record)
        return result
