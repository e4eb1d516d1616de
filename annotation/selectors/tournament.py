"""Reads of the tournament: the match to answer next, and how far through the bracket the annotator is. The
hottest reads are written statements in `annotation.queries` (bench/queries.py measured the ORM's at 2-3x
their CPU)."""

from __future__ import annotations

from typing import Any

from annotation import queries
from annotation.models import Match, Participation, Query
from kernel.storable import DB_BIGINT_MAX

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


def match_current_shown(*, annotator: Any, query_id: int) -> Match | None:
    """The current match of question `query_id` for the current-match API, if the question is the annotator's:
    the match with `bracket.query.participation.study` and both sides, of each only the columns the view reads.
    None when there is none or the question is not the annotator's: the caller reads the question then to tell
    which. A written read (`annotation.queries.match_current_shown`)."""
    if annotator is None or annotator.pk is None or not 0 < query_id <= DB_BIGINT_MAX:
        return None
    return queries.match_current_shown(annotator_id=annotator.pk, query_id=query_id)


def match_current_of(*, participation: Participation, index: int) -> Match | None:
    """`match_current` of the participation's question number `index` (the comparison page), read with its
    bracket and question (`match.bracket.query`, with `participation` as its participation) in one statement,
    with the question's number as the pages show it (`query.number`, as `query_number` counts).
    None when the question has no pending match or does not exist: the caller reads the question then to tell
    which. A written read (`annotation.queries.match_current_of`)."""
    return queries.match_current_of(participation=participation, index=index)


def match_progress(*, match: Match) -> tuple[int, int]:
    """(answered matches, matches the annotator will play in total, as far as known now).
    A later-round match counts only while both matches feeding it can still produce a winner."""
    slots = {(r, i): (status, winner) for r, i, status, winner in queries.bracket_slots(bracket_id=match.bracket_id)}

    bracket = match.bracket
    if bracket.adaptive:
        # One comparison per round up to the budget; one that ends early (every pair left retired by "neither")
        # ends sooner than said, as a bracket's skipped rounds do.
        answered = sum(1 for status, _ in slots.values() if status == Match.Status.ANSWERED)
        data = sum(1 for _, i in slots if i < bracket.size)
        return answered, max(data, bracket.budget) + sum(1 for _, i in slots if i >= bracket.size)
    byes = bracket.bye_candidates()

    def can_win(r: int, i: int) -> bool:
        if r == 1 and i in byes:
            return True  # a bye: its candidate goes on without a match
        if (r, i) in slots:
            status, winner = slots[(r, i)]
            return status == Match.Status.PENDING or (status == Match.Status.ANSWERED and winner is not None)
        return r > 1 and can_win(r - 1, 2 * i) and can_win(r - 1, 2 * i + 1)

    def playable(r: int, i: int) -> bool:
        if r == 1 and i in byes:
            return False
        if (r, i) in slots:
            return slots[(r, i)][0] != Match.Status.SKIPPED
        return can_win(r - 1, 2 * i) and can_win(r - 1, 2 * i + 1)

    answered = sum(1 for status, _ in slots.values() if status == Match.Status.ANSWERED)
    total = sum(playable(r, i) for r in range(1, bracket.rounds + 1) for i in range(bracket.slots >> r))
    # Attention checks (their slots lie past the bracket's) count like any comparison: nothing tells them apart.
    total += sum(1 for _, i in slots if i >= bracket.size)
    return answered, total
