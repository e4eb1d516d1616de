"""Monitoring as an operator meets it: /metrics refuses without the token and, with it, shows requests,
a task's timing, model-server calls per lane, the broker's queue depths and the annotators waiting; the study
health panel shows the database's numbers to the study's owner and nothing to anyone else."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from annotation.models import Bracket, Candidate, Match, PersonaProfile, Query
from modelserver.client import ChatClient
from modelserver.config import ChatConfig, LLMError
from studies.models import StudyMembership
from tests.annotation.factories import StudyFactory, join
from tests.support.openai_standin import openai_standin

TOKEN = "metrics-token-for-tests"


def scrape(client: Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content[:300]
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when there are none)."""
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


@pytest.fixture
def metrics_on(settings: Any) -> None:
    settings.METRICS_TOKEN = TOKEN


@pytest.mark.django_db
def test_metrics_are_refused_without_the_token_and_off_without_one(settings: Any, client: Client) -> None:
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    settings.METRICS_TOKEN = TOKEN
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=TOKEN).status_code == 200  # "Bearer " may be left out


@pytest.mark.django_db
def test_metrics_show_requests_a_task_and_model_calls_per_lane(metrics_on: None, client: Client) -> None:
    from annotation.tasks import sweep_generation

    before = scrape(client)
    for _ in range(3):
        assert client.get("/accounts/login/").status_code == 200
    sweep_generation.delay()  # eager in the tests: the same signals as in a worker
    with openai_standin(script=["503"]) as server:
        research = ChatClient(
            ChatConfig(base_url=server.base_url, model="standin-model", lane="research", max_retries=0)
        )
        with pytest.raises(LLMError):
            research.complete([{"role": "user", "content": "first"}])
        research.complete([{"role": "user", "content": "second"}], use_cache=False)
        annotator = ChatClient(ChatConfig(base_url=server.base_url, model="standin-model", max_retries=0))
        annotator.complete([{"role": "user", "content": "third"}], use_cache=False)
        where = server.base_url.rstrip("/")
    after = scrape(client)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # django-prometheus's requests (the scrape is answered before its middleware counts it)
    assert delta("django_http_requests_total_by_method_total", method="GET") == 3
    assert delta("satisfy_celery_task_seconds_count", task="annotation.tasks.sweep_generation", outcome="success") == 1
    assert delta("satisfy_model_server_call_seconds_count", lane="research", server=where, outcome="ok") == 1
    assert delta("satisfy_model_server_call_seconds_count", lane="research", server=where, outcome="status_503") == 1
    assert delta("satisfy_model_server_call_errors_total", lane="research", server=where) == 1
    assert delta("satisfy_model_server_call_seconds_count", lane="annotator", server=where, outcome="ok") == 1
    assert value(after, "satisfy_model_server_slots_in_use", lane="annotator", server=where) == 0
    assert delta("django_db_execute_total", vendor="postgresql") > 0  # the database wrapper counts statements


@pytest.mark.django_db
def test_metrics_read_the_queue_depths_from_the_broker(metrics_on: None, client: Client) -> None:
    from tests.integration.worker import broker_url, celery_app_sending_to, flush_broker

    url = broker_url()
    flush_broker(url)
    try:
        with celery_app_sending_to(url) as app:
            for _ in range(3):
                app.send_task("analysis.tasks.sweep_research_jobs", queue="research")
            app.send_task("annotation.tasks.sweep_generation", queue="annotator")
            samples = scrape(client)
    finally:
        flush_broker(url)
    assert value(samples, "satisfy_queue_depth", queue="research") == 3
    assert value(samples, "satisfy_queue_depth", queue="annotator") == 1
    assert value(samples, "satisfy_queue_depth", queue="default") == 0


def _question(participation: Any, index: int, *, status: str, asked: Any) -> Query:
    persona = PersonaProfile.objects.filter(participation=participation).first()
    query = Query.objects.create(
        participation=participation,
        index=index,
        text=f"question {index}",
        client_token=f"t{index}",
        persona=persona,
        status=status,
        retrieval_backend="demo",
    )
    Query.objects.filter(pk=query.pk).update(created_at=asked)
    return query


