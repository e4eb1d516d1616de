"""gunicorn configuration for the web container (and the load benchmark)."""

import multiprocessing
import os
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from config.environment import read_env_file  # noqa: E402 - the project's folder on the path first

# The same settings as every other process of the host: .env (ENV_FILE) under the environment, read before the
# GUNICORN_* values below (issue 31: outside a container they ignored .env, which Django read).
read_env_file(_REPO)

# Every worker process counts its own metrics into files in one folder, which /metrics adds up
# (config/monitoring.py): a fresh folder per start, unless PROMETHEUS_MULTIPROC_DIR names one (emptied here).
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _metrics = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    _metrics.mkdir(parents=True, exist_ok=True)
    for _stale in _metrics.glob("*.db"):
        _stale.unlink()
else:
    import tempfile

    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="satisfy-web-metrics-")


def _whole(name: str, default: int) -> int:
    """A whole number from the environment (empty: the default); anything else stops gunicorn naming it (a
    SystemExit, which gunicorn does not wrap in a traceback of its config loader as it does a ValueError)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, not {raw!r}") from None


bind = os.environ.get("GUNICORN_BIND") or "0.0.0.0:8000"
# gthread workers: one process per core plus one; more processes only contend for the same cores. Each thread
# serves one request at a time and takes a database connection from its process's pool for it (the pool's
# DATABASE_POOL_MAX_SIZE: as many as the threads; docs/deploy.md, "Database connections").
workers = _whole("GUNICORN_WORKERS", multiprocessing.cpu_count() + 1)
worker_class = "gthread"
threads = _whole("GUNICORN_THREADS", 4)
timeout = _whole("GUNICORN_TIMEOUT", 60)
# Recycling (docs/deploy.md, "Web workers"). A worker recycled after max_requests stops accepting at once (the
# other workers take the new connections from the shared socket), answers what it holds, tells a client whose
# kept-alive connection it holds "Connection: close" within 2 s, and exits. What stalled requests was every
# worker recycling at once: with the same count and requests spread evenly, they reach it together, and then
# nothing accepts until a replacement has started (seconds, on a loaded host). So the jitter is half the
# count (workers recycle far apart), and a replacement accepts as soon as it is forked: the master has
# imported everything a worker needs (preload_app, when_ready) and the broker connection opens in a thread
# beside the first requests (post_worker_init). graceful_timeout only bounds how long a stopping worker may
# finish its in-flight requests; no new request waits for it.
graceful_timeout = _whole("GUNICORN_GRACEFUL_TIMEOUT", 30)
keepalive = _whole("GUNICORN_KEEPALIVE", 5)
max_requests = _whole("GUNICORN_MAX_REQUESTS", 2000)
max_requests_jitter = _whole("GUNICORN_MAX_REQUESTS_JITTER", max_requests // 2)
# Workers fork from a master that has imported the application: a worker recycled after max_requests (every
# couple of minutes per worker at 50 requests/s) starts serving at once instead of importing Django on a
# core the other workers need (bench/load.py: latency spikes with the cores idle, in the phase where the
# workers recycled). The master opens no database or broker connection (post_worker_init opens the
# broker's, per worker), so nothing is shared across the fork.
preload_app = True
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# The access log never shows an invitation token (request line, path, query, referer: kernel/logging.py).
logger_class = "kernel.logging.RedactingGunicornLogger"


def when_ready(server):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """In the master, before any worker forks: load what a worker's first requests would (config/warmup.py), so
    that a recycled worker's replacement inherits it and serves at once."""
    from config.warmup import preload

    preload()


def post_worker_init(worker):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """Open the broker connection as each web worker starts (and again after `max_requests` recycles it), so
    the first question it takes does not wait for the broker to connect (`bench/load.py` prints the first
    question per worker). In a thread: the worker accepts requests meanwhile, so a recycle never waits for
    the broker."""
    import threading

    from config.celery import app
    from kernel.tasks import broker_warm

    def warm() -> None:
        worker.log.info("broker connection opened in %.2f s", broker_warm(app=app))

    threading.Thread(target=warm, name="broker-warm", daemon=True).start()


def worker_exit(server, worker):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """A worker that ends normally (recycled after max_requests, or stopped) closes its database pool and the
    broker connections, flushes its log, and leaves at once (os._exit). Left to the interpreter's shutdown, it
    took 3-6 s more on a busy host: the pool's threads waited for their close time-out, and tearing down the
    objects it shares with the master since the fork copied every page of its memory. The master replaces a
    worker only once it has exited, so with every worker recycling at once, no worker accepted meanwhile.
    A worker that failed keeps its exit status (gunicorn reads it) and ends as usual."""
    import logging
    import sys

    ending = sys.exception()
    if not (isinstance(ending, SystemExit) and ending.code in (0, None) and worker.booted):
        return
    from config.celery import app
    from kernel.db import close_database_pools

    close_database_pools()
    try:
        app.pool.force_close_all()
    except Exception as error:  # noqa: BLE001 - the connection ends with the process either way
        worker.log.debug("broker connections not closed: %r", error)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def child_exit(server, worker):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """A worker's live gauges (model-server slots in use) stop counting once it has gone."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
