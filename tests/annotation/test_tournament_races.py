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


@pytest.mark.timeout(120)
def test_one_match_answered_twice_at_once_keeps_one_answer(transactional_db: None) -> None:
    """Two requests for the same match at the same moment (a double press, a second tab): the one that waits
    for the lock reads the match as answered before it can see the judgment, and must still find it: the same
    choice comes back as the recorded judgment, a different one is refused with it; never a 500 or a second row."""
    queries = _ready_queries(AT_ONCE)
    outcomes: list[tuple[int, str, object]] = []
    lock = threading.Lock()

    def answer(match: Match, choice: str, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            result: object = judgment_record(match=match, choice=choice, by=match.bracket.query.participation)
        except BaseException as error:  # noqa: BLE001 - inspected by the main thread
            result = error
        finally:
            connection.close()
        with lock:
            outcomes.append((match.pk, choice, result))

    matches = list(
        Match.objects.filter(bracket__query__in=queries, round=1, index=0).select_related(
            "bracket__query__participation"
        )
    )
    barrier = threading.Barrier(2 * len(matches))
    # Half the brackets get the same answer twice, the other half two different ones.
    pairs = [(m, "left", "left" if n % 2 else "right") for n, m in enumerate(matches)]
    threads = [
        threading.Thread(target=answer, args=(m, choice, barrier)) for m, *choices in pairs for choice in choices
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    stored = {j.match_id: j for j in Judgment.objects.filter(match__in=matches)}
    assert len(stored) == len(matches) and Judgment.objects.count() == len(matches)
    for match_id, choice, result in outcomes:
        recorded = stored[match_id]
        if isinstance(result, Judgment):
            assert result.pk == recorded.pk and result.choice == choice == recorded.choice
        else:
            assert isinstance(result, ApplicationError), result
            assert result.status == 409 and result.extra == {"match": match_id, "recorded_choice": recorded.choice}
            assert choice != recorded.choice
    assert Match.objects.filter(pk__in=stored, status=Match.Status.ANSWERED).count() == len(matches)


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
