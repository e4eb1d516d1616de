"""Reads of a study: progress per participation for its researchers, and the language of its annotator pages."""

from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from annotation.models import Participation, Query
from studies.models import Study


def study_progress(*, study: Study) -> QuerySet[Participation]:
    """Every participation but the study members' previews (screened-out ones say so in their outcome)."""
    return study.participations.exclude(source=Participation.Source.PREVIEW).annotate(
        queries_ranked=Count("queries", filter=Q(queries__status=Query.Status.RANKED), distinct=True),
        queries_total=Count("queries", distinct=True),
    )


def study_language(
    *,
    slug: str | None = None,
    invitation_token: str | None = None,
    open_link_token: str | None = None,
    resume_token: str | None = None,
) -> str | None:
    """The language of a study's annotator pages, found by its slug, one of its invitation tokens, its open
    link's token or a participant's resume token; None when there is no such study (its pages are then a 404
    in the default language)."""
    if slug is not None:
        studies = Study.objects.filter(slug=slug)
    elif invitation_token is not None:
        studies = Study.objects.filter(invitations__token=invitation_token)
    elif open_link_token:
        studies = Study.objects.filter(open_link_token=open_link_token)
    elif resume_token:
        studies = Study.objects.filter(participations__resume_token=resume_token)
    else:
        return None
    return studies.values_list("language", flat=True).first()
