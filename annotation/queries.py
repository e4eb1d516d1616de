"""The annotation app's written SQL reads: the hot paths' statements whose ORM read costs 1.3x their CPU or
more (bench/queries.py, its table in bench/README.md, "Written SQL or the ORM"). Every other read is the ORM's.

Each statement is held to the ORM read it stands for in tests/annotation/test_queries.py (the references in
tests/annotation/orm_reads.py), and builds the instances that read would: the same columns loaded, the
relations cached. Names come from the models' metadata (`kernel.queries`), values are bound parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, cast

from django.db import connection

from annotation.models import (
    Bracket,
    Candidate,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    Query,
    RetrievedDocument,
)
from kernel.queries import (
    RowShape,
    column,
    fetch_all,
    fetch_one,
    for_update_of,
    instances_from_row,
    model_columns,
    rows_by,
    select_list,
)
from studies.models import PromptTemplate, Study, StudySystem


def _table(model: type[Any]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


# --- The participation of every annotator page ---------------------------------------------------------------

# The participation and its study, every column of both (the pages read many).
PARTICIPATION_COLUMNS: RowShape = [
    (Participation, "p", model_columns(Participation)),
    (Study, "s", model_columns(Study)),
]


@functools.cache
def _participation_sql() -> str:
    # One row at most: one participation per study and annotator.
    return (
        f"SELECT {select_list(PARTICIPATION_COLUMNS)} FROM {_table(Participation)} p"  # noqa: S608
        f" INNER JOIN {_table(Study)} s ON s.{column(Study, 'id')} = p.{column(Participation, 'study')}"
        f" WHERE s.{column(Study, 'slug')} = %s AND p.{column(Participation, 'annotator')} = %s"
    )


def participation_with_study(*, annotator: Any, study_slug: str) -> Participation | None:
    """The annotator's participation in the study `study_slug` with its study (`select_related("study")`) and
    the asking account as its annotator; None when they have none. Every annotator page starts here
    (bench/queries.py, "participation by study slug")."""
    row = fetch_one(_participation_sql(), [study_slug, annotator.pk])
    if row is None:
        return None
    participation, study = instances_from_row(row, PARTICIPATION_COLUMNS)
    participation.study = study
    participation.annotator = annotator  # the asking account itself: no query to read it again
    return cast(Participation, participation)


# --- The status poll ---------------------------------------------------------------------------------------


@functools.cache
def _query_shape(fields: tuple[str, ...]) -> RowShape:
    return [(Query, "q", model_columns(Query, {"id", *fields}))]


@functools.cache
def _query_of_annotator_sql(fields: tuple[str, ...]) -> str:
    return (
        f"SELECT {select_list(_query_shape(fields))} FROM {_table(Query)} q"  # noqa: S608
        f" INNER JOIN {_table(Participation)} p"
        f" ON p.{column(Participation, 'id')} = q.{column(Query, 'participation')}"
        f" WHERE q.{column(Query, 'id')} = %s AND p.{column(Participation, 'annotator')} = %s"
    )


def query_of_annotator(*, annotator_id: int, query_id: int, fields: Sequence[str]) -> Query | None:
    """Question `query_id` if it is the annotator's, with only `fields` loaded (and its key), as
    `Query.objects.only(*fields).filter(pk=..., participation__annotator=...).first()`; None otherwise. The
    status poll (bench/queries.py, "question if the caller's")."""
    row = fetch_one(_query_of_annotator_sql(tuple(fields)), [query_id, annotator_id])
    return None if row is None else cast(Query, instances_from_row(row, _query_shape(tuple(fields)))[0])


def documents_values(*, query_id: int, names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The question's sources in rank order as `values_list(*names)` tuples: the status poll's body, the match
    page's list and every generation read them (bench/queries.py, the three "sources" rows)."""
    return rows_by(RetrievedDocument, names, column="query_id", value=query_id, order_by="rank")


