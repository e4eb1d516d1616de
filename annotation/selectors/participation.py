"""Reads of participations: the asking annotator's own, never anyone else's."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from annotation import queries
from annotation.models import Participation
from kernel.storable import DB_BIGINT_MAX


def participation_for(*, annotator: Any, study_slug: str) -> Participation:
    """The asking annotator's own participation in a study, with the study; anyone else's is a 404. Every
    annotator page starts here: a written read (`annotation.queries.participation_with_study`)."""
    if not annotator.is_authenticated:
        raise Http404
    participation = queries.participation_with_study(annotator=annotator, study_slug=study_slug)
    if participation is None:
        raise Http404
    return participation


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
    """The asking annotator's participation `participation_id` with its study and the asking account (the
    API's participation routes: the persona, a question, finishing); anyone else's, or none, is a 404."""
    if not annotator.is_authenticated or not 0 < participation_id <= DB_BIGINT_MAX:
        raise Http404
    participation = (
        Participation.objects.select_related("study").filter(pk=participation_id, annotator=annotator).first()
    )
    if participation is None:
        raise Http404
    participation.annotator = annotator  # the asking account itself: no query to read it again
    return participation


def participation_locked(*, participation_id: int) -> Participation:
    """The participation with its study, its row alone locked until the transaction ends (`of=("self",)`:
    locking the study's row too would queue every annotator's question behind every other's). The services
    that change a participation start here (a question, the persona, the screening answer, finishing)."""
    return Participation.objects.select_for_update(of=("self",)).select_related("study").get(pk=participation_id)
