"""Reads of the tournament: the match to answer next, and how far through the bracket the annotator is. The
hottest reads are plain SQL statements (the ORM's compiling was most of their CPU), each held to the ORM read
it replaced by a test (tests/annotation/orm_reads.py)."""

from __future__ import annotations

import functools
from typing import Any, cast

from django.db import connection

from annotation.models import Bracket, Candidate, Judgment, Match, Participation, Query
from kernel.rows import RowShape, instances_from_row, model_columns, select_list
from kernel.storable import DB_BIGINT_MAX
from studies.models import Study

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


# What the current-match API reads (match_mark_shown, annotation.api.serializers.match_body): the whole match,
# the keys on the way to the study, the participation's end stamps, the study's status and both sides' text.
SHOWN_COLUMNS: RowShape = [
    (Match, "m", model_columns(Match)),
    (Bracket, "b", model_columns(Bracket, {"id", "query_id"})),
    (Query, "qu", model_columns(Query, {"id", "participation_id"})),
    (
        Participation,
        "p",
        model_columns(
            Participation, {"id", "study_id", "annotator_id", "completed_at", "stopped_at", "screened_out_at"}
        ),
    ),
    (Study, "st", model_columns(Study, {"id", "status"})),
    (Candidate, "l", model_columns(Candidate, {"id", "text"})),
    (Candidate, "r", model_columns(Candidate, {"id", "text"})),
]


@functools.cache
def _current_match_sql() -> str:
    """The current-match API's read as one plain statement, written once: building this six-join statement
    through the ORM was about a third of the request's CPU (bench/load.py). The question's first pending match
    if the question is the annotator's. tests/annotation/test_current_match_sql.py holds it to its ORM
    equivalent."""
    q = connection.ops.quote_name
    # Names come from the models, the values are bound parameters.
    return (
        f"SELECT {select_list(SHOWN_COLUMNS)} FROM {q(Match._meta.db_table)} m "  # noqa: S608
        f"JOIN {q(Bracket._meta.db_table)} b ON b.id = m.bracket_id "
        f"JOIN {q(Query._meta.db_table)} qu ON qu.id = b.query_id "
        f"JOIN {q(Participation._meta.db_table)} p ON p.id = qu.participation_id "
        f"JOIN {q(Study._meta.db_table)} st ON st.id = p.study_id "
        f"LEFT JOIN {q(Candidate._meta.db_table)} l ON l.id = m.left_id "
        f"LEFT JOIN {q(Candidate._meta.db_table)} r ON r.id = m.right_id "
        f"WHERE b.query_id = %s AND p.annotator_id = %s AND m.status = %s "
        f"ORDER BY m.round, m.{q('index')} LIMIT 1"
    )


def match_current_shown(*, annotator: Any, query_id: int) -> Match | None:
    """The current match of question `query_id` for the current-match API, if the question is the annotator's:
    the match with `bracket.query.participation.study` and both sides, of each only the columns the view reads.
    None when there is none or the question is not the annotator's: the caller reads the question then to tell
    which."""
    if annotator is None or annotator.pk is None or not 0 < query_id <= DB_BIGINT_MAX:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_current_match_sql(), [query_id, annotator.pk, Match.Status.PENDING.value])
        row = cursor.fetchone()
    if row is None:
        return None
    match, bracket, query, participation, study, left, right = instances_from_row(row, SHOWN_COLUMNS)
    participation.study = study
    return _match_assembled(match, bracket, query, participation, left, right)


def _match_assembled(match: Any, bracket: Any, query: Any, participation: Any, left: Any, right: Any) -> Match:
    """A match read as plain SQL, its relations attached as `select_related` would have cached them."""
    query.participation = participation
    bracket.query = query
    match.bracket = bracket
    # A side without a candidate (never for a pending match, which has both) stays None.
    if left is not None:
        match.left = left
    if right is not None:
        match.right = right
    return cast(Match, match)


# What the comparison page reads with its match: the match, its bracket (the progress line) and its question
# whole (the page renders it), and both sides' text.
PAGE_COLUMNS: RowShape = [
    (Match, "m", model_columns(Match)),
    (Bracket, "b", model_columns(Bracket)),
    (Query, "qu", model_columns(Query)),
    (Candidate, "l", model_columns(Candidate, {"id", "text"})),
    (Candidate, "r", model_columns(Candidate, {"id", "text"})),
]


@functools.cache
def _page_match_sql() -> str:
    """`match_current_of`'s read as one plain statement, written once (as `_current_match_sql`)."""
    q = connection.ops.quote_name
    # Names come from the models, the values are bound parameters.
    # Last, the question's number as the pages show it (`query_number`: the annotator's questions up to this
    # one that count, a question set aside taking none), so the page spends no statement of its own on it.
    number = (
        f"(SELECT COUNT(*) FROM {q(Query._meta.db_table)} n WHERE n.participation_id = qu.participation_id"  # noqa: S608
        f" AND n.{q('index')} <= qu.{q('index')} AND n.status <> %s)"
    )
    return (
        f"SELECT {select_list(PAGE_COLUMNS)}, {number} FROM {q(Match._meta.db_table)} m "  # noqa: S608
        f"JOIN {q(Bracket._meta.db_table)} b ON b.id = m.bracket_id "
        f"JOIN {q(Query._meta.db_table)} qu ON qu.id = b.query_id "
        f"LEFT JOIN {q(Candidate._meta.db_table)} l ON l.id = m.left_id "
        f"LEFT JOIN {q(Candidate._meta.db_table)} r ON r.id = m.right_id "
        f"WHERE qu.participation_id = %s AND qu.{q('index')} = %s AND m.status = %s "
        f"ORDER BY m.round, m.{q('index')} LIMIT 1"
    )


def match_current_of(*, participation: Participation, index: int) -> Match | None:
    """`match_current` of the participation's question number `index` (the comparison page), read with its
    bracket and question (`match.bracket.query`, with `participation` as its participation) in one statement,
    with the question's number as the pages show it (`query.number`, as `query_number` counts).
    None when the question has no pending match or does not exist: the caller reads the question then to tell
    which. tests/annotation/test_current_match_sql.py holds it to its ORM equivalent."""
    with connection.cursor() as cursor:
        cursor.execute(
            _page_match_sql(),
            [Query.Status.DISCARDED.value, participation.pk, index, Match.Status.PENDING.value],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    match, bracket, query, left, right = instances_from_row(row, PAGE_COLUMNS)
    query.number = row[-1]
    return _match_assembled(match, bracket, query, participation, left, right)


@functools.cache
def _progress_sql() -> str:
    """The bracket's matches with their answer's winner (`match_progress`), written out as the page's read."""
    q = connection.ops.quote_name
    # Names come from the models, the value is a bound parameter.
    return (
        f"SELECT m.round, m.{q('index')}, m.status, j.winner_id FROM {q(Match._meta.db_table)} m "  # noqa: S608
        f"LEFT JOIN {q(Judgment._meta.db_table)} j ON j.match_id = m.id WHERE m.bracket_id = %s"
    )


def match_progress(*, match: Match) -> tuple[int, int]:
    """(answered matches, matches the annotator will play in total, as far as known now).
    A later-round match counts only while both matches feeding it can still produce a winner."""
    with connection.cursor() as cursor:
        cursor.execute(_progress_sql(), [match.bracket_id])
        slots = {(r, i): (status, winner) for r, i, status, winner in cursor.fetchall()}

    bracket = match.bracket
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
