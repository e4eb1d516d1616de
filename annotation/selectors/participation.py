"""Reads of participations: the asking annotator's own, never anyone else's."""

from __future__ import annotations

import functools
from typing import Any, cast

from django.db import connection
from django.http import Http404

from annotation.models import Participation, Study
from kernel.rows import RowShape, instances_from_row, model_columns, select_list


def participation_for(*, annotator: Any, study_slug: str) -> Participation:
    """The asking annotator's own participation in a study, with the study; anyone else's is a 404.

    Every annotator page starts here, so the read is written out (`kernel.rows`): the ORM's compiling of
    this two-table read cost more CPU than the statement (bench/load.py, the comparison page).
    tests/annotation/test_page_reads.py holds it to `select_related("study")`."""
    if not annotator.is_authenticated:
        raise Http404
    with connection.cursor() as cursor:
        cursor.execute(_participation_for_sql(), [study_slug, annotator.pk])
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
def _participation_for_sql() -> str:
    q = connection.ops.quote_name

    def column(model: Any, name: str) -> str:
        return q(model._meta.get_field(name).column)

    # Names from the models' metadata; the values are bound parameters. One row at most: one participation
    # per study and annotator.
    return (
        f"SELECT {select_list(PARTICIPATION_COLUMNS)} FROM {q(Participation._meta.db_table)} p"  # noqa: S608
        f" INNER JOIN {q(Study._meta.db_table)} s ON s.{column(Study, 'id')} = p.{column(Participation, 'study')}"
        f" WHERE s.{column(Study, 'slug')} = %s AND p.{column(Participation, 'annotator')} = %s"
    )
