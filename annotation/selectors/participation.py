"""Reads of participations: the asking annotator's own, never anyone else's."""

from __future__ import annotations

import functools
from typing import Any, cast

from django.db import connection
from django.http import Http404

from annotation.models import Participation
from kernel.rows import (
    RowShape,
    column,
    for_update_of,
    instances_from_row,
    model_columns,
    require_transaction,
    select_list,
)
from kernel.storable import DB_BIGINT_MAX
from studies.models import Study


def participation_for(*, annotator: Any, study_slug: str) -> Participation:
    """The asking annotator's own participation in a study, with the study; anyone else's is a 404.

    Every annotator page starts here, so the read is written out (`kernel.rows`): the ORM's compiling of
    this two-table read cost more CPU than the statement (bench/load.py, the comparison page).
    tests/annotation/test_page_reads.py holds it to `select_related("study")`."""
    if not annotator.is_authenticated:
        raise Http404
    return _participation_read(annotator, _participation_for_sql("slug"), study_slug)


def participation_by_invitation(*, annotator: Any, token: str) -> Participation | None:
    """The signed-in annotator's own participation, with its study, in the study an invitation link belongs
    to, whatever state the link is in (expired, used up, its study not open); None when not signed in, not
    joined, or the link is unknown (never issued, or deleted)."""
    if not annotator.is_authenticated or not token:
        return None
    return (
        Participation.objects.select_related("study")
        .filter(annotator=annotator, study__invitations__token=token)
        .first()
    )


def participation_own(*, annotator: Any, participation_id: int) -> Participation:
    """The asking annotator's participation `participation_id` with its study (the API's participation
    routes: the persona, a question, finishing); anyone else's, or none, is a 404. Written out as
    `participation_for` is; held to the ORM's read in tests/annotation/test_page_reads.py."""
    if not annotator.is_authenticated or not 0 < participation_id <= DB_BIGINT_MAX:
        raise Http404
    return _participation_read(annotator, _participation_for_sql("id"), participation_id)


def participation_locked(*, participation_id: int) -> Participation:
    """The participation with its study, its row alone locked until the transaction ends (`FOR UPDATE OF`
    the participation: locking the study's row too would queue every annotator's question behind every
    other's). The services that change a participation start here (a question, the persona, the screening
    answer, finishing); written out as `participation_for` is, held to the ORM's read in
    tests/annotation/test_page_reads.py."""
    require_transaction("participation_locked()")
    with connection.cursor() as cursor:
        cursor.execute(_participation_for_sql("locked"), [participation_id])
        row = cursor.fetchone()
    if row is None:
        raise Participation.DoesNotExist("Participation matching query does not exist.")
    participation, study = instances_from_row(row, PARTICIPATION_COLUMNS)
    participation.study = study
    return cast(Participation, participation)


def _participation_read(annotator: Any, sql: str, value: Any) -> Participation:
    with connection.cursor() as cursor:
        cursor.execute(sql, [value, annotator.pk])
        row = cursor.fetchone()
    if row is None:
        raise Http404
    participation, study = instances_from_row(row, PARTICIPATION_COLUMNS)
    participation.study = study
    participation.annotator = annotator  # the asking account itself: no query to read it again
    return cast(Participation, participation)


# The participation and its study, every column of both (the pages read many).
PARTICIPATION_COLUMNS: RowShape = [
    (Participation, "p", model_columns(Participation)),
    (Study, "s", model_columns(Study)),
]


@functools.cache
def _participation_for_sql(by: str) -> str:
    """The read by the study's slug and the owner (`by="slug"`), by the participation's key and the owner
    (`"id"`), or by the key alone with the participation's row locked (`"locked"`)."""
    q = connection.ops.quote_name
    where = {
        "slug": f"s.{column(Study, 'slug')} = %s AND p.{column(Participation, 'annotator')} = %s",
        "id": f"p.{column(Participation, 'id')} = %s AND p.{column(Participation, 'annotator')} = %s",
        "locked": f"p.{column(Participation, 'id')} = %s",
    }[by]
    # Names from the models' metadata; the values are bound parameters. One row at most: one participation
    # per study and annotator.
    return (
        f"SELECT {select_list(PARTICIPATION_COLUMNS)} FROM {q(Participation._meta.db_table)} p"  # noqa: S608
        f" INNER JOIN {q(Study._meta.db_table)} s ON s.{column(Study, 'id')} = p.{column(Participation, 'study')}"
        f" WHERE {where}{for_update_of('p') if by == 'locked' else ''}"
    )
