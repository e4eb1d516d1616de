"""`score_study --now` runs a scoring run in its own process (Celery's eager mode): every chunk is scored,
however many chunks the run has, with the broker bound (RESEARCH_MAX_INFLIGHT_CHUNKS) irrelevant there."""

from __future__ import annotations

import pytest
from celery import current_app

from annotation.services.query import query_submit
from scoring import services
from scoring.models import ScoringRun
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How does night shift work affect nurses' sleep and patient safety?"


def test_an_eager_run_with_many_chunks_scores_them_all(monkeypatch, settings):
    study = StudyFactory()
    # Committed for real, as in `score_study --now`: each on_commit callback runs when its transaction ends.
    for n in range(30):
        query_submit(participation=join(study), text=f"{QUESTION} ({n})", client_token="")
    monkeypatch.setattr(services, "CHUNK_SIZE", 1)
    # One chunk in flight: on a broker each chunk sends the next; run in-process, that chain must not nest one
    # call inside the previous for each of the 120 chunks (it ended in a RecursionError).
    settings.RESEARCH_MAX_INFLIGHT_CHUNKS = 1
    assert current_app.conf.task_always_eager
    run = services.scoring_run_start(study=study, metrics=["rouge1"])
    run.refresh_from_db()
    assert (run.status, run.done, run.total, len(run.chunks)) == (ScoringRun.Status.DONE, 120, 120, 120)
    assert sorted(run.chunks_done) == list(range(120))
