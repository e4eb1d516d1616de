"""Reads of queries: the annotator's own by number, the one being worked on, and a query's frozen sources."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from annotation import queries
from annotation.models import Participation, Query, RetrievedDocument
from kernel.backends import Document
from kernel.storable import DB_BIGINT_MAX


def query_for(*, participation: Participation, index: int) -> Query:
    query = participation.queries.filter(index=index).first()
    if query is None:
        raise Http404
    return query


def query_number(*, query: Query) -> int:
    """The question's number as every page shows it ("Question N of M"): its place among the annotator's
    questions that count toward the limit, so a question set aside (which does not count) takes no number."""
    earlier = Query.objects.filter(participation_id=query.participation_id, index__lt=query.index)
    return earlier.exclude(status=Query.Status.DISCARDED).count() + (query.status != Query.Status.DISCARDED)


def queries_ranked_count(*, participation_id: int) -> int:
    """How many of the participation's questions are ranked (their comparisons all answered)."""
    return Query.objects.filter(participation_id=participation_id, status=Query.Status.RANKED).count()


def query_of_annotator(*, annotator: Any, query_id: int, fields: Sequence[str]) -> Query | None:
    """Question `query_id` if it is the annotator's, with only `fields` loaded (and its key); None otherwise.
    The status poll reads it on every call: a written read (`annotation.queries.query_of_annotator`)."""
    if annotator is None or annotator.pk is None or not 0 < query_id <= DB_BIGINT_MAX:
        return None
    return queries.query_of_annotator(annotator_id=annotator.pk, query_id=query_id, fields=fields)


def query_with_study(*, query_id: int, lock: bool = False, retrieval: bool = False) -> Query:
    """Question `query_id` with its participation and study in one statement. `lock` locks the question's row
    alone until the transaction ends (drawing the bracket); `retrieval` adds what the retrieval reads, the
    study's prompt template and `has_documents` (whether the sources are stored). Query.DoesNotExist when
    there is none."""
    found = Query.objects.select_related(
        "participation__study__prompt_template" if retrieval else "participation__study"
    )
    if retrieval:
        found = found.annotate(has_documents=Exists(RetrievedDocument.objects.filter(query_id=OuterRef("pk"))))
    if lock:
        found = found.select_for_update(of=("self",))
    return found.get(pk=query_id)


def query_current(*, participation: Participation) -> Query | None:
    """The question the annotator is working on, if any."""
    return (
        participation.queries.exclude(status__in=[Query.Status.RANKED, Query.Status.DISCARDED])
        .order_by("-index")
        .first()
    )


def query_document_values(*, query: Query, names: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The question's sources in rank order as `values_list(*names)` tuples (the status poll's body, the match
    page's list): a written read (`annotation.queries.documents_values`)."""
    return queries.documents_values(query_id=query.pk, names=names)


def query_documents(*, query: Query) -> list[Document]:
    """The sources retrieved for a query, in rank order, as the backends take them."""
    # Every generation reads them: a written read (annotation.queries).
    rows = queries.documents_values(
        query_id=query.pk, names=("external_id", "title", "abstract", "url", "year", "venue", "authors")
    )
    return [
        Document(
            external_id=external_id,
            title=title,
            abstract=abstract,
            url=url,
            year=year,
            venue=venue,
            authors=tuple(authors),
        )
        for external_id, title, abstract, url, year, venue, authors in rows
    ]


# How long the waiting page waits before it says, in plain words, that something is wrong and offers a
# way out. Normal questions take seconds; four summaries with the tasks' backoff retries (at most about
# 30 s) and a slow model fit well within two minutes, and a paid crowd worker should not sit longer than
# that without a choice. The ANNOTATION_WAIT_DEADLINE_S setting (environment, default 120 s).


def wait_deadline_s() -> int:
    return int(settings.ANNOTATION_WAIT_DEADLINE_S)


@dataclass(frozen=True)
class WaitState:
    """What the waiting page tells the annotator, and the API its clients: the question's status as shown
    (`failed` as soon as its search or one of its summaries failed, though the question's row still says
    `generating` until it is retried or set aside), whether it failed and why, whether it is past its
    deadline, and what is happening."""

    overdue: bool
    failed: bool
    message: str
    status: str = ""
    reason: str = ""


SETTLED = (Query.Status.READY, Query.Status.RANKED, Query.Status.DISCARDED)


def query_wait_state(*, query: Query, progress: list[dict[str, object]], now: datetime | None = None) -> WaitState:
    """The one reading of a question's state for the waiting page, its poll and the API (`query_body`), from
    the query and its anonymous progress rows, so that they never disagree: plain words, the status shown,
    the failure and its reason."""
    if query.status in SETTLED:
        return WaitState(overdue=False, failed=False, message="", status=str(query.status))
    now = now or timezone.now()
    failed = query.status == Query.Status.FAILED or any(row["status"] == "failed" for row in progress)
    # The clock restarts when the annotator asked for it again ("try again" stamps retrieval_queued_at).
    waiting_since = max(query.created_at, query.retrieval_queued_at or query.created_at)
    overdue = (now - waiting_since).total_seconds() >= wait_deadline_s()
    deadline = wait_deadline_s()
    if deadline >= 60:
        minutes = round(deadline / 60)
        waited = ngettext("more than %(n)d minute", "more than %(n)d minutes", minutes) % {"n": minutes}
    else:
        waited = ngettext("more than %(n)d second", "more than %(n)d seconds", deadline) % {"n": deadline}
    done = sum(1 for row in progress if row["status"] == "done")
    reason = ""
    if query.status == Query.Status.FAILED:
        message = _("Something went wrong: the search for sources did not succeed.")
        reason = _("The search for sources did not succeed.")
    elif failed:
        lost = sum(1 for row in progress if row["status"] == "failed") or 1
        message = ngettext(
            "Something went wrong: one of the summaries could not be written.",
            "Something went wrong: %(n)d of the summaries could not be written.",
            lost,
        ) % {"n": lost}
        reason = ngettext(
            "One of the summaries could not be written.", "%(n)d of the summaries could not be written.", lost
        ) % {"n": lost}
    elif query.status == Query.Status.RETRIEVING and query.queue_failed_at is not None:
        message = _(
            "Your question is saved, but our background service cannot be reached right now, so the search "
            "has not started. It will start by itself when the service is back."
        )
    elif query.status == Query.Status.RETRIEVING:
        message = (
            _(
                "The search for sources has taken %(waited)s, much longer than usual: our background service "
                "may be busy or stopped."
            )
            % {"waited": waited}
            if overdue
            else _("Searching for relevant paper abstracts…")
        )
    elif overdue:
        message = _(
            "Writing the summaries has taken %(waited)s, much longer than usual (%(done)d of %(total)d ready): "
            "our background service may be busy or stopped."
        ) % {"waited": waited, "done": done, "total": len(progress)}
    else:
        message = _("Summaries are being written. This page updates by itself.")
    return WaitState(
        overdue=overdue and not failed,
        failed=failed,
        message=message,
        status=str(Query.Status.FAILED if failed else query.status),
        reason=reason,
    )
