"""Two answers at the same moment end in one correct record: sibling matches answered concurrently
(real PostgreSQL transactions in threads) always create their final, and a stale tab learns what was recorded."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from annotation.models import Judgment, Match, Query
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from kernel.exceptions import ApplicationError
from tests.annotation.factories import StudyFactory, join

BRACKETS = 50
AT_ONCE = 10  # brackets per wave: 20 threads, each with its own database connection


def _ready_queries(count: int) -> list[Query]:
    study = StudyFactory()
    queries = []
    for n in range(count):
        # Committed at once (transactional_db), so retrieval and generation run now (eager tasks in tests).
        query = query_submit(participation=join(study), text=f"Night shifts and sleep, question {n}", client_token="")
        queries.append(query)
    assert Query.objects.filter(pk__in=[q.pk for q in queries], status=Query.Status.READY).count() == count
    return queries


@pytest.mark.timeout(120)
def test_both_first_round_matches_answered_at_once_always_create_the_final(transactional_db: None) -> None:
    queries = _ready_queries(BRACKETS)
    errors: list[BaseException] = []

    def answer(match: Match, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            judgment_record(match=match, choice="left", by=match.bracket.query.participation)
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    for start in range(0, BRACKETS, AT_ONCE):
        wave = queries[start : start + AT_ONCE]
        matches = list(
            Match.objects.filter(bracket__query__in=wave, round=1).select_related("bracket__query__participation")
        )
        assert len(matches) == 2 * len(wave)
        barrier = threading.Barrier(len(matches))
        threads = [threading.Thread(target=answer, args=(match, barrier)) for match in matches]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors

    finals = Match.objects.filter(bracket__query__in=queries, label="final")
    assert finals.count() == BRACKETS  # exactly one final per bracket
    for final in finals.select_related("bracket"):
        winners = set(
            Judgment.objects.filter(match__bracket=final.bracket, match__round=1).values_list("winner_id", flat=True)
        )
        assert final.status == Match.Status.PENDING and {final.left_id, final.right_id} == winners


@pytest.mark.django_db
def test_a_stale_tab_answering_differently_is_told_what_was_recorded(django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=join(StudyFactory()), text="Night shifts and sleep", client_token="")
    match = Match.objects.filter(bracket__query=query).order_by("index").first()
    participation = query.participation
    judgment_record(match=match, choice="right", by=participation)
    assert judgment_record(match=match, choice="right", by=participation).choice == "right"  # a resend: harmless
    with pytest.raises(ApplicationError) as refused:
        judgment_record(match=match, choice="neither", by=participation)
    assert refused.value.status == 409
    assert refused.value.extra == {"match": match.pk, "recorded_choice": "right"}
    assert "already answered, with the right summary" in refused.value.message
    assert Judgment.objects.get(match=match).choice == "right"
