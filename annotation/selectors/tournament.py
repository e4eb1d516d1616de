"""Reads of the tournament: the match to answer next, and how far through the bracket the annotator is."""

from __future__ import annotations

from typing import Any

from django.db import models

from annotation.models import Candidate, Match, Participation, Query, Study

# Only the summary text is shown; the prompt and raw responses stay in the database.
HEAVY_CANDIDATE_FIELDS = tuple(
    f"{side}__{field}" for side in ("left", "right") for field in ("prompt", "raw_response", "usage", "citation_flags")
)


def fields_except(prefix: str, model: type[models.Model], keep: tuple[str, ...]) -> tuple[str, ...]:
    """`defer()` arguments for every column of `model` (reached through `prefix`) but its key and `keep`.
    The hot reads join wide rows (a study has 36 columns) of which they use a few: building the SQL for the
    columns, and the rows from them, was most of the CPU of a current match (bench/load.py). A field left out
    here by mistake costs one query when it is read, never a wrong value; the pinned counts in
    tests/annotation/test_query_counts.py would show it."""
    return tuple(f"{prefix}{f.name}" for f in model._meta.concrete_fields if not f.primary_key and f.name not in keep)


# What a match's two sides show: the summary text (the API and the page alike).
CANDIDATE_SHOWN = tuple(
    name for side in ("left", "right") for name in fields_except(f"{side}__", Candidate, keep=("text",))
)
# What showing a match checks of its participation and study (participation_require_active) beyond the keys.
PARTICIPATION_ACTIVE = ("study", "annotator", "completed_at", "stopped_at", "screened_out_at")
STUDY_ACTIVE = ("status",)


def match_current(*, query: Query) -> Match | None:
    return (
        Match.objects.filter(bracket__query=query, status=Match.Status.PENDING)
        .select_related("bracket", "left", "right")
        .defer(*HEAVY_CANDIDATE_FIELDS)
        .order_by("round", "index")
        .first()
    )


def match_current_of(
    *,
    participation: Participation | None = None,
    index: int | None = None,
    annotator: Any = None,
    query_id: int | None = None,
) -> Match | None:
    """`match_current` of the question named by its participation and index (the pages) or by its id and
    annotator (the API), read with the question (`match.bracket.query`) in one statement. None when the
    question has no pending match or is not the caller's: the caller reads the question then to tell which."""
    lookups: dict[str, Any] = {}
    if participation is not None:
        lookups["bracket__query__participation"] = participation
    if index is not None:
        lookups["bracket__query__index"] = index
    if annotator is not None:
        lookups["bracket__query__participation__annotator"] = annotator
    if query_id is not None:
        lookups["bracket__query_id"] = query_id
    if not lookups.keys() & {"bracket__query__participation", "bracket__query__participation__annotator"}:
        raise ValueError("match_current_of needs the participation or the annotator")
    related = ["bracket__query", "left", "right"]
    deferred = list(CANDIDATE_SHOWN)
    if annotator is not None:
        # The API shows the match and its question's id, and checks that the participation is active: of the
        # question, participation and study only those columns are read. The page renders the question.
        related.append("bracket__query__participation__study")
        deferred += fields_except("bracket__query__", Query, keep=("participation",))
        deferred += fields_except("bracket__query__participation__", Participation, keep=PARTICIPATION_ACTIVE)
        deferred += fields_except("bracket__query__participation__study__", Study, keep=STUDY_ACTIVE)
    return (
        Match.objects.filter(status=Match.Status.PENDING, **lookups)
        .select_related(*related)
        .defer(*deferred)
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
    # Attention checks (their slots lie past the bracket's) count like any comparison: nothing tells them apart.
    total += sum(1 for _, i in slots if i >= bracket.size)
    return answered, total
