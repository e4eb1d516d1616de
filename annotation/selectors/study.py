"""Reads of a study for its researchers: progress per participation."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from annotation.models import Participation, Query, Study


def study_progress(*, study: Study) -> QuerySet[Participation]:
    """Every participation but the study members' previews (screened-out ones say so in their outcome)."""
    return study.participations.exclude(source=Participation.Source.PREVIEW).annotate(
        queries_ranked=Count("queries", filter=Q(queries__status=Query.Status.RANKED), distinct=True),
        queries_total=Count("queries", distinct=True),
    )
