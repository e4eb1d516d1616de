"""gunicorn configuration for the web container (and the load benchmark)."""

import multiprocessing
import os


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
# gthread workers: one process per core plus one; more processes only contend for the same cores.
workers = _whole("GUNICORN_WORKERS", multiprocessing.cpu_count() + 1)
worker_class = "gthread"
threads = _whole("GUNICORN_THREADS", 4)
timeout = _whole("GUNICORN_TIMEOUT", 60)
graceful_timeout = 30
keepalive = 5
max_requests = 2000
# Workers fork from a master that has imported the application: a worker recycled after max_requests (every
# couple of minutes per worker at 50 requests/s) starts serving at once instead of importing Django on a
# core the other workers need (bench/load.py: latency spikes with the cores idle, in the phase where the
# workers recycled). The master opens no database or broker connection (post_worker_init opens the
# broker's, per worker), so nothing is shared across the fork.
preload_app = True
max_requests_jitter = 200
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# The access log never shows an invitation token (request line, path, query, referer: kernel/logging.py).
logger_class = "kernel.logging.RedactingGunicornLogger"


def post_worker_init(worker):  # noqa: ANN001, ANN201 - gunicorn's hook signature
    """Open the broker connection as each web worker starts (and again after `max_requests` recycles it), so
    the first question it takes does not wait for the broker's transport to import and connect (0.4-1.2 s on
    a 2-core host; `bench/load.py` prints the first question per worker)."""
    import annotation.tasks  # noqa: F401 - the module the first question's send imports
    from config.celery import app
    from kernel.tasks import broker_warm

    seconds = broker_warm(app=app)
    worker.log.info("broker connection opened in %.2f s", seconds)
