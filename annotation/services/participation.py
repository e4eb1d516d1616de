"""Invitations and participations: creating links, checking and accepting one, the open study link and its
recruiting-platform ids, screening and screen-out, resume links, previews by study members, and finishing."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotation.models import Candidate, Participation, Query
from annotation.selectors.participation import participation_locked
from kernel.exceptions import ApplicationError
from studies.links import resume_link
from studies.models import Invitation, Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.selectors.membership import StudyAction, study_allows
from studies.services.audit import audit_record
from studies.services.study import study_require_open

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I to misread


def _code(length: int = 8) -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(length))


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
    participation = _participation_create(study=invitation.study, annotator=annotator, invitation=invitation)
    return participation, True


def _anonymous_annotator() -> Any:
    """A new account without a password: the participant is known by the browser's session and the resume link."""
    # No password given: create_user stores an unusable one (as set_unusable_password does), in its one insert.
    return get_user_model().objects.create_user(username=f"annotator-{_code(12).lower()}")


def _participation_create(*, study: Study, annotator: Any, consented: bool = True, **fields: Any) -> Participation:
    if annotator is None or not annotator.is_authenticated:
        annotator = _anonymous_annotator()
    for _attempt in range(5):
        code = _code()
        if not Participation.objects.filter(code=code).exists():
            break
    return Participation.objects.create(
        study=study,
        annotator=annotator,
        code=code,
        consented_at=timezone.now() if consented else None,
        resume_token=secrets.token_urlsafe(24),
        **fields,
    )


# --- the open study link (docs/crowd.md) ---------------------------------------------------------------

PROLIFIC_PARAMS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID")
GENERIC_ID_PARAM = "external_id"
EXTERNAL_ID_MAX = 200
FULL = gettext_lazy("This study has all the participants it needs. Thank you for your interest.")


@dataclass(frozen=True)
class ExternalIds:
    """The recruiting platform's ids from the arrival URL: the participant's, and Prolific's study and session."""

    participant: str = ""
    study: str = ""
    session: str = ""


def external_ids_from(*, params: Mapping[str, Any], study: Study) -> ExternalIds:
    """Read PROLIFIC_PID, STUDY_ID and SESSION_ID, else `external_id` or the study's own parameter (workerId);
    a value longer than 200 characters is refused (400) naming the parameter."""
    names = {
        "participant": [
            "PROLIFIC_PID",
            GENERIC_ID_PARAM,
            *([study.external_id_param] if study.external_id_param else []),
        ],
        "study": ["STUDY_ID"],
        "session": ["SESSION_ID"],
    }
    found: dict[str, str] = {}
    for key, candidates in names.items():
        for name in candidates:
            value = str(params.get(name) or "").strip()
            if len(value) > EXTERNAL_ID_MAX:
                raise ApplicationError(
                    f"The link's {name} is longer than {EXTERNAL_ID_MAX} characters; please check the link.",
                    field=name,
                )
            if value:
                found[key] = value
                break
    return ExternalIds(**found)


def open_link_study(*, token: str) -> Study:
    """The study behind an enabled open link, else 404. Someone who already joined comes back through it
    whatever its expiry and cap (they refuse new participations only)."""
    study = Study.objects.filter(open_link_token=token, open_link_enabled=True).first() if token else None
    if study is None:
        raise ApplicationError(_("This study link is not valid. Please check the link you were given."), status=404)
    return study


def open_link_check(*, study: Study) -> None:
    """Why a new participation cannot start through the open link: expired (410), study not open (403). The
    participant cap is checked when joining, under the study's lock."""
    if study.open_link_expires_at and study.open_link_expires_at <= timezone.now():
        raise ApplicationError(
            _("This study is no longer accepting participants. Thank you for your interest."), status=410
        )
    study_require_open(study=study)


