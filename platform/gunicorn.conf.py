"""gunicorn configuration for the web container (and the load benchmark)."""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# gthread workers: one process per core plus one; more processes only contend for the same cores.
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() + 1))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "60"))
graceful_timeout = 30
keepalive = 5
max_requests = 2000
max_requests_jitter = 200
accesslog = os.environ.get("GUNICORN_ACCESSLOG") or None
errorlog = "-"
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
# The access log never shows an invitation token (request line, path, query, referer: kernel/logging.py).
logger_class = "kernel.logging.RedactingGunicornLogger"