def _shown(query: Query, *, first_at: Any, systems: list[Any]) -> None:
    """A bracket whose first match was shown at `first_at` (its second match a minute later)."""
    a, b, c, d = (
        Candidate.objects.create(query=query, system=s, status="done", text="x", finished_at=first_at) for s in systems
    )
    bracket = Bracket.objects.create(query=query, seed=1)
    Match.objects.create(bracket=bracket, round=1, index=0, label="r1", left=a, right=b, shown_at=first_at)
    Match.objects.create(
        bracket=bracket, round=1, index=1, label="r1b", left=c, right=d, shown_at=first_at + timedelta(minutes=1)
    )


@pytest.mark.django_db
def test_the_health_panel_and_metrics_show_what_the_database_holds(
    metrics_on: None, settings: Any, client: Client
) -> None:
    settings.ANNOTATION_WAIT_DEADLINE_S = 120
    now = timezone.now()
    study = StudyFactory(slug="healthy", status="open")
    systems = list(study.systems.order_by("order"))
    assert len(systems) == 4
    # Three questions shown in the last hour after 4, 10 and 30 s; one shown two hours ago (outside the window).
    waits = [4, 10, 30]
    for n, wait in enumerate(waits, start=1):
        participation = join(study)
        asked = now - timedelta(minutes=10 * n)
        _shown(
            _question(participation, 1, status="ready", asked=asked),
            first_at=asked + timedelta(seconds=wait),
            systems=systems,
        )
    old = join(study)
    asked = now - timedelta(hours=2)
    _shown(_question(old, 1, status="ranked", asked=asked), first_at=asked + timedelta(seconds=500), systems=systems)
    # Waiting now: one for 30 s, one for 5 minutes (past the deadline), one whose summary failed (not waiting).
    _question(join(study), 1, status="generating", asked=now - timedelta(seconds=30))
    _question(join(study), 1, status="retrieving", asked=now - timedelta(minutes=5))
    failed_query = _question(join(study), 1, status="generating", asked=now - timedelta(minutes=5))
    Candidate.objects.create(
        query=failed_query, system=systems[0], status="failed", finished_at=now - timedelta(minutes=4)
    )
    Candidate.objects.create(query=failed_query, system=systems[1], status="done", text="y", finished_at=now)

    owner = get_user_model().objects.create_user("owner", password="pw", is_staff=True)
    StudyMembership.objects.create(study=study, user=owner, role="owner")
    stranger = get_user_model().objects.create_user("stranger", password="pw", is_staff=True)
    client.force_login(owner)
    page = client.get(f"/admin/health/{study.pk}/")
    assert page.status_code == 200
    html = page.content.decode()

    def cell(ident: str) -> str:
        start = html.index(f'id="{ident}">') + len(f'id="{ident}">')
        return html[start : html.index("<", start)].strip()

    assert cell("waiting") == "2"
    assert cell("waiting-past-deadline") == "1"
    assert cell("questions-shown") == "3"
    assert cell("wait-p50") == "10.0"  # of 4, 10, 30 s
    assert cell("wait-p95") == "30.0"
    # summaries finished in the last hour: 3 x 4 shown + 1 failed + 1 done; the old bracket's are 2 h old
    assert (cell("generated"), cell("failed")) == ("14", "1")
    assert "annotator" in html and "research" in html  # the queues

    samples = scrape(client)
    assert value(samples, "satisfy_annotators_waiting") == 2
    assert value(samples, "satisfy_annotators_waiting_past_deadline") == 1
    assert value(samples, "satisfy_question_first_comparison_seconds_count") == 4
    assert value(samples, "satisfy_question_first_comparison_seconds_bucket", le="10.0") == 2
    assert value(samples, "satisfy_question_first_comparison_seconds_sum") == pytest.approx(4 + 10 + 30 + 500)

    # The admin index says someone waits past the deadline, with a link to the panel.
    index = client.get("/admin/").content.decode()
    assert "1 annotator is waiting past the 120 s deadline" in index and f"/admin/health/{study.pk}/" in index

    client.force_login(stranger)
    assert client.get(f"/admin/health/{study.pk}/").status_code == 404
    assert f"/admin/health/{study.pk}/" not in client.get("/admin/").content.decode()
