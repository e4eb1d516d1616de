"""`score_study --now` runs a scoring run in its own process (Celery's eager mode): every chunk is scored,
however many chunks the run has, with the broker bound (RESEARCH_MAX_INFLIGHT_CHUNKS) irrelevant there."""

from __future__ import annotations

import pytest
from celery import current_app

from annotation.models import Candidate
from annotation.services.query import query_submit
from scoring import services
from scoring.models import CandidateScore, ScoringRun
from tests.annotation.factories import PERSONA, StudyFactory, join

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


def test_a_rerun_overwrites_each_score_and_a_candidate_listed_twice_in_a_chunk_is_stored_once():
    study = StudyFactory()
    for n in range(2):
        query_submit(participation=join(study), text=f"{QUESTION} ({n})", client_token="")
    services.scoring_run_start(study=study, metrics=["rouge1", "rouge2"])
    scores = CandidateScore.objects.filter(candidate__query__participation__study=study)
    assert scores.count() == 8 * 2
    changed = Candidate.objects.filter(query__participation__study=study).order_by("pk").first()
    before = {s.metric: (s.value, s.computed_at) for s in scores.filter(candidate=changed)}
    Candidate.objects.filter(pk=changed.pk).update(text="Nothing about the question at all.")

    ids = list(Candidate.objects.filter(query__participation__study=study).values_list("pk", flat=True))
    run = services._run_create(study=study, metrics=["rouge1", "rouge2"], options={}, by=None, ids=ids * 2)
    run.refresh_from_db()
    assert (run.status, run.done, len(run.chunks)) == (ScoringRun.Status.DONE, 16, 1)
    # The same rows, rewritten: the changed summary's scores are new, nothing was added.
    assert scores.count() == 8 * 2
    after = {s.metric: (s.value, s.computed_at) for s in scores.filter(candidate=changed)}
    assert after["rouge1"][0] != before["rouge1"][0] and after["rouge1"][1] > before["rouge1"][1]
    assert after["rouge2"][1] > before["rouge2"][1]


def test_a_researchers_preview_is_not_scored(django_user_model):
    """A preview never reaches the analysis (docs/crowd.md), so its summaries cost no metric or judge call, and
    a preview restarted during a run (its summaries deleted) leaves the run nothing to store for them."""
    from annotation.services.participation import participation_preview_start
    from annotation.services.persona import persona_save
    from studies.models import StudyMembership

    study = StudyFactory()
    query_submit(participation=join(study), text=QUESTION, client_token="")
    owner = django_user_model.objects.create_user("owner", password="pw")
    StudyMembership.objects.create(study=study, user=owner, role="owner")
    preview = participation_preview_start(study=study, by=owner)
    persona_save(participation=preview, data=PERSONA)
    query_submit(participation=preview, text=f"{QUESTION} (preview)", client_token="")
    assert Candidate.objects.filter(query__participation__study=study, status="done").count() == 8

    run = services.scoring_run_start(study=study, metrics=["rouge1"])
    run.refresh_from_db()
    assert (run.status, run.total, run.done) == (ScoringRun.Status.DONE, 4, 4)
    scored = CandidateScore.objects.filter(candidate__query__participation__study=study)
    assert not scored.filter(candidate__query__participation=preview).exists()
