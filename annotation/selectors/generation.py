"""Reads of candidate generation: anonymous progress for the waiting page, and the failures for admins."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from annotation import queries
from annotation.models import Candidate, Query
from studies.selectors.membership import StudyAction, scoped_to_studies

PROGRESS_LABELS: dict[str, str | Promise] = {
    Candidate.Status.QUEUED: gettext_lazy("waiting"),
    Candidate.Status.RUNNING: gettext_lazy("being written…"),
    Candidate.Status.DONE: gettext_lazy("ready"),
    Candidate.Status.FAILED: gettext_lazy("could not be written"),
}


def generation_progress(*, query: Query) -> list[dict[str, object]]:
    """Anonymous per-candidate progress for the waiting page: no system, model or condition."""
    # The status poll reads this on every call: a written read (annotation.queries).
    rows = queries.candidate_progress_values(query_id=query.pk)
    return [
        {"number": n, "status": status, "label": str(PROGRESS_LABELS[status]), "attempts": attempts}
        for n, (status, attempts) in enumerate(rows, start=1)
    ]


def candidates_failed() -> QuerySet[Candidate]:
    return Candidate.objects.filter(status=Candidate.Status.FAILED).select_related(
        "system", "query__participation__study"
    )


def candidates_failed_count(*, user: Any) -> int:
    """How many summaries of the studies `user` may analyse failed (every study's for a superuser): the admin
    index's notice (annotation.templatetags.failed_work_alert)."""
    queryset = Candidate.objects.filter(status=Candidate.Status.FAILED)
    return scoped_to_studies(
        queryset, user=user, action=StudyAction.ANALYSE, path="query__participation__study"
    ).count()
