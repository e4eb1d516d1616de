"""Prometheus metrics (docs/deploy.md, "Monitoring"): the protected /metrics endpoint of the web processes,
the Celery task metrics and the worker's own metrics server, the model-server call metrics, and what is read
from the database and the broker at each scrape (queue depths, annotators waiting, question to first
comparison).

Requests and database statements are django-prometheus's. Every process keeps its own counts; with several
processes per host (gunicorn's workers, a prefork Celery pool) PROMETHEUS_MULTIPROC_DIR names a folder they
share (platform/gunicorn.conf.py and platform/celery-worker.sh make one), and a scrape adds them up."""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from modelserver import observe

TASK_SECONDS = Histogram(
    "satisfy_celery_task_seconds",
    "How long a Celery task's attempt ran, by task and outcome (success, retry, failure).",
    ["task", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600),
)
TASK_QUEUE_WAIT = Histogram(
    "satisfy_celery_task_queue_wait_seconds",
    "From a task's message being sent to a worker starting it, by task and queue.",
    ["task", "queue"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)
TASK_RETRIES = Counter("satisfy_celery_task_retries", "Celery task attempts that asked to be retried.", ["task"])
TASK_FAILURES = Counter("satisfy_celery_task_failures", "Celery task attempts that failed for good.", ["task"])
MODEL_CALL_SECONDS = Histogram(
    "satisfy_model_server_call_seconds",
    "Model-server calls by lane (annotator, research), server and outcome (ok, timeout, status_503, ...).",
    ["lane", "server", "outcome"],
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
MODEL_CALL_ERRORS = Counter(
    "satisfy_model_server_call_errors",
    "Model-server calls that did not succeed, by lane, server and outcome.",
    ["lane", "server", "outcome"],
)
MODEL_SLOTS_IN_USE = Gauge(
    "satisfy_model_server_slots_in_use",
    "Model-server slots this deployment's processes hold now, by lane and server.",
    ["lane", "server"],
    multiprocess_mode="livesum",
)


class _ModelServerMetrics:
    """The Prometheus side of modelserver.observe."""

    def slot_taken(self, *, lane: str, server: str) -> None:
        MODEL_SLOTS_IN_USE.labels(lane, server).inc()

    def slot_given_back(self, *, lane: str, server: str) -> None:
        MODEL_SLOTS_IN_USE.labels(lane, server).dec()

    def call_ended(self, *, lane: str, server: str, seconds: float, outcome: str) -> None:
        MODEL_CALL_SECONDS.labels(lane, server, outcome).observe(seconds)
        if outcome != "ok":
            MODEL_CALL_ERRORS.labels(lane, server, outcome).inc()


MODEL_SERVER_METRICS = _ModelServerMetrics()
observe.add_observer(MODEL_SERVER_METRICS)


# -- Celery tasks (connected in config/celery.py) ---------------------------------------------------------

SENT_AT_HEADER = "satisfy_sent_at"
_started: dict[str, float] = {}
_started_lock = threading.Lock()


def task_published(headers: dict[str, Any] | None) -> None:
    """Stamp the message with its sending time (seconds since the epoch), for the queue wait."""
    if headers is not None:
        headers.setdefault(SENT_AT_HEADER, time.time())


def task_started(*, task_id: str, task: Any) -> None:
    now = time.time()
    with _started_lock:
        _started[task_id] = time.perf_counter()
    request = getattr(task, "request", None)
    sent = getattr(request, SENT_AT_HEADER, None) or (getattr(request, "headers", None) or {}).get(SENT_AT_HEADER)
    if sent is not None and not getattr(request, "is_eager", False):
        queue = ((getattr(request, "delivery_info", None) or {}).get("routing_key")) or ""
        TASK_QUEUE_WAIT.labels(task.name, queue).observe(max(0.0, now - float(sent)))


def task_ended(*, task_id: str, task: Any, state: str | None) -> None:
    with _started_lock:
        began = _started.pop(task_id, None)
    if began is None or task is None:
        return
    outcome = {"SUCCESS": "success", "RETRY": "retry", "FAILURE": "failure"}.get(state or "", (state or "").lower())
    TASK_SECONDS.labels(task.name, outcome or "unknown").observe(time.perf_counter() - began)


def task_retried(*, task: Any) -> None:
    TASK_RETRIES.labels(getattr(task, "name", "unknown")).inc()


def task_failed(*, task: Any) -> None:
    TASK_FAILURES.labels(getattr(task, "name", "unknown")).inc()


# -- read at each scrape -----------------------------------------------------------------------------


class DeploymentCollector(Collector):
    """Queue depths from the broker; annotators waiting, and question to first comparison, from the database."""

    def collect(self) -> Iterator[Any]:
        from celery import current_app

        from annotation.health import WAIT_BUCKETS_S, annotators_waiting, first_comparison_waits
        from kernel.queues import queue_depths

        depths = GaugeMetricFamily("satisfy_queue_depth", "Messages waiting in each Celery queue.", labels=["queue"])
        for queue, depth in queue_depths(current_app).items():
            if depth is not None:
                depths.add_metric([queue], depth)
        yield depths
        waiting, past = annotators_waiting()
        yield GaugeMetricFamily("satisfy_annotators_waiting", "Annotators waiting for their comparisons now.", waiting)
        yield GaugeMetricFamily(
            "satisfy_annotators_waiting_past_deadline",
            "Annotators waiting longer than ANNOTATION_WAIT_DEADLINE_S now.",
            past,
        )
        waits = first_comparison_waits()
        buckets = [(floatToGoString(bound), sum(1 for w in waits if w <= bound)) for bound in WAIT_BUCKETS_S]
        buckets.append(("+Inf", len(waits)))
        yield HistogramMetricFamily(
            "satisfy_question_first_comparison_seconds",
            "From a question being sent to its first comparison being shown (every question so far).",
            buckets=buckets,
            sum_value=sum(waits),
        )


def metrics_text(*, with_deployment: bool) -> bytes:
    """This host's processes' metrics (all of them in multiprocess mode), and the deployment's when asked."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if with_deployment:
        deployment = CollectorRegistry(auto_describe=False)
        deployment.register(DeploymentCollector())
        text += generate_latest(deployment)
    return text


def authorised(header: str | None) -> bool:
    token = settings.METRICS_TOKEN
    given = (header or "").removeprefix("Bearer ").strip()
    return bool(token) and hmac.compare_digest(given.encode(), token.encode())


class MetricsMiddleware:
    """Answers /metrics before ALLOWED_HOSTS and the HTTPS redirect, as /healthz/ is answered (config/health.py):
    Prometheus scrapes each web process by its internal address, over the private network, with the token."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/metrics":
            try:
                return metrics_view(request)
            except Http404:
                pass
        response: HttpResponse = self.get_response(request)
        return response


def metrics_view(request: HttpRequest) -> HttpResponse:
    """/metrics: 404 while METRICS_TOKEN is unset (metrics off), 403 without `Authorization: Bearer <token>`."""
    if not settings.METRICS_TOKEN:
        raise Http404
    if not authorised(request.headers.get("Authorization")):
        return HttpResponse("Send Authorization: Bearer <METRICS_TOKEN>.\n", status=403, content_type="text/plain")
    return HttpResponse(metrics_text(with_deployment=True), content_type=CONTENT_TYPE_LATEST)


# -- the worker's metrics server -----------------------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's name
        pass


def _worker_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    if not authorised(environ.get("HTTP_AUTHORIZATION")):
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"Send Authorization: Bearer <METRICS_TOKEN>.\n"]
    start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
    return [metrics_text(with_deployment=False)]


def start_worker_metrics_server(port: int, addr: str = "0.0.0.0") -> WSGIServer:  # noqa: S104 - scraped from outside
    """Serve this worker's metrics (its pool processes' too, in multiprocess mode) on `port`, in a thread."""
    server = make_server(addr, port, _worker_app, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True).start()
    return server
