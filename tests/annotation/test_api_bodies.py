"""The hot API responses are built by plain functions (annotation.api.serializers: `query_body`, `match_body`,
`judgment_body`) rather than by their ModelSerializers, which stay as the schema's shapes. Here each builder
is held to its serializer's output on real rows, rendered by DRF's JSON renderer: the same bytes, so the same
keys in the same order, the same types and values, for every question status, failed and overdue waits, a
final, a skipped match, an answered one, and answers with and without a notice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.renderers import JSONRenderer

from annotation.api import serializers as s
from annotation.models import Candidate, Judgment, Match, Participation, Query, RetrievedDocument
from annotation.selectors.generation import generation_progress
from annotation.selectors.query import query_documents, query_of_annotator
from annotation.selectors.tournament import match_current, match_current_shown
from annotation.services.participation import participation_finish, participation_screen
from annotation.services.persona import persona_save
from annotation.services.quality import CHECK_WARNING, check_warning
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from tests.annotation.factories import PERSONA, StudyFactory, UserFactory, join

pytestmark = pytest.mark.django_db


def _same(old: object, new: object) -> None:
    assert JSONRenderer().render(new) == JSONRenderer().render(old)


def _ask(participation, capture, text="How does night shift work affect sleep?", *, execute=True) -> Query:
    with capture(execute=execute):
        query = query_submit(participation=participation, text=text, client_token="")
    return Query.objects.get(pk=query.pk)


def _query_as_shown(query: Query, django_assert_num_queries) -> dict:
    """The builder's body from the question as the status poll reads it, which must be enough: its progress
    and its sources, and no deferred column loaded afterwards."""
    shown = query_of_annotator(annotator=query.participation.annotator, query_id=query.pk, fields=s.QUERY_SHOWN)
    assert shown is not None
    with django_assert_num_queries(2):
        return s.query_body(shown)


def test_the_query_body_is_the_serializers_for_every_status_and_wait(
    django_capture_on_commit_callbacks, django_assert_num_queries
):
    study = StudyFactory(slug="bodies")
    participation = join(study)
    # Just asked: no sources, no candidates yet.
    waiting = _ask(participation, django_capture_on_commit_callbacks, execute=False)
    assert waiting.status == Query.Status.RETRIEVING
    _same(s.QuerySerializer(waiting).data, _query_as_shown(waiting, django_assert_num_queries))
    # The broker could not be reached; then overdue.
    Query.objects.filter(pk=waiting.pk).update(queue_failed_at=timezone.now())
    _same(s.QuerySerializer(Query.objects.get(pk=waiting.pk)).data, _query_as_shown(waiting, django_assert_num_queries))
    Query.objects.filter(pk=waiting.pk).update(queue_failed_at=None, created_at=timezone.now() - timedelta(hours=1))
    overdue = Query.objects.get(pk=waiting.pk)
    assert s.QuerySerializer(overdue).data["overdue"] is True
    _same(s.QuerySerializer(overdue).data, _query_as_shown(overdue, django_assert_num_queries))
    Query.objects.filter(pk=waiting.pk).update(status=Query.Status.DISCARDED, set_aside_reason="too_slow")

    query = _ask(participation, django_capture_on_commit_callbacks, text="Shift work and patient safety")
    assert query.status == Query.Status.READY and query.documents.exists()
    # A source with no year and no authors, as some retrieval backends store them.
    query.documents.filter(rank=1).update(year=None, authors=[], url="", venue="")
    for status in Query.Status.values:
        Query.objects.filter(pk=query.pk).update(status=status)
        row = Query.objects.get(pk=query.pk)
        _same(s.QuerySerializer(row).data, _query_as_shown(row, django_assert_num_queries))
    # Generating with a failed candidate, retried twice; then overdue as well.
    Query.objects.filter(pk=query.pk).update(status=Query.Status.GENERATING)
    Candidate.objects.filter(pk=query.candidates.order_by("pk")[0].pk).update(status="failed", attempts=3)
    Candidate.objects.filter(pk=query.candidates.order_by("pk")[1].pk).update(status="running")
    row = Query.objects.get(pk=query.pk)
    assert "could not be written" in s.QuerySerializer(row).data["message"]
    _same(s.QuerySerializer(row).data, _query_as_shown(row, django_assert_num_queries))
    Query.objects.filter(pk=query.pk).update(
        created_at=timezone.now() - timedelta(hours=1), retrieval_queued_at=timezone.now()
    )
    row = Query.objects.get(pk=query.pk)
    _same(s.QuerySerializer(row).data, _query_as_shown(row, django_assert_num_queries))
    # Set aside, as the discard service leaves it (an enum status on the instance, not yet read back).
    row.status, row.set_aside_reason = Query.Status.DISCARDED, "failed"
    _same(s.QuerySerializer(row).data, s.query_body(row))


def test_the_match_and_judgment_bodies_are_the_serializers(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="matches", check_share=1.0, check_policy="warn", comments="match")
    _ask(join(study), django_capture_on_commit_callbacks)  # the decoys for the next question's check
    participation = join(study)
    query = _ask(participation, django_capture_on_commit_callbacks)
    annotator = participation.annotator
    answered: list[Match] = []
    failed_check = None
    while (match := match_current(query=query)) is not None:
        # Pending, as the current-match API reads it, first shown or not.
        shown = match_current_shown(annotator=annotator, query_id=query.pk)
        assert shown is not None and shown.pk == match.pk
        _same(s.MatchSerializer(shown).data, s.match_body(shown))
        Match.objects.filter(pk=match.pk).update(shown_at=timezone.now() - timedelta(seconds=7))
        shown = match_current_shown(annotator=annotator, query_id=query.pk)
        _same(s.MatchSerializer(shown).data, s.match_body(shown))
        since = timezone.now()
        if match.check_expected:
            choice = "right" if match.check_expected == "left" else "left"
        else:
            # A "neither" in round one skips the final; else the final is played.
            choice = "left"
        judgment = judgment_record(match=match, choice=choice, by=participation, comment="close call")
        notice = check_warning(judgment=judgment, since=since)
        if match.check_expected:
            assert notice is not None
            failed_check = judgment
        _same(s.JudgmentSerializer(judgment, context={"notice": notice}).data, s.judgment_body(judgment, notice=notice))
        answered.append(match)
    assert failed_check is not None
    assert any(m.label == "final" for m in answered)
    # Answered matches as the match API reads them: the choice shows.
    for match in Match.objects.filter(bracket__query=query).select_related(
        "left", "right", "judgment", "bracket__query__participation__study"
    ):
        assert match.status == Match.Status.ANSWERED
        _same(s.MatchSerializer(match).data, s.match_body(match))
    # The lazy notice itself, and a judgment read back from the database (legacy rows: no display time).
    judgment = Judgment.objects.get(pk=failed_check.pk)
    _same(
        s.JudgmentSerializer(judgment, context={"notice": CHECK_WARNING}).data,
        s.judgment_body(judgment, notice=CHECK_WARNING),
    )
    Judgment.objects.filter(pk=judgment.pk).update(shown_at=None, seconds_on_page=None, comment="")
    judgment = Judgment.objects.get(pk=judgment.pk)
    _same(s.JudgmentSerializer(judgment, context={}).data, s.judgment_body(judgment))


def test_a_skipped_match_and_a_likeness_notice_are_the_serializers(django_capture_on_commit_callbacks):
    study = StudyFactory(slug="skipped")
    participation = join(study)
    query = _ask(participation, django_capture_on_commit_callbacks)
    first = match_current(query=query)
    Match.objects.filter(pk=first.pk).update(identical="near", similarity=93.0)
    shown = match_current_shown(annotator=participation.annotator, query_id=query.pk)
    assert shown.identical == "near"
    _same(s.MatchSerializer(shown).data, s.match_body(shown))
    while (match := match_current(query=query)) is not None:
        judgment_record(match=match, choice="neither", by=participation)
    skipped = Match.objects.select_related("left", "right", "judgment", "bracket").get(
        bracket__query=query, status=Match.Status.SKIPPED
    )
    assert skipped.left is None and skipped.right is None
    _same(s.MatchSerializer(skipped).data, s.match_body(skipped))


def test_the_polls_reads_are_the_callers_question_its_progress_and_sources(
    django_capture_on_commit_callbacks, django_assert_num_queries
):
    """The status poll's three reads (the question if it is the caller's, its progress, its sources), each
    one statement; tests/annotation/test_queries.py holds them to their ORM reads."""
    study = StudyFactory(slug="poll-reads")
    participation, other = join(study), join(study)
    query = _ask(participation, django_capture_on_commit_callbacks)
    query.documents.filter(rank=2).update(year=None, authors=["Ana Lima", "Bo Chen"], url="")
    failed = query.candidates.order_by("pk")[2]
    Candidate.objects.filter(pk=failed.pk).update(status="failed", attempts=4)

    with django_assert_num_queries(1):
        shown = query_of_annotator(annotator=participation.annotator, query_id=query.pk, fields=s.QUERY_SHOWN)
    assert shown is not None
    with django_assert_num_queries(0):  # every shown column loaded
        assert (shown.pk, shown.index, shown.text, shown.status) == (query.pk, query.index, query.text, query.status)
    # Another annotator's question, a key no row has and one past the column's range are not found.
    for annotator, key in (
        (other.annotator, query.pk),
        (participation.annotator, query.pk + 10_000),
        (participation.annotator, 2**64),
    ):
        assert query_of_annotator(annotator=annotator, query_id=key, fields=s.QUERY_SHOWN) is None

    with django_assert_num_queries(1):
        progress = generation_progress(query=query)
    assert [row["number"] for row in progress] == [1, 2, 3, 4]
    assert [(row["status"], row["attempts"]) for row in progress][2] == ("failed", 4)
    assert [row["status"] for row in progress].count("failed") == 1
    with django_assert_num_queries(1):
        documents = query_documents(query=query)
    assert [d.external_id for d in documents] == list(
        RetrievedDocument.objects.filter(query=query).order_by("rank").values_list("external_id", flat=True)
    )
    assert documents[1].authors == ("Ana Lima", "Bo Chen") and documents[1].year is None and documents[1].url == ""


def _participation(pk: int) -> Participation:
    """A participation as the API routes read it: with its study and its account."""
    return Participation.objects.select_related("study", "annotator").get(pk=pk)


def test_the_participation_and_persona_bodies_are_the_serializers(django_assert_num_queries):
    study = StudyFactory(slug="participation-bodies")
    fresh = _participation(join(study, persona=False).pk)
    # Just joined: no persona, a resume link. The accept says so without reading (it made the participation).
    _same(s.ParticipationSerializer(fresh).data, s.participation_body(fresh))
    with django_assert_num_queries(0):
        body = s.participation_body(fresh, with_persona=False)
    _same(s.ParticipationSerializer(fresh).data, body)
    assert body["persona"] is None and body["resume_url"]
    # Two versions of the persona: the latest is shown, with an empty research area.
    persona_save(participation=fresh, data={**PERSONA, "research_area": ""})
    latest = persona_save(participation=fresh, data={**PERSONA, "role": "Clinician"})
    _same(s.PersonaSerializer(latest).data, s.persona_body(latest))
    _same(s.ParticipationSerializer(fresh).data, s.participation_body(fresh))
    assert s.participation_body(fresh)["persona"]["role"] == "Clinician"
    # Stopped early (fewer ranked questions than the study asks for): no completion code.
    stopped = _participation(participation_finish(participation=join(study)).pk)
    assert stopped.stopped_at and not stopped.completion_code
    _same(s.ParticipationSerializer(stopped).data, s.participation_body(stopped))
    # Finished with its completion code.
    Participation.objects.filter(pk=fresh.pk).update(completed_at=timezone.now(), completion_code="C0DE42")
    completed = _participation(fresh.pk)
    _same(s.ParticipationSerializer(completed).data, s.participation_body(completed))
    # An account that signs in with a password gets no resume link.
    researcher = UserFactory()
    researcher.set_password("a long enough password")
    researcher.save()
    signed_in = _participation(join(study, user=researcher).pk)
    assert s.participation_body(signed_in)["resume_url"] is None
    _same(s.ParticipationSerializer(signed_in).data, s.participation_body(signed_in))
    # A screening question: shown while it is to be answered (also by the accept, without reading), then not;
    # a refused answer screens the participation out.
    screened = StudyFactory(
        slug="screening-bodies",
        screening_question="Nurse?",
        screening_choices=["Yes", "No"],
        screening_accepted=["Yes"],
    )
    asked = _participation(join(screened, persona=False).pk)
    with django_assert_num_queries(0):
        body = s.participation_body(asked, with_persona=False)
    assert body["screening"] == {"question": "Nurse?", "choices": ["Yes", "No"]}
    _same(s.ParticipationSerializer(asked).data, body)
    _same(s.ParticipationSerializer(asked).data, s.participation_body(asked))
    participation_screen(participation=asked, answer="No")
    out = _participation(asked.pk)
    assert (s.participation_body(out)["screening"], out.screen_out_reason) == (None, "screening")
    _same(s.ParticipationSerializer(out).data, s.participation_body(out))
    passed = _participation(join(screened).pk)
    assert s.participation_body(passed)["screening_answer"] == "Yes"
    _same(s.ParticipationSerializer(passed).data, s.participation_body(passed))
