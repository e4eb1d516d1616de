"""Every written statement of annotation/queries.py held to the ORM read it stands for (tests/annotation/orm_reads.py),
on real rows through a whole tournament: the same rows or objects with the same columns (JSON decoded as the ORM
decodes it), none where the ORM finds none, in one statement, and what the callers read of the result loads
nothing more."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation import queries
from annotation.api.serializers import DOCUMENT_FIELDS, QUERY_SHOWN, match_body
from annotation.models import Candidate, Match, Participation, Query
from annotation.selectors.tournament import match_current
from annotation.services.participation import participation_require_active
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from annotation.views import PAGE_DOCUMENT_FIELDS
from kernel.exceptions import ApplicationError
from studies.models import Study
from tests.annotation import orm_reads
from tests.annotation.factories import StudyFactory, join

pytestmark = pytest.mark.django_db

GENERATION_DOCUMENT_FIELDS = ("external_id", "title", "abstract", "url", "year", "venue", "authors")


@dataclass
class World:
    """Two studies (one with a prompt template and attention checks on every question, one without a template),
    three annotators with a question each, and the question whose tournament the test walks through."""

    participation: Participation
    other: Participation  # the same study, someone else
    bare: Participation  # the study without a template
    query: Query
    queries: list[Query] = field(default_factory=list)


def _world(capture: Any) -> World:
    study = StudyFactory(slug="queries", check_share=1.0, retrieval_settings={"top_k": 5})
    # Settings a JSON column must give back as they were saved, nested.
    study.systems.filter(order=0).update(backend_settings={"temperature": 0.3, "stop": ["\n\n"], "extra": {"a": 1}})
    bare = StudyFactory(slug="queries-bare")
    Study.objects.filter(pk=bare.pk).update(prompt_template=None)
    other, participation, bare_participation = join(study), join(study), join(bare)
    asked = []
    for who, text in (
        (other, "Night shifts and sleep"),
        (participation, "Shift work and patient safety"),
        (bare_participation, "Sleep debt and memory"),
    ):
        with capture(execute=True):
            asked.append(query_submit(participation=who, text=text, client_token=""))
    query = asked[1]
    # A source with no year, authors and no link; a summary that failed after its attempts.
    query.documents.filter(rank=2).update(year=None, authors=["Ana Lima", "Bo Chen"], url="")
    Candidate.objects.filter(pk=asked[0].candidates.order_by("pk")[2].pk).update(status="failed", attempts=4)
    return World(participation, other, bare_participation, query, asked)


@dataclass(frozen=True)
class Case:
    calls: Callable[[World], Iterator[dict[str, Any]]]  # the arguments to read with, in the world as it is now
    shape: Any = None  # the statement's RowShape, for a result of model instances
    paths: tuple[str, ...] = ()  # where each of the shape's tables hangs off the result
    use: Callable[[Any, dict[str, Any]], None] | None = None  # what the callers read of the result
    many: bool = False  # a list of instances
    deferred: bool = False  # the same columns deferred too (the ORM read is `only()`)


def _participations(w: World) -> Iterator[dict[str, Any]]:
    for who in (w.participation, w.other, w.bare):
        for slug in ("queries", "queries-bare", "no-such-study"):
            yield {"annotator": who.annotator, "study_slug": slug}


def _own_query(w: World) -> Iterator[dict[str, Any]]:
    for who in (w.participation, w.other):
        for key in (w.query.pk, w.query.pk + 10_000):
            yield {"annotator_id": who.annotator.pk, "query_id": key, "fields": QUERY_SHOWN}


def _documents(w: World) -> Iterator[dict[str, Any]]:
    for query in w.queries:
        for names in (DOCUMENT_FIELDS, PAGE_DOCUMENT_FIELDS, GENERATION_DOCUMENT_FIELDS):
            yield {"query_id": query.pk, "names": names}


def _by_query(w: World) -> Iterator[dict[str, Any]]:
    for query in w.queries:
        yield {"query_id": query.pk}
    yield {"query_id": 2**62}


def _candidates(w: World) -> Iterator[dict[str, Any]]:
    for query in w.queries:
        for pk in query.candidates.order_by("pk").values_list("pk", flat=True):
            yield {"candidate_id": pk}
    yield {"candidate_id": 2**62}


def _brackets(w: World) -> Iterator[dict[str, Any]]:
    for query in w.queries:
        yield {"bracket_id": query.bracket.pk}


def _matches(w: World) -> Iterator[dict[str, Any]]:
    for pk in Match.objects.filter(bracket__query=w.query).values_list("pk", flat=True):
        yield {"match_id": pk}
    yield {"match_id": 0}


def _shown(w: World) -> Iterator[dict[str, Any]]:
    for who in (w.participation, w.other):
        yield {"annotator_id": who.annotator.pk, "query_id": w.query.pk}


def _pages(w: World) -> Iterator[dict[str, Any]]:
    for index in (w.query.index, w.query.index + 1):
        yield {"participation": w.participation, "index": index}


def _participation_used(found: Participation, kwargs: dict[str, Any]) -> None:
    assert found.annotator is kwargs["annotator"] and found.study.slug == kwargs["study_slug"]


def _shown_used(match: Match, kwargs: dict[str, Any]) -> None:
    match_body(match)
    try:
        participation_require_active(participation=match.bracket.query.participation)
    except ApplicationError:
        pass


def _page_used(match: Match, kwargs: dict[str, Any]) -> None:
    match_body(match)
    assert match.bracket.query.participation is kwargs["participation"]
    assert match.bracket.rounds >= 1


def _locked_used(matches: list[Match], kwargs: dict[str, Any]) -> None:
    assert len({id(m.bracket) for m in matches}) <= 1  # one bracket for all, as the advance expects
    for match in matches:
        judgment = getattr(match, "judgment", None)  # a match without a judgment knows it without a query
        if judgment is not None:
            assert judgment.match is match


CASES: dict[str, Case] = {
    "participation_with_study": Case(
        _participations, queries.PARTICIPATION_COLUMNS, ("", "study"), use=_participation_used
    ),
    "query_of_annotator": Case(_own_query, queries._query_shape(QUERY_SHOWN), ("",), deferred=True),
    "documents_values": Case(_documents),
    "candidate_progress_values": Case(_by_query),
    "query_has_unfinished": Case(_by_query),
    "candidate_for_generation": Case(
        _candidates,
        queries.GENERATION_COLUMNS,
        (
            "",
            "system",
            "query",
            "query.persona",
            "query.participation",
            "query.participation.study",
            "query.participation.study.prompt_template",
        ),
    ),
    "match_current_shown": Case(
        _shown,
        queries.SHOWN_COLUMNS,
        (
            "",
            "bracket",
            "bracket.query",
            "bracket.query.participation",
            "bracket.query.participation.study",
            "left",
            "right",
        ),
        use=_shown_used,
    ),
    "match_current_of": Case(
        _pages,
        queries.PAGE_COLUMNS,
        ("", "bracket", "bracket.query", "left", "right"),
        use=_page_used,
    ),
    "bracket_slots": Case(_brackets),
    "bracket_matches_locked": Case(
        _matches,
        queries.CHOICE_COLUMNS,
        (
            "",
            "judgment",
            "bracket",
            "bracket.query",
            "bracket.query.participation",
            "bracket.query.participation.study",
        ),
        use=_locked_used,
        many=True,
    ),
}


def _columns(found: Any, case: Case) -> Any:
    """Every column the statement reads, from the result and the objects it comes with."""
    if case.shape is None:
        return sorted(found) if isinstance(found, list) else found
    if case.many:
        return [_columns(one, Case(case.calls, case.shape, case.paths)) for one in found]
    if found is None:
        return None
    out = []
    for (_, _, names), path in zip(case.shape, case.paths, strict=True):
        obj = found
        for step in filter(None, path.split(".")):
            obj = getattr(obj, step, None)  # None for a missing judgment or template, as the ORM caches it
        out.append(None if obj is None else [getattr(obj, name) for name in names])
    if case.deferred:
        out.append(sorted(found.get_deferred_fields()))
    if isinstance(found, Match):  # the page's question number, read with its match
        out.append(getattr(found.bracket.query, "number", None))
    return out


def _same(name: str, world: World) -> None:
    case = CASES[name]
    for kwargs in case.calls(world):
        with CaptureQueriesContext(connection) as read:
            written = getattr(queries, name)(**kwargs)
            ours = _columns(written, case)
            if case.use is not None and written not in (None, []):
                case.use(written, kwargs)
        assert len(read.captured_queries) == 1, [q["sql"] for q in read.captured_queries]
        if name == "bracket_matches_locked":
            assert "FOR UPDATE OF" in read.captured_queries[0]["sql"]
        assert ours == _columns(getattr(orm_reads, name)(**kwargs), case), kwargs


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_written_read_reads_what_its_orm_read_does(name: str, django_capture_on_commit_callbacks) -> None:
    world = _world(django_capture_on_commit_callbacks)
    _same(name, world)
    answered = 0
    while (pending := match_current(query=world.query)) is not None:
        Match.objects.filter(pk=pending.pk).update(shown_at=timezone.now())
        _same(name, world)
        judgment_record(match=pending, choice=pending.check_expected or "left", by=world.participation)
        answered += 1
    assert answered == 4  # two first-round matches, the final, the attention check
    _same(name, world)


def test_a_paused_study_and_an_ended_participation_read_the_same(django_capture_on_commit_callbacks) -> None:
    study = StudyFactory(slug="queries-paused")
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="Shift work and patient safety", client_token="")
    world = World(participation, participation, participation, query, [query])
    Study.objects.filter(pk=study.pk).update(status=Study.Status.PAUSED)
    _same("match_current_shown", world)
    shown = queries.match_current_shown(annotator_id=participation.annotator.pk, query_id=query.pk)
    assert shown is not None and shown.bracket.query.participation.study.status == Study.Status.PAUSED
    Participation.objects.filter(pk=participation.pk).update(stopped_at=timezone.now())
    _same("match_current_shown", world)
    shown = queries.match_current_shown(annotator_id=participation.annotator.pk, query_id=query.pk)
    assert shown is not None and shown.bracket.query.participation.stopped_at is not None
