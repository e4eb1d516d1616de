"""Reading the audit log: the rows of the studies the reader may analyse (owners and researchers, and
superusers, who also see the rows of deleted studies), filtered, and as CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import QuerySet

from kernel.exceptions import ApplicationError
from kernel.spreadsheet import neutralize_cell
from studies.models import Study
from studies.models_audit import AuditEvent, StudyAuditLog
from studies.selectors.membership import StudyAction, scoped_to_studies

# Who may read a study's audit log: it holds exclusion reasons and open-link settings, which a viewer does not see.
AUDIT_ACTION = StudyAction.ANALYSE

CSV_COLUMNS = (
    "id",
    "event_time",
    "study",
    "actor",
    "origin",
    "event_type",
    "object_type",
    "object_id",
    "object",
    "before",
    "after",
)


def audit_log_visible(*, user: Any) -> QuerySet[StudyAuditLog]:
    """Every row the user may read, newest first."""
    rows = StudyAuditLog.objects.select_related("study", "actor")
    return scoped_to_studies(rows, user=user, action=AUDIT_ACTION)


def audit_log_of_study(
    *, user: Any, study: Study, event_type: str | None = None, actor: str | None = None
) -> QuerySet[StudyAuditLog]:
    """One study's rows (the caller has checked the user may read them), by event type and actor's username
    when given; an event type outside the closed set is a 400 naming the known ones."""
    rows = audit_log_visible(user=user).filter(study=study)
    if event_type:
        if event_type not in AuditEvent.values:
            raise ApplicationError(
                f"Unknown event type {event_type!r}; choose one of {', '.join(AuditEvent.values)}.",
                field="event_type",
            )
        rows = rows.filter(event_type=event_type)
    if actor:
        rows = rows.filter(actor_name=actor)
    return rows


def audit_row(row: StudyAuditLog) -> dict[str, Any]:
    """A row as the API and the CSV give it."""
    return {
        "id": row.pk,
        "event_time": row.event_time.isoformat(),
        "study": row.study_slug,
        "actor": row.actor_name or None,
        "origin": row.origin,
        "event_type": row.event_type,
        "object_type": row.object_type,
        "object_id": row.object_id,
        "object": row.object_repr,
        "before": row.before,
        "after": row.after,
    }


def audit_csv_lines(rows: Iterable[StudyAuditLog]) -> Iterator[str]:
    """The rows as CSV text, a header first, line by line (for a streamed download); before and after as JSON."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def flush() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    writer.writerow(CSV_COLUMNS)
    yield flush()
    for row in rows:
        values = audit_row(row)
        for key in ("before", "after"):
            values[key] = "" if values[key] is None else json.dumps(values[key], sort_keys=True)
        values["actor"] = values["actor"] or ""
        # Usernames and labels are others' text: a spreadsheet must not run one as a formula.
        writer.writerow([neutralize_cell(values[column]) for column in CSV_COLUMNS])
        yield flush()
