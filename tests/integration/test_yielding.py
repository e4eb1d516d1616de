"""Research work yields to annotator work on its host, with real workers (kernel/yielding.py): a scoring chunk
started while an annotator's summaries are being generated waits for them to finish; with yielding turned
off it finishes while they are still being generated; and its pause is bounded (RESEARCH_YIELD_MAX_PAUSE_S).
The marks are in Redis whichever broker the workers use, so these run on Redis only."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from annotation.models import Candidate, Query
from scoring import services
from scoring.models import ScoringRun
from tests.annotation.factories import StudyFactory
from tests.integration.test_worker import ask, describe, openai_study, settled
from tests.integration.worker import WorkerPool, broker_url, wait_for, worker_pool
from tests.support.openai_standin import openai_standin

pytestmark = [pytest.mark.worker, pytest.mark.timeout(180)]

DELAY_S = 6.0  # each generation of the annotator's question waits this long at the model server


@pytest.fixture
def celery_workers(transactional_db: None, tmp_path: Path) -> Iterator[WorkerPool]:
    """Workers on Redis only (this module's own: tests/integration's conftest runs each test on both brokers)."""
    with worker_pool(tmp_path, broker_url()) as pool:
        yield pool


def finished(run: ScoringRun) -> bool:
    run.refresh_from_db()
    return run.status != ScoringRun.Status.RUNNING


@pytest.mark.parametrize("mode", ["yields", "off", "bounded"])
def test_a_scoring_chunk_waits_for_the_annotator_work_in_flight_on_its_host(
    celery_workers: WorkerPool, mode: str
) -> None:
    env = {
        # Yielding needs a Redis: the test workers' own, whichever broker the workers use.
        "RESEARCH_YIELD_URL": broker_url(),
        "RESEARCH_YIELD_HOST": f"test-{uuid.uuid4().hex[:8]}",  # both workers on one (made-up) host
        "RESEARCH_YIELDS_TO_ANNOTATORS": "false" if mode == "off" else "true",
        "RESEARCH_YIELD_MAX_PAUSE_S": "1" if mode == "bounded" else "60",
    }
    celery_workers.start(
        "annotator",
        queues=[django_settings.ANNOTATOR_QUEUE, django_settings.RETRIEVAL_QUEUE],
        concurrency=4,
        extra_env=env,
    )
    research = celery_workers.start(
        "research",
        queues=[django_settings.RESEARCH_QUEUE, django_settings.CELERY_TASK_DEFAULT_QUEUE],
        concurrency=1,
        extra_env=env,
    )
    # A study with generated candidates to score; a first run loads the metric suite in the research process.
    scored = StudyFactory(slug=f"scored-{mode}")
    done = ask(scored)
    wait_for(lambda: settled(done), timeout=60, message=describe(done, celery_workers))
    warm = services.scoring_run_start(study=scored, metrics=["rouge1"])
    wait_for(lambda: finished(warm), timeout=60, message=celery_workers.logs)

    with openai_standin(delay=DELAY_S) as standin:
        query = ask(openai_study(standin, slug=f"slow-{mode}", timeout=DELAY_S + 10))
        # The annotator's four summaries are being generated (the model server holds each for DELAY_S) ...
        wait_for(
            lambda: Candidate.objects.filter(query=query, status=Candidate.Status.RUNNING).count() == 4,
            timeout=30,
            interval=0.05,
            message=describe(query, celery_workers),
        )
        # ... when a researcher starts a scoring run: one chunk of four candidates, well under a second of work.
        run = services.scoring_run_start(study=scored, metrics=["rouge1"])
        wait_for(lambda: finished(run), timeout=60, interval=0.05, message=celery_workers.logs)
        wait_for(lambda: settled(query), timeout=60, message=describe(query, celery_workers))

    run.refresh_from_db()
    assert (run.status, run.done) == (ScoringRun.Status.DONE, 4), celery_workers.logs()[-4000:]
    assert Query.objects.get(pk=query.pk).status == Query.Status.READY
    generated = [c.finished_at for c in Candidate.objects.filter(query=query)]
    assert run.finished_at is not None and all(generated)
    paused = re.findall(r"chunk 0 paused (\d+) times, ([\d.]+) s in all, for annotator work", research.log())
    if mode == "yields":
        # The chunk waited for the annotator's summaries: it finished only after the last of them.
        assert run.finished_at > max(generated), celery_workers.logs()[-4000:]
        assert len(paused) == 1 and float(paused[0][1]) >= 1.0, research.log()[-3000:]
    else:
        # Off, or past its bound of 1 s: the chunk finished while the summaries were still being generated.
        assert run.finished_at < min(generated), celery_workers.logs()[-4000:]
        if mode == "off":
            assert paused == [], research.log()[-3000:]
        else:
            assert len(paused) == 1 and 0.9 <= float(paused[0][1]) <= 1.5, research.log()[-3000:]
