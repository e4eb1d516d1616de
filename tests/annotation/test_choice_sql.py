"""Recording a choice reads and locks its bracket's matches in one plain statement
(annotation.services.tournament._bracket_matches_locked); here it is held to its ORM equivalent, the
select_for_update read it replaced, on real rows: the same matches in the same order with the same columns,
judgments, bracket, question, participation and study, and reading those loads nothing more."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Match, Query
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import CHOICE_COLUMNS, _bracket_matches_locked, judgment_record
from tests.annotation.factories import StudyFactory, join
from tests.annotation.orm_reads import bracket_locked

pytestmark = pytest.mark.django_db


def _rows(matches: list[Match]) -> Any:
    """Every column the SQL reads, from each match and the objects it comes with."""
    out = []
    for match in matches:
        judgment = getattr(match, "judgment", None)
        query = match.bracket.query
        objects = [match, judgment, match.bracket, query, query.participation, query.participation.study]
        out.append(
            [
                [getattr(obj, name) for name in names] if obj is not None else None
                for obj, (_, _, names) in zip(objects, CHOICE_COLUMNS, strict=True)
            ]
        )
        if judgment is not None:
            assert judgment.match is match
    return out


def _same(match_id: int) -> list[Match]:
    with CaptureQueriesContext(connection) as read:
        raw = _bracket_matches_locked(match_id)
        rows = _rows(raw)  # nothing deferred is read, and a match without a judgment knows it
    assert len(read.captured_queries) == 1
    assert "FOR UPDATE OF" in read.captured_queries[0]["sql"]
    assert rows == _rows(bracket_locked(match_id))
    assert len({id(m.bracket) for m in raw}) <= 1  # one bracket for all, as the advance expects
    return raw


def test_the_locked_read_is_the_orm_read(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="locked", check_share=1.0)
    with django_capture_on_commit_callbacks(execute=True):
        query_submit(participation=join(study), text="Night shifts and sleep", client_token="")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="Shift work and patient safety", client_token="")
    assert _same(0) == []  # no such match
    answered = 0
    while (pending := match_current(query=query)) is not None:
        for match in Match.objects.filter(bracket__query=query):
            _same(match.pk)
        judgment_record(match=pending, choice=pending.check_expected or "left", by=participation)
        answered += 1
    assert answered == 4  # two first-round matches, the final, the attention check
    for match in Match.objects.filter(bracket__query=query):
        raw = _same(match.pk)
    assert [m.status for m in raw] == [Match.Status.ANSWERED] * 4
    assert raw[0].bracket.pair_likeness == Query.objects.get(pk=query.pk).bracket.pair_likeness
