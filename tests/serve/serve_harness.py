"""Running the serving application for a test module: Serve on 127.0.0.1 at a free port, on the session's Ray.

(A plain module, not a conftest.py: a second conftest module would shadow ``from conftest import shared_data``.)
"""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(config) -> Iterator[str]:
    """Serve ``config`` until the block ends (Serve is shut down and classifier trainings, detached actors
    that outlive the app, are stopped after); yields the application's URL."""
    from ray import serve

    from contrastext.serve import classifier_job
    from contrastext.serve.app import start_serve

    url = start_serve(config)
    try:
        yield url
    finally:
        serve.shutdown()
        for name in classifier_job.active():
            classifier_job.stop(name)
