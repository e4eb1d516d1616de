"""The annotator pages' reads (annotation.selectors.participation, the comparison page's progress,
`match_progress`) on real rows: the annotator's own with its study in one statement, none for someone else,
the participation's row alone locked, and the progress through a whole tournament with a "neither".
tests/annotation/test_queries.py holds the written ones to their ORM reads."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.http import Http404

from annotation.models import Participation
from annotation.selectors.participation import participation_for, participation_locked, participation_own
from annotation.selectors.tournament import match_current, match_progress
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db


def test_participation_for_is_the_annotators_own_with_its_study(django_assert_num_queries) -> None:
    study = StudyFactory(
        slug="pages",
        screening_question="Do you work shifts?",
        screening_choices=["yes", "no"],
        screening_accepted=["yes"],
        retrieval_settings={"top_k": 3},
    )
    other_study = StudyFactory(slug="elsewhere")
    participation = join(study)
    join(other_study, user=participation.annotator)  # the same account in another study
    stranger = join(study)
    annotator = participation.annotator

    with django_assert_num_queries(1):
        ours = participation_for(annotator=annotator, study_slug="pages")
        # The page reads the study and the account from it without another statement.
        assert ours.study.slug == "pages" and ours.annotator is annotator
    assert ours.pk == participation.pk
    assert ours.study.retrieval_settings == {"top_k": 3}  # JSON decoded
    assert participation_for(annotator=annotator, study_slug="elsewhere").study.slug == "elsewhere"
    # Someone else's study, a study that does not exist: 404.
    for slug in ("no-such-study",):
        with pytest.raises(Http404):
            participation_for(annotator=annotator, study_slug=slug)
    with pytest.raises(Http404):
        participation_for(annotator=stranger.annotator, study_slug="elsewhere")


def test_participation_own_is_the_annotators_own_with_its_study(django_assert_num_queries) -> None:
    study = StudyFactory(slug="api-own", retrieval_settings={"top_k": 4})
    participation, stranger = join(study), join(study)
    annotator = participation.annotator
    with django_assert_num_queries(1):
        ours = participation_own(annotator=annotator, participation_id=participation.pk)
        assert ours.study.slug == "api-own" and ours.annotator is annotator
    assert ours.pk == participation.pk and ours.study.retrieval_settings == {"top_k": 4}
    # Someone else's, one that does not exist, one past the key's range: 404, as get_object_or_404 answered.
    for who, key in ((stranger.annotator, participation.pk), (annotator, participation.pk + 1000), (annotator, 2**64)):
        with pytest.raises(Http404):
            participation_own(annotator=who, participation_id=key)


def test_participation_locked_locks_the_participation_alone(django_assert_num_queries) -> None:
    study = StudyFactory(slug="locked", retrieval_settings={"top_k": 5})
    participation = join(study)
    with transaction.atomic():
        with django_assert_num_queries(1) as captured:
            ours = participation_locked(participation_id=participation.pk)
            assert ours.study.slug == "locked" and ours.study.retrieval_settings == {"top_k": 5}
    # The participation's row alone is locked, never the study's (tests/annotation/test_submit_concurrency.py).
    table = connection.ops.quote_name(Participation._meta.db_table)
    assert captured.captured_queries[0]["sql"].endswith(f"FOR UPDATE OF {table}")
    assert ours.pk == participation.pk
    with transaction.atomic(), pytest.raises(Participation.DoesNotExist):
        participation_locked(participation_id=participation.pk + 1000)


def test_match_progress_counts_through_a_tournament(django_capture_on_commit_callbacks, django_assert_num_queries):
    study = StudyFactory(slug="progress")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="Night shifts and sleep", client_token="")
    seen = []
    while (match := match_current(query=query)) is not None:
        with django_assert_num_queries(1):
            seen.append(match_progress(match=match))
        # "neither" in the first match: its winner slot is empty, so the final is not played.
        judgment_record(match=match, choice="neither" if not seen[:-1] else "left", by=participation)
    # Four candidates: two first-round matches; a "neither" leaves no final to play.
    assert seen == [(0, 3), (1, 2)]
