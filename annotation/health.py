"""A running study's health from the database, the broker and the model-server limiter: what the study health
panel shows (`study_health_view`, /admin/health/<study id>/) and what /metrics reads at each scrape
(config/monitoring.py), so that the two never disagree."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Exists, Min, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from annotation.models import Candidate, Participation, Query
from kernel.queues import queue_depths
from modelserver.limits import default_limiter
from studies.models import Study
from studies.selectors.membership import StudyAction, study_allows

# The buckets of the question-to-first-comparison histogram (seconds): from a quick answer to past the waiting
# page's deadline (ANNOTATION_WAIT_DEADLINE_S, 120 s by default).
WAIT_BUCKETS_S = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
WINDOW = timedelta(hours=1)


def _percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile (share in (0, 1]) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _queries(study: Study | None) -> QuerySet[Query]:
    queries = Query.objects.all()
    return queries if study is None else queries.filter(participation__study=study)


def first_comparison_waits(*, study: Study | None = None, since: datetime | None = None) -> list[float]:
    """Seconds from each question's sending to its first comparison being shown, for the questions whose first
    comparison was shown at or after `since` (all of them without)."""
    rows = (
        _queries(study)
        .annotate(first_shown=Min("bracket__matches__shown_at"))
        .filter(first_shown__isnull=False)
        .values_list("created_at", "first_shown")
    )
    if since is not None:
        rows = rows.filter(first_shown__gte=since)
    return [max(0.0, (shown - created).total_seconds()) for created, shown in rows]


def _waiting(study: Study | None) -> QuerySet[Query]:
    """Questions an annotator is waiting on: searching or writing, nothing failed, the participation going on."""
    failed = Candidate.objects.filter(query=OuterRef("pk"), status=Candidate.Status.FAILED)
    return (
        _queries(study)
        .filter(status__in=(Query.Status.RETRIEVING, Query.Status.GENERATING))
        .filter(
            participation__completed_at__isnull=True,
            participation__stopped_at__isnull=True,
            participation__screened_out_at__isnull=True,
        )
        .exclude(Exists(failed))
    )


def annotators_waiting(*, study: Study | None = None, now: datetime | None = None) -> tuple[int, int]:
    """(annotators waiting now, those of them waiting past ANNOTATION_WAIT_DEADLINE_S). The clock restarts when
    the annotator asked again, as on the waiting page (annotation.selectors.query.query_wait_state)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.ANNOTATION_WAIT_DEADLINE_S)
    waiting = _waiting(study)
    overdue = waiting.filter(created_at__lte=cutoff).filter(
        Q(retrieval_queued_at__isnull=True) | Q(retrieval_queued_at__lte=cutoff)
    )
    count = Participation.objects.filter(pk__in=waiting.values("participation_id")).count()
    past = Participation.objects.filter(pk__in=overdue.values("participation_id")).count()
    return count, past


@dataclass(frozen=True)
class ServerLoad:
    server: str
    in_use: int
    limit: int

    @property
    def saturation(self) -> float:
        return self.in_use / self.limit if self.limit else 0.0


@dataclass(frozen=True)
class StudyHealth:
    """One study's numbers over the last hour, and the deployment's queues and model servers."""

    study: Study
    wait_p50_s: float | None
    wait_p95_s: float | None
    questions_shown: int
    candidates_generated: int
    candidates_failed: int
    waiting: int
    waiting_past_deadline: int
    queue_depths: dict[str, int | None] = field(default_factory=dict)
    servers: list[ServerLoad] = field(default_factory=list)

    @property
    def failure_rate(self) -> float | None:
        return self.candidates_failed / self.candidates_generated if self.candidates_generated else None

    @property
    def alerts(self) -> list[str]:
        return health_alerts(self)


def health_alerts(health: StudyHealth) -> list[str]:
    """What is past the thresholds (HEALTH_FAILURE_RATE_ALERT, HEALTH_WAIT_P95_ALERT_S) or the deadline."""
    alerts = []
    rate = health.failure_rate
    if rate is not None and rate >= settings.HEALTH_FAILURE_RATE_ALERT:
        alerts.append(
            f"{health.study.title}: {health.candidates_failed} of {health.candidates_generated} summaries failed in "
            f"the last hour ({rate:.0%})."
        )
    if health.wait_p95_s is not None and health.wait_p95_s >= settings.HEALTH_WAIT_P95_ALERT_S:
        alerts.append(
            f"{health.study.title}: annotators waited {health.wait_p95_s:.0f} s or more for their first comparison "
            f"(p95, last hour)."
        )
    if health.waiting_past_deadline:
        alerts.append(
            f"{health.study.title}: {health.waiting_past_deadline} "
            f"{'annotator is' if health.waiting_past_deadline == 1 else 'annotators are'} waiting past the "
            f"{settings.ANNOTATION_WAIT_DEADLINE_S} s deadline now."
        )
    return alerts


def model_server_loads() -> list[ServerLoad]:
    """Slots in use per model server, from this process's limiter (a Redis one sees the whole deployment)."""

    limiter: Any = default_limiter()
    servers = [u.strip() for u in [settings.LLM_BASE_URL, *settings.LLM_BASE_URLS.split(",")] if u.strip()]
    loads = []
    for server in dict.fromkeys(servers):
        try:
            in_use = int(limiter.in_flight(server))
        except Exception:  # noqa: BLE001, S112 - a limiter out of reach shows as unknown, never an error page
            continue
        loads.append(ServerLoad(server=server.rstrip("/"), in_use=in_use, limit=settings.LLM_CONCURRENCY))
    return loads


def study_health(*, study: Study, now: datetime | None = None, with_deployment: bool = True) -> StudyHealth:
    now = now or timezone.now()
    since = now - WINDOW
    waits = first_comparison_waits(study=study, since=since)
    finished = Candidate.objects.filter(query__participation__study=study, finished_at__gte=since)
    generated = finished.filter(status__in=(Candidate.Status.DONE, Candidate.Status.FAILED)).count()
    failed = finished.filter(status=Candidate.Status.FAILED).count()
    waiting, past = annotators_waiting(study=study, now=now)
    depths: dict[str, int | None] = {}
    servers: list[ServerLoad] = []
    if with_deployment:
        depths = queue_depths(current_app)
        servers = model_server_loads()
    return StudyHealth(
        study=study,
        wait_p50_s=_percentile(waits, 0.5),
        wait_p95_s=_percentile(waits, 0.95),
        questions_shown=len(waits),
        candidates_generated=generated,
        candidates_failed=failed,
        waiting=waiting,
        waiting_past_deadline=past,
        queue_depths=depths,
        servers=servers,
    )


def study_health_view(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study health panel: owners of the study and superusers (docs/permissions.md); anyone else 404."""
    if not (request.user.is_authenticated and request.user.is_staff):
        raise Http404
    study = get_object_or_404(Study, pk=study_id)
    if not study_allows(user=request.user, study=study, action=StudyAction.MANAGE):
        raise Http404
    health = study_health(study=study)
    return render(
        request,
        "admin/health.html",
        {"health": health, "title": f"Health of {study.title}", "deadline_s": settings.ANNOTATION_WAIT_DEADLINE_S},
    )


__all__ = [
    "WAIT_BUCKETS_S",
    "ServerLoad",
    "StudyHealth",
    "annotators_waiting",
    "first_comparison_waits",
    "health_alerts",
    "model_server_loads",
    "study_health",
    "study_health_view",
]
