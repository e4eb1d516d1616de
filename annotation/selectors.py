"""Reads for the annotator journey and the admin pages, each scoped to who is asking."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from django.http import Http404

from annotation.models import Candidate, Match, Participation, Query, Study

PROGRESS_LABELS: dict[str, str] = {
    Candidate.Status.QUEUED: "waiting",
    Candidate.Status.RUNNING: "being written…",
    Candidate.Status.DONE: "ready",
    Candidate.Status.FAILED: "could not be written",
}


def participation_for(*, annotator: Any, study_slug: str) -> Participation:
    """The asking annotator's own participation in a study; anyone else's is a 404."""
    if not annotator.is_authenticated:
        raise Http404
    participation = (
        Participation.objects.select_related("study").filter(study__slug=study_slug, annotator=annotator).first()
    )
    if participation is None:
        raise Http404
    return participation


def query_for(*, participation: Participation, index: int) -> Query:
    query = participation.queries.filter(index=index).first()
    if query is None:
        raise Http404
    return query


def query_current(*, participation: Participation) -> Query | None:
    """The question the annotator is working on, if any."""
    return (
        participation.queries.exclude(status__in=[Query.Status.RANKED, Query.Status.DISCARDED])
        .order_by("-index")
        .first()
    )


# Only the summary text is shown; the prompt and raw responses stay in the database.
HEAVY_CANDIDATE_FIELDS = tuple(
    f"{side}__{field}" for side in ("left", "right") for field in ("prompt", "raw_response", "usage", "citation_flags")
)


def match_current(*, query: Query) -> Match | None:
    return (
        Match.objects.filter(bracket__query=query, status=Match.Status.PENDING)
        .select_related("bracket", "left", "right")
        .defer(*HEAVY_CANDIDATE_FIELDS)
        .order_by("round", "index")
        .first()
    )


def match_progress(*, match: Match) -> tuple[int, int]:
    """(answered matches, matches the annotator will see in total, as far as known now)."""
    statuses = list(Match.objects.filter(bracket_id=match.bracket_id).values_list("status", flat=True))
    answered = statuses.count(Match.Status.ANSWERED)
    skipped = statuses.count(Match.Status.SKIPPED)
    return answered, match.bracket.size - 1 - skipped


def generation_progress(*, query: Query) -> list[dict[str, object]]:
    """Anonymous per-candidate progress for the waiting page: no system, model or condition."""
    rows = list(query.candidates.order_by("pk").values("status", "attempts"))
    return [
        {"number": n, "status": row["status"], "label": PROGRESS_LABELS[row["status"]], "attempts": row["attempts"]}
        for n, row in enumerate(rows, start=1)
    ]


def study_progress(*, study: Study) -> QuerySet[Participation]:
    return study.participations.annotate(
        queries_ranked=Count("queries", filter=Q(queries__status=Query.Status.RANKED), distinct=True),
        queries_total=Count("queries", distinct=True),
    )


def candidates_failed() -> QuerySet[Candidate]:
    return Candidate.objects.filter(status=Candidate.Status.FAILED).select_related(
        "system", "query__participation__study"
    )
