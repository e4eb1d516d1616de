"""Reads of participations: the asking annotator's own, never anyone else's."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from annotation.models import Participation


def participation_for(*, annotator: Any, study_slug: str) -> Participation:
    """The asking annotator's own participation in a study; anyone else's is a 404."""
    if not annotator.is_authenticated:
        raise Http404
    participation = (
        Participation.objects.select_related("study").filter(study__slug=study_slug, annotator=annotator).first()
    )
    if participation is None:
        raise Http404
    participation.annotator = annotator  # the asking account itself: no query to read it again
    return participation