def candidate_progress_values(*, query_id: int) -> list[tuple[Any, ...]]:
    """(status, attempts) of the question's candidates in creation order: the waiting page's progress, read by
    every status poll (bench/queries.py, "generation progress")."""
    return rows_by(Candidate, ("status", "attempts"), column="query_id", value=query_id, order_by="id")


# --- A generation ------------------------------------------------------------------------------------------

# What a generation reads of the candidate and its relations (the statement's column order).
GENERATION_COLUMNS: RowShape = [
    (Candidate, "c", model_columns(Candidate, {"id", "status", "attempts", "query_id", "system_id"})),
    (
        StudySystem,
        "sy",
        model_columns(StudySystem, {"id", "condition", "model_name", "generation_backend", "backend_settings"}),
    ),
    (Query, "qu", model_columns(Query, {"id", "text", "persona_id", "participation_id"})),
    (
        PersonaProfile,
        "pe",
        model_columns(PersonaProfile, {"id", "role", "domain", "expertise", "research_area", "use_case"}),
    ),
    (Participation, "p", model_columns(Participation, {"id", "study_id"})),
    (Study, "st", model_columns(Study, {"id", "prompt_template_id"})),
    (PromptTemplate, "t", model_columns(PromptTemplate, {"id", "name", "version", "body", "persona_block"})),
]


@functools.cache
def _generation_sql() -> str:
    return (
        f"SELECT {select_list(GENERATION_COLUMNS)} FROM {_table(Candidate)} c"  # noqa: S608
        f" INNER JOIN {_table(StudySystem)} sy ON sy.id = c.system_id"
        f" INNER JOIN {_table(Query)} qu ON qu.id = c.query_id"
        f" INNER JOIN {_table(PersonaProfile)} pe ON pe.id = qu.persona_id"
        f" INNER JOIN {_table(Participation)} p ON p.id = qu.participation_id"
        f" INNER JOIN {_table(Study)} st ON st.id = p.study_id"
        f" LEFT OUTER JOIN {_table(PromptTemplate)} t ON t.id = st.prompt_template_id"
        " WHERE c.id = %s"
    )


def candidate_for_generation(*, candidate_id: int) -> Candidate | None:
    """The candidate with its system, its question with the persona, and the study's prompt template, as
    `select_related("system", "query__persona", "query__participation__study__prompt_template")` with only
    GENERATION_COLUMNS loaded; None when there is none. Every generation (bench/queries.py, "candidate for
    generation")."""
    row = fetch_one(_generation_sql(), [candidate_id])
    if row is None:
        return None
    candidate, system, query, persona, participation, study, template = instances_from_row(row, GENERATION_COLUMNS)
    candidate.system, candidate.query = system, query
    query.persona, query.participation = persona, participation
    participation.study = study
    study.prompt_template = template  # None for a study without a template of its own
    return cast(Candidate, candidate)


@functools.cache
def _unfinished_sql() -> str:
    return (
        f"SELECT 1 FROM {_table(Candidate)} WHERE {column(Candidate, 'query')} = %s"  # noqa: S608
        f" AND {column(Candidate, 'status')} <> %s LIMIT 1"
    )


def query_has_unfinished(*, query_id: int) -> bool:
    """Whether any candidate of the question is not done: after every generation (bench/queries.py, "any
    candidate unfinished")."""
    return fetch_one(_unfinished_sql(), [query_id, Candidate.Status.DONE.value]) is not None


# --- The current match: the API's and the match page's -------------------------------------------------------

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
    q = connection.ops.quote_name
    return (
        f"SELECT {select_list(SHOWN_COLUMNS)} FROM {_table(Match)} m "  # noqa: S608
        f"JOIN {_table(Bracket)} b ON b.id = m.bracket_id "
        f"JOIN {_table(Query)} qu ON qu.id = b.query_id "
        f"JOIN {_table(Participation)} p ON p.id = qu.participation_id "
        f"JOIN {_table(Study)} st ON st.id = p.study_id "
        f"LEFT JOIN {_table(Candidate)} l ON l.id = m.left_id "
        f"LEFT JOIN {_table(Candidate)} r ON r.id = m.right_id "
        f"WHERE b.query_id = %s AND p.annotator_id = %s AND m.status = %s "
        f"ORDER BY m.round, m.{q('index')} LIMIT 1"
    )


