"""Reads of candidate generation: anonymous progress for the waiting page, and the failures for admins."""

from __future__ import annotations

from django.db.models import QuerySet
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy

from annotation.models import Candidate, Query

PROGRESS_LABELS: dict[str, str | Promise] = {
    Candidate.Status.QUEUED: gettext_lazy("waiting"),
    Candidate.Status.RUNNING: gettext_lazy("being written…"),
    Candidate.Status.DONE: gettext_lazy("ready"),
    Candidate.Status.FAILED: gettext_lazy("could not be written"),
}


def generation_progress(*, query: Query) -> list[dict[str, object]]:
    """Anonymous per-candidate progress for the waiting page: no system, model or condition."""
    rows = list(query.candidates.order_by("pk").values("status", "attempts"))
    return [
        {
            "number": n,
            "status": row["status"],
            "label": str(PROGRESS_LABELS[row["status"]]),
            "attempts": row["attempts"],
        }
        for n, row in enumerate(rows, start=1)
    ]


def candidates_failed() -> QuerySet[Candidate]:
    return Candidate.objects.filter(status=Candidate.Status.FAILED).select_related(
        "system", "query__participation__study"
    )
