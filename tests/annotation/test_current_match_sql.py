"""The current match's reads are plain SQL (annotation.selectors.tournament: the API's match_current_shown,
the comparison page's match_current_of); here each is held to its ORM equivalent, the select_related read it
replaced (tests/annotation/orm_reads.py), on real rows: the same match or none, the same columns, and what
the view reads of it loads nothing more."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from annotation.api.serializers import match_body
from annotation.models import Match, Participation
from annotation.selectors.tournament import (
    PAGE_COLUMNS,
    SHOWN_COLUMNS,
    match_current,
    match_current_of,
    match_current_shown,
)
from annotation.services.participation import participation_require_active
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from kernel.exceptions import ApplicationError
from studies.models import Study
from tests.annotation.factories import StudyFactory, join
from tests.annotation.orm_reads import current_match_api, current_match_page

pytestmark = pytest.mark.django_db


def _row(match: Match | None, shape: Any = SHOWN_COLUMNS) -> Any:
    """Every column the SQL reads, from the match and the objects it comes with."""
    if match is None:
        return None
    query = match.bracket.query
    if shape is PAGE_COLUMNS:
        objects = [match, match.bracket, query, match.left, match.right]
    else:
        participation = query.participation
        objects = [match, match.bracket, query, participation, participation.study, match.left, match.right]
    return [
        [getattr(obj, name) for name in names] if obj is not None else None
        for obj, (_, _, names) in zip(objects, shape, strict=True)
    ]


def _page(participation: Participation, index: int, django_assert_num_queries) -> Match | None:
    # One statement, and nothing loaded afterwards by what the page reads of the match and its question.
    with django_assert_num_queries(1):
        raw = match_current_of(participation=participation, index=index)
        if raw is not None:
            match_body(raw)
            assert raw.bracket.query.participation is participation
            assert raw.bracket.rounds >= 1
    assert _row(raw, PAGE_COLUMNS) == _row(current_match_page(participation=participation, index=index), PAGE_COLUMNS)
    return raw


def _both(annotator: Any, query_id: int, django_assert_num_queries) -> Match | None:
    # One statement, and nothing loaded afterwards by what the view reads: the body and the active checks.
    with django_assert_num_queries(1):
        raw = match_current_shown(annotator=annotator, query_id=query_id)
        if raw is not None:
            match_body(raw)
            try:
                participation_require_active(participation=raw.bracket.query.participation)
            except ApplicationError:
                pass
    assert _row(raw) == _row(current_match_api(annotator_id=annotator.pk, query_id=query_id))
    return raw


def test_the_current_match_sql_reads_what_the_orm_read(django_capture_on_commit_callbacks, django_assert_num_queries):
    study = StudyFactory(slug="sql", check_share=1.0)
    first = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query_submit(participation=first, text="Night shifts and sleep", client_token="")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="Shift work and patient safety", client_token="")
    annotator = participation.annotator
    stranger = first.annotator
    seen = 0
    while (pending := match_current(query=query)) is not None:
        raw = _both(annotator, query.pk, django_assert_num_queries)
        assert raw is not None and raw.pk == pending.pk
        assert _page(participation, query.index, django_assert_num_queries).pk == pending.pk
        assert _page(participation, query.index + 1, django_assert_num_queries) is None
        # Someone else asking for this question, and this annotator for a question number that is not theirs.
        assert _both(stranger, query.pk, django_assert_num_queries) is None
        Match.objects.filter(pk=pending.pk).update(shown_at=timezone.now())
        _both(annotator, query.pk, django_assert_num_queries)
        choice = pending.check_expected or "left"
        judgment_record(match=pending, choice=choice, by=participation)
        seen += 1
    assert seen == 4  # two first-round matches, the final, the attention check
    assert _both(annotator, query.pk, django_assert_num_queries) is None
    assert _page(participation, query.index, django_assert_num_queries) is None


def test_a_paused_study_and_an_ended_participation_read_the_same(
    django_capture_on_commit_callbacks, django_assert_num_queries
):
    study = StudyFactory(slug="sql-paused")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="Shift work and patient safety", client_token="")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    raw = _both(participation.annotator, query.pk, django_assert_num_queries)
    assert raw.bracket.query.participation.study.status == Study.Status.PAUSED
    Participation.objects.filter(pk=participation.pk).update(stopped_at=timezone.now())
    raw = _both(participation.annotator, query.pk, django_assert_num_queries)
    assert raw.bracket.query.participation.stopped_at is not None
