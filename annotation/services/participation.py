"""Invitations and participations: creating links, checking and accepting one, and finishing a session."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotation.models import Candidate, Invitation, Participation, Query, Study
from annotation.services.study import study_require_open
from kernel.exceptions import ApplicationError

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread


def _code(length: int = 8) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(length))


@transaction.atomic
def invitation_create_bulk(
    *, study: Study, count: int, max_uses: int = 1, expires_at: datetime | None = None, note: str = ""
) -> list[Invitation]:
    if not 1 <= count <= 1000:
        raise ApplicationError("Create between 1 and 1000 invitations at a time.", field="count")
    if max_uses < 1:
        raise ApplicationError("An invitation must allow at least one use.", field="max_uses")
    return [
        Invitation.objects.create(
            study=study, token=secrets.token_urlsafe(24), max_uses=max_uses, expires_at=expires_at, note=note
        )
        for _ in range(count)
    ]


USED_UP = gettext_lazy("This invitation has already been used. Please ask the research team for a new link.")


def invitation_check(*, token: str, allow_used_up: bool = False) -> Invitation:
    """The invitation behind a link, or a clear reason why it cannot be used. A used-up link is refused
    here, before the consent page, unless the caller first checks for the annotator's own participation."""
    invitation = Invitation.objects.select_related("study").filter(token=token).first()
    if invitation is None:
        raise ApplicationError(_("This invitation link is not valid. Please check the link you were sent."), status=404)
    if invitation.expires_at and invitation.expires_at <= timezone.now():
        raise ApplicationError(
            _("This invitation has expired. Please ask the research team for a new link."), status=410
        )
    study_require_open(study=invitation.study)
    if not allow_used_up:
        invitation_require_unused(invitation=invitation)
    return invitation


def invitation_require_unused(*, invitation: Invitation) -> None:
    if invitation.uses >= invitation.max_uses:
        raise ApplicationError(str(USED_UP), status=410)


def invitation_accept(*, token: str, annotator: Any, consent: bool) -> Participation:
    """Join a study through an invitation. Accepting twice returns the same participation."""
    return invitation_join(token=token, annotator=annotator, consent=consent)[0]


@transaction.atomic
def invitation_join(*, token: str, annotator: Any, consent: bool) -> tuple[Participation, bool]:
    """Join a study through an invitation: (the participation, whether it was created now). Accepting
    again, even two invitations of one study at the same moment, returns the one participation."""
    invitation = invitation_check(token=token, allow_used_up=True)
    if annotator is not None and annotator.is_authenticated:
        # Lock the account's row: two accepts by one account queue here, and the second finds the
        # participation the first created instead of failing on the one-per-study constraint.
        get_user_model().objects.select_for_update().filter(pk=annotator.pk).first()
        existing = Participation.objects.filter(study=invitation.study, annotator=annotator).first()
        if existing is not None:
            return existing, False
    if not consent:
        raise ApplicationError(_("Please confirm that you agree to take part."), field="consent")
    # Conditional increment: two people racing for the last use cannot both get it.
    claimed = Invitation.objects.filter(pk=invitation.pk, uses__lt=F("max_uses")).update(uses=F("uses") + 1)
    if not claimed:
        raise ApplicationError(str(USED_UP), status=410)
    if annotator is None or not annotator.is_authenticated:
        user_model = get_user_model()
        annotator = user_model.objects.create_user(username=f"annotator-{_code(12).lower()}")
        annotator.set_unusable_password()
        annotator.save()
    for _attempt in range(5):
        code = _code()
        if not Participation.objects.filter(code=code).exists():
            break
    participation = Participation.objects.create(
        study=invitation.study, annotator=annotator, invitation=invitation, code=code, consented_at=timezone.now()
    )
    return participation, True


def participation_queries_used(*, participation: Participation) -> int:
    return participation.queries.exclude(status=Query.Status.DISCARDED).count()