def match_current_shown(*, annotator_id: int, query_id: int) -> Match | None:
    """The first pending match of question `query_id` if the question is the annotator's, with
    `bracket.query.participation.study` and both sides, of each only SHOWN_COLUMNS; None otherwise. The
    current-match API (bench/queries.py, "current match (API)")."""
    row = fetch_one(_current_match_sql(), [query_id, annotator_id, Match.Status.PENDING.value])
    if row is None:
        return None
    match, bracket, query, participation, study, left, right = instances_from_row(row, SHOWN_COLUMNS)
    participation.study = study
    return _match_assembled(match, bracket, query, participation, left, right)


def _match_assembled(match: Any, bracket: Any, query: Any, participation: Any, left: Any, right: Any) -> Match:
    """A match read as written SQL, its relations attached as `select_related` would have cached them."""
    query.participation = participation
    bracket.query = query
    match.bracket = bracket
    # A side without a candidate (never for a pending match, which has both) stays None.
    if left is not None:
        match.left = left
    if right is not None:
        match.right = right
    return cast(Match, match)


# What the match page reads with its match: the match, its bracket (the progress line) and its question whole
# (the page renders it), and both sides' text.
PAGE_COLUMNS: RowShape = [
    (Match, "m", model_columns(Match)),
    (Bracket, "b", model_columns(Bracket)),
    (Query, "qu", model_columns(Query)),
    (Candidate, "l", model_columns(Candidate, {"id", "text"})),
    (Candidate, "r", model_columns(Candidate, {"id", "text"})),
]


@functools.cache
def _page_match_sql() -> str:
    q = connection.ops.quote_name
    # Last, the question's number as the pages show it (`query_number`: the annotator's questions up to this
    # one that count, a question set aside taking none), so the page spends no statement of its own on it.
    number = (
        f"(SELECT COUNT(*) FROM {_table(Query)} n WHERE n.participation_id = qu.participation_id"  # noqa: S608
        f" AND n.{q('index')} <= qu.{q('index')} AND n.status <> %s)"
    )
    return (
        f"SELECT {select_list(PAGE_COLUMNS)}, {number} FROM {_table(Match)} m "  # noqa: S608
        f"JOIN {_table(Bracket)} b ON b.id = m.bracket_id "
        f"JOIN {_table(Query)} qu ON qu.id = b.query_id "
        f"LEFT JOIN {_table(Candidate)} l ON l.id = m.left_id "
        f"LEFT JOIN {_table(Candidate)} r ON r.id = m.right_id "
        f"WHERE qu.participation_id = %s AND qu.{q('index')} = %s AND m.status = %s "
        f"ORDER BY m.round, m.{q('index')} LIMIT 1"
    )


def match_current_of(*, participation: Participation, index: int) -> Match | None:
    """The first pending match of the participation's question number `index`, with its bracket and question
    (`participation` as its participation), both sides' text and the question's number as the pages show it
    (`query.number`); None when there is none. The match page (bench/queries.py, "current match (page)")."""
    row = fetch_one(
        _page_match_sql(), [Query.Status.DISCARDED.value, participation.pk, index, Match.Status.PENDING.value]
    )
    if row is None:
        return None
    match, bracket, query, left, right = instances_from_row(row, PAGE_COLUMNS)
    query.number = row[-1]
    return _match_assembled(match, bracket, query, participation, left, right)


