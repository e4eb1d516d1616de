"""Two runs of one judge storing at the same moment, on their own PostgreSQL connections: a run whose judge
failed never overwrites a rating (or a pairwise vote) that a run whose judge answered commits while the first
is storing."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from annotation.models import Candidate
from scoring import services
from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from tests.analysis.conftest import played_study  # noqa: F401 - the fixture: a study with real answers
from tests.scoring.test_judge_runs import prefer_longer, rate_by_length
from tests.support.openai_standin import openai_standin
from tests.support.races import at_once

pytestmark = pytest.mark.django_db(transaction=True)


def _blocking_another_connection() -> bool:
    """Whether a statement on another connection waits for a lock this connection's transaction holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
        )
        (waiting,) = cursor.fetchone()
    return bool(waiting)


def _store_while_the_other_waits(runs: dict[str, ScoringRun], chunk: list[int]) -> None:
    """The answering run stores its chunk and holds its transaction open until the broken run's write of the
    same chunk waits on it, then commits; each on its own connection. Neither may raise."""
    stored = threading.Event()

    def answering_run() -> None:
        with transaction.atomic():
            services.scoring_run_chunk(run_id=runs["answering"].pk, candidate_ids=chunk, chunk_index=0)
            stored.set()
            deadline = time.monotonic() + 60
            while not _blocking_another_connection() and time.monotonic() < deadline:
                time.sleep(0.05)

    def broken_run() -> int:
        assert stored.wait(60), "the answering run never stored its chunk"
        return services.scoring_run_chunk(run_id=runs["broken"].pk, candidate_ids=chunk, chunk_index=0)

    results = at_once(answering_run, broken_run, timeout=180)
    assert not any(isinstance(result, BaseException) for result in results), results


@pytest.mark.timeout(240)
def test_a_failing_judge_run_keeps_the_ratings_a_concurrent_run_commits(played_study, monkeypatch, settings, tmp_path):  # noqa: F811
    # Run "broken" reaches a judge replica that answers no rating; run "answering" reaches one that rates.
    # Both are judge-a with one model, so both write the same score rows. The broken run used to read which
    # rows held a value, see none (the answering run had not committed), and then write its empty values over
    # the ratings the answering run committed before the broken run's write went through.
    monkeypatch.setenv("JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
    for name in ("JUDGE_BASE_URL", "JUDGE_MODEL", "JUDGE_NAME"):
        monkeypatch.delenv(name, raising=False)
        setattr(settings, name, "")

    def no_rating(body: dict[str, Any]) -> str:
        return "I would rather not rate this summary."

    with openai_standin(rate_by_length) as answering, openai_standin(no_rating) as broken:
        runs: dict[str, ScoringRun] = {}
        with monkeypatch.context() as patch:
            patch.setattr(services, "_send_chunks", lambda **_: None)  # the test is the worker: it runs the chunks
            for name, server in (("answering", answering), ("broken", broken)):
                judge = {"model": "standin-model", "base_url": server.base_url, "name": "judge-a"}
                runs[name] = services.scoring_run_start(study=played_study, metrics=["geval_fluency"], judge=judge)
        (chunk,) = runs["answering"].chunks
        assert runs["broken"].chunks == [chunk]
        _store_while_the_other_waits(runs, chunk)
        assert broken.completions > 0 and answering.completions > 0

    for run in runs.values():
        run.refresh_from_db()
        assert run.status == ScoringRun.Status.DONE, run.error
    ratings = dict(CandidateScore.objects.filter(metric="geval_fluency").values_list("candidate_id", "value"))
    assert sorted(ratings) == sorted(Candidate.objects.filter(pk__in=chunk).values_list("pk", flat=True))
    assert None not in ratings.values(), "the failed run wiped ratings the other run had committed"


@pytest.mark.timeout(240)
def test_a_failing_pairwise_run_keeps_the_votes_a_concurrent_run_commits(played_study, monkeypatch, settings, tmp_path):  # noqa: F811
    # As for scores: judge-a's first pairwise run got no usable answers (empty votes are stored with their
    # reason); two more runs store at once, one answered. The failing one read the empty votes, and then wrote
    # its empty answer over the votes the answered run committed before its write went through.
    monkeypatch.setenv("JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
    for name in ("JUDGE_BASE_URL", "JUDGE_MODEL", "JUDGE_NAME"):
        monkeypatch.delenv(name, raising=False)
        setattr(settings, name, "")

    def no_choice(body: dict[str, Any]) -> str:
        return "Both are fine, really."

    with openai_standin(prefer_longer) as answering, openai_standin(no_choice) as broken:
        judges = {
            name: {"model": "standin-model", "base_url": server.base_url, "name": "judge-a"}
            for name, server in (("answering", answering), ("broken", broken))
        }
        services.pairwise_run_start(study=played_study, judge=judges["broken"])  # runs at once (eager tasks)
        assert set(PairwiseVote.objects.values_list("choice", flat=True)) == {""}
        runs: dict[str, ScoringRun] = {}
        with monkeypatch.context() as patch:
            patch.setattr(services, "_send_chunks", lambda **_: None)  # the test is the worker: it runs the chunks
            for name, judge in judges.items():
                runs[name] = services.pairwise_run_start(study=played_study, judge=judge)
        (chunk,) = runs["answering"].chunks
        _store_while_the_other_waits(runs, chunk)

    for run in runs.values():
        run.refresh_from_db()
        assert run.status == ScoringRun.Status.DONE, run.error
    votes = list(PairwiseVote.objects.values_list("match_id", "order", "choice"))
    assert len(votes) == 2 * len(chunk)
    assert "" not in {choice for *_, choice in votes}, "the failed run wiped votes the other run had committed"


def test_two_copies_of_one_chunk_storing_at_once_count_it_once(played_study, monkeypatch):  # noqa: F811
    # A chunk whose store waits out a database outage longer than its run's lease (kernel.db.database_retried)
    # can be sent again by the sweeper while the first copy is still storing: both copies then store at once,
    # each on its own connection. The run counts the chunk once and holds one score per candidate.
    with monkeypatch.context() as patch:
        patch.setattr(services, "_send_chunks", lambda **_: None)  # the test is the worker: it runs the chunks
        run = services.scoring_run_start(study=played_study, metrics=["rouge1"])
    (chunk,) = run.chunks

    stored = threading.Event()

    def first_copy() -> int:
        """Stores and counts the chunk, and commits only once the other copy's store waits on it (or after 10 s)."""
        with transaction.atomic():
            counted = services.scoring_run_chunk(run_id=run.pk, candidate_ids=chunk, chunk_index=0)
            stored.set()
            deadline = time.monotonic() + 10
            while not _blocking_another_connection() and time.monotonic() < deadline:
                time.sleep(0.05)
        return counted

    def second_copy() -> int:
        assert stored.wait(60), "the first copy never stored its chunk"
        return services.scoring_run_chunk(run_id=run.pk, candidate_ids=chunk, chunk_index=0)

    results = at_once(first_copy, second_copy, timeout=120)
    assert results == [len(chunk), 0], results  # the first copy counted it; the second found it counted
    run.refresh_from_db()
    assert (run.status, run.done, run.chunks_done) == (ScoringRun.Status.DONE, len(chunk), [0])
    scores = CandidateScore.objects.filter(metric="rouge1", candidate_id__in=chunk)
    assert sorted(scores.values_list("candidate_id", flat=True)) == sorted(chunk)