def study_participants_counted(*, study: Study) -> int:
    """Participations that hold one of the study's places (the cap): neither previews, nor screened out before
    annotating (one the check policy stopped took part, and counts), nor stopped without a completion code.
    Whoever stopped without a code is not paid for a place and gives it back, as a recruiting platform does
    when a participant returns their submission and sends someone else in their place: counted, that
    newcomer found the study full, and the places paid for were never all filled. With the study's
    `place_timeout_minutes` (the platform's maximum time allowed), so does whoever has not finished that long
    after joining."""
    before = (Participation.ScreenOut.DECLINED_CONSENT, Participation.ScreenOut.SCREENING)
    holding = (
        Participation.objects.filter(study=study)
        .exclude(screen_out_reason__in=before)
        .exclude(source=Participation.Source.PREVIEW)
        .exclude(stopped_at__isnull=False, completed_at__isnull=True)
    )
    if study.place_timeout_minutes is not None:
        # Past the platform's time allowed without finishing: the platform has timed them out and filled the
        # place again. They may still come back and finish; the cap then lets a few more in, never fewer.
        since = timezone.now() - timedelta(minutes=study.place_timeout_minutes)
        holding = holding.exclude(completed_at__isnull=True, created_at__lt=since)
    return holding.count()


def open_link_require_room(*, study: Study) -> None:
    if study.participant_cap is not None and study_participants_counted(study=study) >= study.participant_cap:
        raise ApplicationError(str(FULL), status=403)


def open_link_existing(*, study: Study, external: ExternalIds, annotator: Any) -> Participation | None:
    """The participation this arrival resumes: the same platform id, or the signed-in account's own."""
    if external.participant:
        found = Participation.objects.filter(study=study, external_id=external.participant).first()
        if found is not None:
            return found
    if annotator is not None and annotator.is_authenticated:
        return Participation.objects.filter(study=study, annotator=annotator).first()
    return None


ALREADY_STARTED = gettext_lazy(
    "This participant id has already been used to start this study, in another browser. To continue here, open "
    'your personal resume link: it is shown on every question page, under "Continue on another device". If '
    "you do not have it, please contact the research team through the recruiting platform and give them your "
    "participant id; they can send it to you. If you have already finished, there is nothing more to do."
)


ID_ENDED = gettext_lazy(
    "The participation of this participant id in this study has ended, or the study is closed: there is nothing "
    "more to do here. If you think this is a mistake, please contact the research team."
)


def open_link_require_own(*, study: Study, participation: Participation, annotator: Any) -> None:
    """Refuse an arrival on the open link that names the platform id of a participation it did not start
    (docs/crowd.md, "Coming back"). The browser signed in as that participation's account continues it; any
    other needs the participant's resume link (403, a page that names nothing of the participant's), unless
    the study trusts the platform id alone (`trust_platform_id`, weaker), and then only while the participation
    goes on (`participation_resume_refusal`) and belongs to a participant's own passwordless account."""
    if annotator is not None and annotator.is_authenticated and annotator.pk == participation.annotator_id:
        return
    if not study.trust_platform_id:
        raise ApplicationError(str(ALREADY_STARTED), status=403, extra={"already_started": True})
    if participation_resume_refusal(participation=participation) is not None:
        raise ApplicationError(str(ID_ENDED), status=410)
    participation_require_restorable(participation=participation)


@transaction.atomic
def open_link_join(
    *, token: str, annotator: Any, consent: bool, external: ExternalIds | None = None
) -> tuple[Participation, bool]:
    """Join a study through its open link: (the participation, whether it was created now). The same platform
    id (or account) arriving again finds its participation, however often and however concurrently, and never
    starts a second one; whether that arrival may continue it is `open_link_require_own`'s to say. A
    decline is recorded as a participation screened out (`declined_consent`), so that the platform's return
    path can be followed and a later arrival with the same id is not asked again. Refused when the study is
    full (the cap counts neither previews nor screened-out participations)."""
    study = open_link_study(token=token)
    external = external or ExternalIds()
    if study.participant_cap is not None:
        # A capped study queues its arrivals on its row, so that two cannot both take its last place. The lock
        # is FOR NO KEY UPDATE: the key-share lock every insert that refers to the study takes (an invitation's
        # participation, a system) does not wait for it. An uncapped study queues no one: a crowd launch's
        # arrivals join side by side, and the one-participation-per-id rule is the table's unique constraints.
        study = Study.objects.select_for_update(no_key=True).get(pk=study.pk)
    existing = open_link_existing(study=study, external=external, annotator=annotator)
    if existing is not None:
        return existing, False
    open_link_check(study=study)
    if consent:
        open_link_require_room(study=study)
    try:
        with transaction.atomic():
            return _open_link_create(study=study, annotator=annotator, consent=consent, external=external), True
    except IntegrityError:
        # The same id (or account) arrived at the same moment and its participation committed first: this
        # arrival resumes it, as it would have a moment later.
        existing = open_link_existing(study=study, external=external, annotator=annotator)
        if existing is None:
            raise
        return existing, False


