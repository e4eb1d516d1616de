"""Reads of the tournament: the match to answer next, and how far through the bracket the annotator is."""

from __future__ import annotations

from typing import Any

from annotation.models import Match, Participation, Query

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
    if annotator is not None:
        related.append("bracket__query__participation__study")
    return (
        Match.objects.filter(status=Match.Status.PENDING, **lookups)
        .select_related(*related)
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
    # Attention checks (their slots lie past the bracket's) count like any comparison: nothing tells them apart.
    total += sum(1 for _, i in slots if i >= bracket.size)
    return answered, total
