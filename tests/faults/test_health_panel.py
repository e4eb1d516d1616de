"""The study health panel during a fault (docs/deploy.md, "The study health panel and alerts"), in Chromium: a real
worker generates through a stand-in model server that answers, then refuses, then hangs, while annotators wait.
The panel must show the failures and the waiting annotators, its numbers those the database holds at that moment;
the screenshot is the by-product docs/deploy.md shows (written to var/screenshots/, or to docs/screens/ with
UPDATE_SCREENS=1)."""

from __future__ import annotations

import math
import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Min
from django.test import Client
from django.utils import timezone

from annotation.models import Candidate, Participation, Query
from generation.settings import configure_model_servers
from studies.models import Study, StudyMembership
from tests.conftest import require
from tests.e2e.conftest import SCREENSHOTS
from tests.faults import actions
from tests.faults.scenarios import Annotator, Rig, openai_systems, poll
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.browser, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
SCREEN = "health-panel-fault.png"
DEADLINE_S = 5


def screen_path() -> Path:
    folder = REPO / "docs" / "screens" if os.environ.get("UPDATE_SCREENS") == "1" else SCREENSHOTS
    folder.mkdir(parents=True, exist_ok=True)
    return folder / SCREEN


def database_numbers(study: Study) -> dict[str, str]:
    """The panel's numbers read from the tables as docs/deploy.md defines them, formatted as the panel shows them."""
    now = timezone.now()
    queries = list(Query.objects.filter(participation__study=study).select_related("participation"))
    failed_queries = set(
        Candidate.objects.filter(query__in=queries, status=Candidate.Status.FAILED).values_list("query_id", flat=True)
    )
    going_on = [
        q
        for q in queries
        if q.status in (Query.Status.RETRIEVING, Query.Status.GENERATING)
        and q.pk not in failed_queries
        and not (q.participation.completed_at or q.participation.stopped_at or q.participation.screened_out_at)
    ]
    overdue = [q for q in going_on if (now - q.created_at).total_seconds() >= DEADLINE_S]
    shown = Query.objects.filter(pk__in=[q.pk for q in queries]).annotate(first=Min("bracket__matches__shown_at"))
    waits = sorted((q.first - q.created_at).total_seconds() for q in shown if q.first is not None)
    candidates = Candidate.objects.filter(query__in=queries, finished_at__gte=now - timedelta(hours=1))
    generated = candidates.filter(status__in=(Candidate.Status.DONE, Candidate.Status.FAILED)).count()
    failed = candidates.filter(status=Candidate.Status.FAILED).count()

    def nearest_rank(share: float) -> str:
        return f"{waits[math.ceil(share * len(waits)) - 1]:.1f}" if waits else "no data"

    return {
        "waiting": str(len({q.participation_id for q in going_on})),
        "waiting-past-deadline": str(len({q.participation_id for q in overdue})),
        "questions-shown": str(len(waits)),
        "wait-p50": nearest_rank(0.5),
        "wait-p95": nearest_rank(0.95),
        "generated": str(generated),
        "failed": str(failed),
        "failure-rate": f"{round(100 * failed / generated)} %" if generated else "no data",
    }


def test_the_health_panel_shows_a_failing_then_hanging_model_server_and_the_annotators_waiting(
    celery_workers: Any, live_server: Any, browser: Any, settings: Any
) -> None:
    rig = Rig(pool=celery_workers, live_url=live_server.url, browser=browser)
    settings.ANNOTATION_WAIT_DEADLINE_S = DEADLINE_S
    answering = threading.Event()
    answering.set()
    # The panel reads the model server's slots from this process's limiter: the worker leases them in the same Redis.
    configure_model_servers()
    require(settings.MODEL_SERVER_LIMIT_URL.startswith("redis"), "the model-server limiter needs a Redis")
    with openai_standin(hold=answering, hang_s=120) as llm:
        settings.LLM_BASE_URL = llm.base_url  # the panel lists the deployment's model servers
        study = actions.study_open(slug=rig.slug("health"), systems=openai_systems(llm.base_url, timeout=90))
        rig.start_worker("worker", env={"MODEL_SERVER_LIMIT_URL": settings.MODEL_SERVER_LIMIT_URL}, concurrency=2)

        # Healthy: two annotators get their comparisons.
        for annotator in [Annotator.join(study) for _ in range(2)]:
            query_id = annotator.ask().json()["id"]
            assert poll(lambda q=query_id: Query.objects.get(pk=q).status == Query.Status.READY, timeout=60)
            assert annotator.current_match(query_id)[0] == 200  # the first comparison is shown
        # The server refuses every request (a 400 is no transient fault): two annotators' summaries fail.
        llm.script.extend(["400"] * 8)
        failing = [Annotator.join(study).ask().json()["id"] for _ in range(2)]
        assert poll(
            lambda: Candidate.objects.filter(query_id__in=failing, status=Candidate.Status.FAILED).count() == 8,
            timeout=60,
        )
        # The server hangs: three annotators wait, past the deadline, behind the worker's two held calls.
        answering.clear()
        waiting = [Annotator.join(study).ask().json()["id"] for _ in range(3)]
        assert poll(lambda: llm.in_flight == 2, timeout=30), llm.in_flight
        oldest = min(Query.objects.filter(pk__in=waiting).values_list("created_at", flat=True))
        poll(lambda: (timezone.now() - oldest).total_seconds() > DEADLINE_S + 1, timeout=DEADLINE_S + 5)

        owner = get_user_model().objects.create_user("health-owner", password="pw", is_staff=True)
        StudyMembership.objects.create(study=study, user=owner, role="owner")
        session = Client()
        session.force_login(owner)
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        context.add_cookies(
            [{"name": "sessionid", "value": session.cookies["sessionid"].value, "url": live_server.url}]
        )
        page = context.new_page()
        page.goto(f"{live_server.url}/admin/health/{study.pk}/")
        shown = {ident: (page.text_content(f"#{ident}") or "").strip() for ident in database_numbers(study)}
        held = {"server": (page.text_content("#model-servers td") or "").strip(), "in_flight": llm.in_flight}
        banner = page.text_content(".messagelist") or ""
        page.screenshot(path=str(screen_path()), full_page=True)
        stored = database_numbers(study)
        context.close()
        answering.set()  # let the held calls end

    assert shown == stored, f"the panel {shown}\nthe database {stored}"
    # The fault, as an operator reads it: the refused summaries and the annotators waiting past the deadline.
    assert stored["failed"] == "8" and stored["failure-rate"] == f"{round(800 / int(stored['generated']))} %"
    assert stored["waiting"] == stored["waiting-past-deadline"] == "3"
    assert stored["questions-shown"] == "2"
    assert held["in_flight"] == 2 and held["server"] == f"2 / {settings.LLM_CONCURRENCY}"  # the two held calls
    assert "summaries failed in the last hour" in banner and f"waiting past the {DEADLINE_S} s deadline" in banner
    assert Participation.objects.filter(study=study).count() == 7
