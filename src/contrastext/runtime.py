"""Connecting to Ray: the cluster at RAY_ADDRESS when there is one, else a local Ray sized for this machine."""

from __future__ import annotations

import logging
import os

from contrastext.config import RayConfig
from contrastext.storage import FORWARDED_VARIABLES

log = logging.getLogger(__name__)

# Environment the workers need to behave like the driver (offline model resolution above all).
# Data folders are not forwarded: a path on the driver's disk means nothing on another node (inputs are
# URIs, or shipped through the object store). Object-storage settings are; credentials stay per node.
_FORWARDED_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", *FORWARDED_VARIABLES)


def local_num_cpus() -> int:
    """Logical CPUs for a local Ray: the cores plus two.

    Ray Train workers each hold a CPU for the whole fit, and Ray Data needs CPUs of its own to feed
    them; without the headroom a 2-core laptop running 2 training workers waits forever for data.
    """
    return (os.cpu_count() or 1) + 2


def init_ray(config: RayConfig | None = None, *, verbose: bool | None = None, **init_kwargs) -> None:
    """Start or join Ray once per process; later calls are no-ops.

    ``verbose``: False keeps Ray's internals off the console (see :mod:`contrastext.console`), True
    prints everything Ray does; None follows :func:`contrastext.console.configure_console`, and without
    it Ray prints as it always does.
    """
    import ray

    from contrastext import console

    if ray.is_initialized():
        return
    quiet = console.ray_quiet(verbose)
    if quiet:
        init_kwargs = {**console.before_ray_init(), **init_kwargs}
    else:
        console.forget_ray_forwarding()
    context = _start(ray, config or RayConfig(), init_kwargs)
    if quiet:
        console.after_ray_init(context)


def _start(ray, config: RayConfig, init_kwargs: dict):
    env = {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}
    runtime_env = {"env_vars": env} if env else None
    address = config.address or os.environ.get("RAY_ADDRESS")
    if address and address != "local":  # "local" starts a Ray of our own, sized below
        log.info("joining Ray at %s", address)
        return ray.init(address=address, runtime_env=runtime_env, **init_kwargs)
    num_cpus = config.num_cpus or local_num_cpus()
    log.info("starting a local Ray with %d logical CPUs", num_cpus)
    # the dashboard serves the state API that Ray Train's placement-group cleaner polls
    init_kwargs.setdefault("dashboard_host", "127.0.0.1")
    # address="local" always starts a fresh Ray, never silently joins one left by `ray start`
    return ray.init(address="local", num_cpus=num_cpus, runtime_env=runtime_env, **init_kwargs)