def candidates_cancel_set_aside(*, query_ids: Any) -> int:
    """A question set aside or stopped needs no more summaries: its candidates not yet started end
    failed with that reason, so no worker spends a model call on them ahead of the next question."""
    return Candidate.objects.filter(query_id__in=query_ids, status=Candidate.Status.QUEUED).update(
        status=Candidate.Status.FAILED,
        failure_reason="Not written: the annotator set the question aside.",
        finished_at=timezone.now(),
    )


def participation_ended(*, participation: Participation) -> bool:
    """Finished with a completion code (`completed_at`) or stopped early without one (`stopped_at`)."""
    return participation.completed_at is not None or participation.stopped_at is not None


def participation_require_active(*, participation: Participation) -> None:
    """Refuse annotation work (a persona edit, try again, set aside, showing a match) unless the study is
    open and the participation has not ended: the pages and the API both go through here."""
    study_require_open(study=participation.study)
    if participation_ended(participation=participation):
        raise ApplicationError(_("You have already finished this study. Thank you!"), status=409)


def participation_finish_refusal(*, participation: Participation) -> ApplicationError | None:
    """Why the session cannot end now, or None. A paused or closed study issues no completion code and
    records no stop: the annotator's answers stay saved, and they may come back while it is paused."""
    status = participation.study.status
    if status == Study.Status.OPEN:
        return None
    if status == Study.Status.PAUSED:
        return ApplicationError(
            _(
                "This study is paused, so it cannot be finished and no completion code can be issued now. "
                "Your answers so far are saved: please come back when it reopens, or simply close this page."
            ),
            status=409,
        )
    return ApplicationError(
        _(
            "This study is closed, so no completion code can be issued. Your answers so far are saved; if you "
            "need to be compensated, please contact the research team with your reference %(reference)s."
        )
        % {"reference": participation.code},
        status=409,
    )


OPEN_STATUSES = (Query.Status.RETRIEVING, Query.Status.GENERATING, Query.Status.READY, Query.Status.FAILED)


@transaction.atomic
def participation_finish(*, participation: Participation) -> Participation:
    """End the annotator's session, after the last question or early ("stop the study"); idempotent.

    The completion code is earned: with at least the study's `min_ranked_questions` ranked, the session
    ends with `completed_at` and a `completion_code`. With fewer, the annotator may still leave: the stop
    is recorded in `stopped_at` and no code is issued (the researcher compensates by hand, looking the
    participation up by its `code`). Either way a question still open (being searched or written, failed,
    or part-ranked) becomes `discarded` with `set_aside_reason="stopped"` and `set_aside_at`; its judgments
    stay stored but it is not `ranked`, so analyses that use ranked questions leave it out. A paused or
    closed study refuses (409, `participation_finish_refusal`) and changes nothing."""
    participation = (
        Participation.objects.select_for_update(of=("self",)).select_related("study").get(pk=participation.pk)
    )
    if participation_ended(participation=participation):
        return participation
    if refusal := participation_finish_refusal(participation=participation):
        raise refusal
    now = timezone.now()
    # One read of every question's status serves both the open ones and the ranked count.
    statuses = list(participation.queries.values_list("pk", "status"))
    open_ids = [pk for pk, status in statuses if status in OPEN_STATUSES]
    if open_ids:  # a normal finish has none: no writes
        Query.objects.filter(pk__in=open_ids).update(
            status=Query.Status.DISCARDED, set_aside_at=now, set_aside_reason="stopped"
        )
        candidates_cancel_set_aside(query_ids=open_ids)
    ranked = sum(1 for _, status in statuses if status == Query.Status.RANKED)
    if ranked >= participation.study.min_ranked_questions:
        participation.completed_at = now
        participation.completion_code = _code(10)
        participation.save(update_fields=["completed_at", "completion_code"])
    else:
        participation.stopped_at = now
        participation.save(update_fields=["stopped_at"])
    return participation