def _open_link_create(*, study: Study, annotator: Any, consent: bool, external: ExternalIds) -> Participation:
    ids: dict[str, Any] = {
        "source": Participation.Source.OPEN_LINK,
        "external_id": external.participant,
        "external_study_id": external.study,
        "external_session_id": external.session,
    }
    participation = _participation_create(study=study, annotator=annotator, consented=consent, **ids)
    if not consent:
        participation_screen_out(participation=participation, reason=Participation.ScreenOut.DECLINED_CONSENT)
        participation.refresh_from_db()
    return participation


def participation_needs_screening(*, participation: Participation) -> bool:
    """Whether the participation is still to answer the study's screening question, which is asked after
    consent and before the persona form: the study has one, this participation has not answered it, and it
    has not passed that point (no persona saved). A question added or changed while annotators are at work
    therefore applies to later arrivals and to those still before the persona form, never to someone already
    describing themselves or ranking: they were admitted under the study's rules when they passed it, and
    screening them out then would leave their answers out of the analysis and their code unpaid
    (docs/crowd.md, "Screening"). Reads the personas only for a study with a question and no answer yet."""
    if not participation.study.screening_question or participation.screening_answer:
        return False
    return not participation.personas.exists()


SCREENING_FIRST = gettext_lazy("Please answer the study's screening question first.")


def participation_require_screened(*, participation: Participation) -> None:
    """Refuse the persona (and so every question after it) while the screening question is still to be
    answered: the pages send the annotator to it, the API answers 409 naming the route that answers it."""
    if participation_needs_screening(participation=participation):
        raise screening_first(participation=participation)


def screening_first(*, participation: Participation) -> ApplicationError:
    study = participation.study
    return ApplicationError(
        str(SCREENING_FIRST),
        status=409,
        extra={
            "screening": {
                "question": study.screening_question,
                "choices": list(study.screening_choices),
                # Where an app on the API answers it (docs/api.md, "Annotators: the screening question").
                "answer_at": reverse("participation-screening", args=[participation.pk]),
            }
        },
    )


@transaction.atomic
def participation_screen(*, participation: Participation, answer: str) -> Participation:
    """Record the answer to the study's screening question; an answer outside the accepted ones ends the
    participation as screened out (`screening`). Idempotent: the same answer again returns the participation
    as it stands (screened out or not); a different answer once one is recorded is refused (409), as is an
    answer from a participation that is not asked the question (none in the study, or it had passed the point
    where it is asked when the question was added: `participation_needs_screening`) or has ended."""
    # The participation's row alone (`of`): the study's would queue every participant's answer behind the others'.
    participation = participation_locked(participation_id=participation.pk)
    study = participation.study
    if participation.screening_answer:
        if answer == participation.screening_answer:
            return participation
        raise ApplicationError(
            _("The screening question has already been answered (%(answer)s); the answer cannot be changed.")
            % {"answer": participation.screening_answer},
            field="answer",
            status=409,
        )
    if participation_ended(participation=participation):
        raise ApplicationError(_("You have already finished this study. Thank you!"), status=409)
    if not participation_needs_screening(participation=participation):
        if not study.screening_question:
            raise ApplicationError(_("This study has no screening question."), status=409)
        raise ApplicationError(
            _(
                "The screening question is not asked of you: you had already started the study when it was "
                "added. Please carry on."
            ),
            status=409,
        )
    study_require_open(study=study)
    if answer not in study.screening_choices:
        raise ApplicationError(_("Please choose one of the answers."), field="answer")
    participation.screening_answer = answer
    participation.save(update_fields=["screening_answer"])
    if answer not in study.screening_accepted:
        participation_screen_out(participation=participation, reason=Participation.ScreenOut.SCREENING)
        participation.refresh_from_db()
    return participation