@functools.cache
def _slots_sql() -> str:
    q = connection.ops.quote_name
    return (
        f"SELECT m.round, m.{q('index')}, m.status, j.winner_id FROM {_table(Match)} m "  # noqa: S608
        f"LEFT JOIN {_table(Judgment)} j ON j.match_id = m.id WHERE m.bracket_id = %s"
    )


def bracket_slots(*, bracket_id: int) -> list[tuple[Any, ...]]:
    """(round, index, status, winner id) of every match of the bracket, as
    `values_list("round", "index", "status", "judgment__winner_id")`: the match page's progress line
    (bench/queries.py, "bracket progress")."""
    return fetch_all(_slots_sql(), [bracket_id])


# --- Recording a choice ------------------------------------------------------------------------------------

# What recording a choice reads: every match of the bracket (attention checks included) whole with its
# judgment, the bracket, and of the question, participation and study the columns this path reads (the checks
# above the insert, the advance, a failed check's policy); every other column of theirs stays in the database.
# The owner's check needs the participation's owner; a failed check's screen-out reads it again, locked.
# min_ranked_questions and the question's text: the page after the answer that finishes a question says so,
# and whether it earned the completion code (annotation.views._say_if_ranked), without reading them again.
CHOICE_STUDY_FIELDS = (
    "status",
    "allow_ties",
    "comments",
    "identical_policy",
    "check_policy",
    "check_max_failures",
    "min_ranked_questions",
    "constrained_first_round",  # the adaptive design's next pair keeps to it
)
CHOICE_COLUMNS: RowShape = [
    (Match, "m", model_columns(Match)),
    (Judgment, "j", model_columns(Judgment)),
    (Bracket, "b", model_columns(Bracket)),
    (Query, "qu", model_columns(Query, {"id", "participation_id", "index", "status", "text"})),
    # `source`: a preview's answers are not added to the adaptive design's tallies.
    (Participation, "p", model_columns(Participation, {"id", "annotator_id", "study_id", "source"})),
    (Study, "st", model_columns(Study, {"id", *CHOICE_STUDY_FIELDS})),
]


@functools.cache
def _bracket_locked_sql() -> str:
    q = connection.ops.quote_name
    # Only the matches and the bracket are locked, never the study (that would queue every annotator behind
    # one row).
    return (
        f"SELECT {select_list(CHOICE_COLUMNS)} FROM {_table(Match)} m "  # noqa: S608
        f"JOIN {_table(Bracket)} b ON b.id = m.bracket_id "
        f"JOIN {_table(Match)} named ON named.bracket_id = b.id "
        f"LEFT JOIN {_table(Judgment)} j ON j.match_id = m.id "
        f"JOIN {_table(Query)} qu ON qu.id = b.query_id "
        f"JOIN {_table(Participation)} p ON p.id = qu.participation_id "
        f"JOIN {_table(Study)} st ON st.id = p.study_id "
        f"WHERE named.id = %s ORDER BY m.round, m.{q('index')}{for_update_of('m', 'b')}"
    )


def bracket_matches_locked(*, match_id: int) -> list[Match]:
    """Every match of the bracket of match `match_id` in (round, index) order, their rows and the bracket's
    locked until the transaction ends (`select_for_update(of=("self", "bracket"))`), each with its judgment
    (or none, known without a query) and the one bracket with its question, participation and study, of
    those only CHOICE_COLUMNS; empty when there is no such match. Recording a choice (bench/queries.py,
    "bracket, locked (choice)")."""
    matches: list[Match] = []
    bracket: Bracket | None = None
    judgment_rel = Match._meta.get_field("judgment")
    for row in fetch_all(_bracket_locked_sql(), [match_id]):
        match, judgment, row_bracket, query, participation, study = instances_from_row(row, CHOICE_COLUMNS)
        if bracket is None:
            participation.study = study
            query.participation = participation
            row_bracket.query = query
            bracket = row_bracket
        match.bracket = bracket
        judgment_rel.set_cached_value(match, judgment)
        if judgment is not None:
            judgment.match = match
        matches.append(match)
    return matches
