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
    """(answered matches, matches the annotator will play in total, as far as known now).
    A later-round match counts only while both matches feeding it can still produce a winner."""
    slots = {
        (r, i): (status, winner)
        for r, i, status, winner in Match.objects.filter(bracket_id=match.bracket_id).values_list(
            "round", "index", "status", "judgment__winner_id"
        )
    }

    def can_win(r: int, i: int) -> bool:
        if (r, i) in slots:
            status, winner = slots[(r, i)]
            return status == Match.Status.PENDING or (status == Match.Status.ANSWERED and winner is not None)
        return r > 1 and can_win(r - 1, 2 * i) and can_win(r - 1, 2 * i + 1)

    def playable(r: int, i: int) -> bool:
        if (r, i) in slots:
            return slots[(r, i)][0] != Match.Status.SKIPPED
        return can_win(r - 1, 2 * i) and can_win(r - 1, 2 * i + 1)

    bracket = match.bracket
    answered = sum(1 for status, _ in slots.values() if status == Match.Status.ANSWERED)
    total = sum(playable(r, i) for r in range(1, bracket.rounds + 1) for i in range(bracket.size >> r))
    return answered, total


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