@transaction.atomic
def participation_screen_out(*, participation: Participation, reason: str) -> Participation:
    """End the participation as screened out, with its reason; idempotent (the first reason stays). It is
    left out of the analysis, exports, progress counts and the cap. A question still open is set aside."""
    if reason not in Participation.ScreenOut.values:
        raise ApplicationError(f"Unknown screen-out reason {reason!r}.", field="reason")
    participation = Participation.objects.select_for_update().get(pk=participation.pk)
    if participation_ended(participation=participation):
        return participation
    now = timezone.now()
    open_ids = list(participation.queries.filter(status__in=OPEN_STATUSES).values_list("pk", flat=True))
    if open_ids:
        Query.objects.filter(pk__in=open_ids).update(
            status=Query.Status.DISCARDED, set_aside_at=now, set_aside_reason="stopped"
        )
        candidates_cancel_set_aside(query_ids=open_ids)
    participation.screened_out_at, participation.screen_out_reason = now, reason
    participation.save(update_fields=["screened_out_at", "screen_out_reason"])
    return participation


# --- resume links and previews ---------------------------------------------------------------------------


def participation_resume_token(*, participation: Participation) -> str:
    """The participation's resume secret, created for a participation from before resume links existed."""
    if not participation.resume_token:
        token = secrets.token_urlsafe(24)
        Participation.objects.filter(pk=participation.pk, resume_token="").update(resume_token=token)
        participation.refresh_from_db(fields=["resume_token"])
    return participation.resume_token


def participation_for_resume(*, token: str, annotator: Any = None) -> Participation:
    """The participation behind a resume link. Only a participant's own passwordless account is restored this
    way: a preview, or an account that signs in with a password (a researcher's), is refused (403). The link
    works while the participation goes on: once it has ended, or its study is closed, it is refused (410,
    `participation_resume_refusal`), except in the participant's own signed-in browser, which is taken to its
    study's pages as any visit would be. A link replaced since is unknown (404)."""
    participation = (
        Participation.objects.select_related("study", "annotator").filter(resume_token=token).first() if token else None
    )
    if participation is None:
        raise ApplicationError(_("This resume link is not valid. Please check the link you saved."), status=404)
    participation_require_restorable(participation=participation)
    own = annotator is not None and annotator.is_authenticated and annotator.pk == participation.annotator_id
    if not own and (refusal := participation_resume_refusal(participation=participation)):
        raise refusal
    return participation


RESUME_ENDED = gettext_lazy(
    "This resume link no longer works: the participation it belonged to has ended. There is nothing more to do "
    "in this study. If you think this is a mistake, please contact the research team."
)
RESUME_CLOSED = gettext_lazy(
    "This resume link no longer works: the study is closed. If you think this is a mistake, please contact the "
    "research team."
)


def participation_resume_refusal(*, participation: Participation) -> ApplicationError | None:
    """Why another browser may no longer take this participation over (by its resume link, or by its platform
    id in a study that trusts it), or None while it goes on. It has ended (finished with a code, stopped without
    one, screened out: declined consent, failed the screening question or the attention checks), or its study
    is closed and it had not earned the completion code (an annotator who had may still come back to take it,
    `participation_finish_refusal`). The refusal names nothing of the participant's (410)."""
    if participation_ended(participation=participation):
        return ApplicationError(str(RESUME_ENDED), status=410)
    closed = participation.study.status == Study.Status.CLOSED
    if closed and participation_finish_refusal(participation=participation) is not None:
        return ApplicationError(str(RESUME_CLOSED), status=410)
    return None


def participation_resume_url(*, participation: Participation) -> str | None:
    """The participation's personal resume link, for the pages and the API to show; None where a resume link
    would be refused (a preview, an account that signs in with a password, a participation that has ended or
    whose study is closed)."""
    try:
        participation_require_restorable(participation=participation)
    except ApplicationError:
        return None
    if participation_resume_refusal(participation=participation) is not None:
        return None
    return resume_link(participation_resume_token(participation=participation))


@transaction.atomic
def participation_resume_link_replace(*, participation: Participation) -> Participation:
    """Issue the participation a new resume link: the old one then opens nothing (404), and every other browser
    signed in as this participant (through the old link, or the platform id) is signed out, since the account's
    session hash changes with its (still unusable) password. The caller keeps its own browser signed in
    (`update_session_auth_hash`). Refused for a preview or a password account (403) and once the link would no
    longer work (410, `participation_resume_refusal`)."""
    participation = participation_locked(participation_id=participation.pk)
    participation_require_restorable(participation=participation)
    if refusal := participation_resume_refusal(participation=participation):
        raise refusal
    participation.resume_token = secrets.token_urlsafe(24)
    participation.save(update_fields=["resume_token"])
    annotator = participation.annotator
    annotator.set_unusable_password()  # a new random unusable hash: other browsers' sessions no longer match
    annotator.save(update_fields=["password"])
    return participation


def participation_require_restorable(*, participation: Participation) -> None:
    """Refuse to sign a browser in as this participation's account unless it is a participant's passwordless one."""
    annotator = participation.annotator
    if (
        participation.source == Participation.Source.PREVIEW
        or annotator.has_usable_password()
        or annotator.is_staff
        or annotator.is_superuser
    ):
        raise ApplicationError(_("This participation belongs to an account that signs in with a password."), status=403)


@transaction.atomic
def participation_preview_start(*, study: Study, by: Any, origin: str = AuditOrigin.CODE) -> Participation:
    """Try the study as an annotator: a study member (owner or researcher, docs/permissions.md) gets a
    participation flagged `preview`, which never reaches the analysis, exports, progress counts or the cap.
    An unfinished preview is resumed; a finished one is replaced by a fresh one. The study must be open."""
    if not study_allows(user=by, study=study, action=StudyAction.ANALYSE):
        raise ApplicationError("Only the study's owners and researchers can preview it.", status=403)
    study_require_open(study=study)
    get_user_model().objects.select_for_update().filter(pk=by.pk).first()
    existing = Participation.objects.filter(study=study, annotator=by).first()
    if existing is not None:
        if existing.source != Participation.Source.PREVIEW:
            raise ApplicationError(
                "You already take part in this study as an annotator, so it cannot be previewed from this account.",
                status=409,
            )
        if not participation_ended(participation=existing):
            return existing
        # Its questions first: a question protects the persona it was asked with from a cascade.
        existing.queries.all().delete()
        existing.delete()
    preview = _participation_create(study=study, annotator=by, source=Participation.Source.PREVIEW)
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=AuditEvent.PREVIEW_STARTED,
        object_type="participation",
        object_id=preview.pk,
        object_repr=preview.code,
        before=None if existing is None else {"replaced": existing.code},
        after={"code": preview.code},
    )
    return preview


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
    """Finished with a completion code (`completed_at`), stopped early without one (`stopped_at`), or screened
    out (`screened_out_at`: declined consent or failed the screening question)."""
    return (
        participation.completed_at is not None
        or participation.stopped_at is not None
        or participation.screened_out_at is not None
    )


def participation_require_active(*, participation: Participation) -> None:
    """Refuse annotation work (a persona edit, try again, set aside, showing a match) unless the study is
    open and the participation has not ended: the pages and the API both go through here."""
    study_require_open(study=participation.study)
    if participation_ended(participation=participation):
        raise ApplicationError(_("You have already finished this study. Thank you!"), status=409)


def participation_finish_refusal(*, participation: Participation) -> ApplicationError | None:
    """Why the session cannot end now, or None. An annotator who has earned the completion code (the study's
    minimum of ranked questions) may always finish and get it, whatever the study's state: pausing or closing a
    study stops new work, not the code for work already done. Without it, a paused or closed study issues no
    code and records no stop: the answers stay saved, and the annotator may come back while it is paused."""
    status = participation.study.status
    if status == Study.Status.OPEN:
        return None
    ranked = participation.queries.filter(status=Query.Status.RANKED).count()
    if ranked >= participation.study.min_ranked_questions:
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
    closed study lets only an annotator who has earned the code finish; anyone else is refused (409,
    `participation_finish_refusal`) and nothing changes. No question is ranked while the study is paused or
    closed (answers are refused), so the count the refusal reads holds under the participation's lock."""
    participation = participation_locked(participation_id=participation.pk)
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
