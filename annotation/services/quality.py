"""Quality control: attention checks inserted among a question's matches, the study's check policy (warn, or
screen the participation out after N failed checks), and a researcher's manual exclusion of a participation
from the analysis (docs/annotators.md, "Attention checks"; docs/analysis.md, "Exclusion rule")."""

from __future__ import annotations

import random
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy

from annotation.adaptive import pair_label
from annotation.models import Bracket, Candidate, Judgment, Match, Participation
from annotation.positions import position_name, span_label
from annotation.services.participation import participation_screen_out
from kernel.exceptions import ApplicationError
from kernel.storable import unstorable_text
from studies.models import Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.selectors.membership import StudyAction, study_allows
from studies.services.audit import audit_record

# A check match sits after the real matches of its round (index 90 and up), so that (round, index) order
# shows it between two rounds (round 0: before the final of a bracket whose only round is the final), and the
# tournament's slots (index < size) never meet it.
CHECK_INDEX = 90
# The decoy is drawn among this many of the study's newest other summaries: one indexed read, however big.
DECOY_POOL = 50


def check_due(*, seed: int, share: float) -> bool:
    """Whether the question drawn with this bracket seed gets an attention check: true for a share of seeds.
    Pure and reproducible from the bracket's seed, like every other draw of the bracket."""
    return share > 0 and random.Random(f"{seed}:check").random() < share


def check_match_create(
    *, bracket: Bracket, study_id: int, participation_id: int, candidate_ids: list[int]
) -> Match | None:
    """Add one attention check to a freshly drawn bracket: one of this question's summaries against a summary
    written for another question of the study (the decoy), sides and round drawn from the bracket's seed.
    None when the study has no other summary yet (its very first question).

    The decoy is never a preview's summary (but a preview's own, for a preview): a finished preview is
    replaced, its questions deleted (`participation_preview_start`), and the database's cascade would take a
    real annotator's check, answered or not, with them. Every other participation's summaries are kept for good.

    Nothing tells the check from a data match (docs/annotators.md, "Attention checks"): it is never shown after
    the final, which the page labels "Final comparison" (it follows a round before the final, or, in a
    two-summary bracket whose only match is the final, comes before it: round 0), and its label is the one the
    tournament's scheme gives the next slot of its round (`check_label`), never one of the question's own."""
    rng = random.Random(f"{bracket.seed}:check-match")
    decoys = list(
        Candidate.objects.filter(query__participation__study_id=study_id, status=Candidate.Status.DONE)
        .exclude(query_id=bracket.query_id)
        .exclude(
            Q(query__participation__source=Participation.Source.PREVIEW) & ~Q(query__participation_id=participation_id)
        )
        .order_by("-pk")
        .values_list("pk", flat=True)[:DECOY_POOL]
    )
    if not decoys or not candidate_ids:
        return None
    real, decoy = rng.choice(sorted(candidate_ids)), rng.choice(decoys)
    expected = rng.choice(["left", "right"])
    left, right = (real, decoy) if expected == "left" else (decoy, real)
    round_number = rng.randint(1, bracket.rounds - 1) if bracket.rounds > 1 else 0
    return Match.objects.create(
        bracket=bracket,
        round=round_number,
        index=CHECK_INDEX,
        # An adaptive question's comparisons are numbered as shown (pair1, pair2, ...): the check takes the number
        # after the comparison it follows, and the comparisons after it count it (services.tournament).
        label=pair_label(round_number + 1)
        if bracket.adaptive
        else check_label(round_number=round_number, size=bracket.size),
        left_id=left,
        right_id=right,
        check_expected=expected,
    )


def check_label(*, round_number: int, size: int) -> str:
    """The check's label: as annotation.services.tournament labels a match of its round (round1_ab, round2_abcd),
    for the slot after the round's last one (round1_ef in a bracket of four), so no label of the question
    appears twice and none is "final" (the API shows labels, and "check" would give it away)."""
    span = 2**round_number
    return f"round{round_number}_{span_label([position_name(i) for i in range(size, size + span)])}"


def check_failures(*, participation: Participation) -> int:
    """Failed attention checks of a participation: answered with the decoy or with "neither"."""
    return (
        Judgment.objects.filter(match__bracket__query__participation=participation)
        .exclude(match__check_expected="")
        .exclude(choice=F("match__check_expected"))
        .count()
    )


def check_failed(*, match: Match, choice: str) -> bool:
    return bool(match.check_expected) and choice != match.check_expected


# Shown after a failed attention check under the "warn" policy (docs/annotators.md), on the page and in the API.
CHECK_WARNING = gettext_lazy(
    "A note on your last answer: some comparisons have an answer we know, and yours did not match it. "
    "Please read both summaries against your question before choosing. Thank you!"
)


def check_warning(*, judgment: Judgment, since: Any) -> str | None:
    """The warning for an answer recorded at or after `since` that failed a check under the warn policy;
    None otherwise, so the same answer sent again (returned unchanged) is not warned twice. Reads nothing:
    the recording service returns the judgment with its match, bracket, question and study."""
    if judgment.answered_at < since or not check_failed(match=judgment.match, choice=judgment.choice):
        return None
    if judgment.match.bracket.query.participation.study.check_policy != Study.CheckPolicy.WARN:
        return None
    return str(CHECK_WARNING)


@transaction.atomic
def participation_stop_by_checks(*, participation: Participation) -> Participation:
    """End a participation by the study's check policy: screened out (open questions set aside, no completion
    code: annotation.services.participation.participation_screen_out) and stopped, so the annotator is shown
    the screen-out page and the participation counts as stopped."""
    participation = participation_screen_out(participation=participation, reason=Participation.ScreenOut.CHECKS)
    if participation.screen_out_reason == Participation.ScreenOut.CHECKS and participation.stopped_at is None:
        participation.stopped_at = participation.screened_out_at
        participation.save(update_fields=["stopped_at"])
    return participation


def check_apply_policy(*, participation: Participation, study: Study) -> bool:
    """After a failed check: under the stop policy, screen the participation out once its failures reach the
    study's limit. True when it was screened out now."""
    if study.check_policy != Study.CheckPolicy.STOP:
        return False
    if check_failures(participation=participation) < study.check_max_failures:
        return False
    participation_stop_by_checks(participation=participation)
    return True


def _require_analyse(*, participation: Participation, by: Any) -> None:
    """Owners and researchers of the study (docs/permissions.md, "analyse"); a non-member is told nothing."""
    if study_allows(user=by, study=participation.study, action=StudyAction.ANALYSE):
        return
    if study_allows(user=by, study=participation.study, action=StudyAction.SEE):
        raise ApplicationError(
            "Excluding participations is for the study's researchers and owners; your role is viewer.", status=403
        )
    raise ApplicationError("Not found.", status=404)


def _exclusion(participation: Participation) -> dict[str, Any]:
    return {"excluded_at": participation.excluded_at, "exclusion_reason": participation.exclusion_reason}


def _audit_exclusion(
    *, participation: Participation, by: Any, origin: str, event: AuditEvent, before: dict[str, Any]
) -> None:
    audit_record(
        study=participation.study,
        by=by,
        origin=origin,
        event_type=event,
        object_type="participation",
        object_id=participation.pk,
        object_repr=participation.code,
        before=before,
        after=_exclusion(participation),
    )


@transaction.atomic
def participation_exclude(
    *, participation: Participation, reason: str, by: Any, origin: str = AuditOrigin.CODE
) -> Participation:
    """Mark a participation excluded from the analysis, with the researcher's reason. Idempotent: the same
    exclusion again changes nothing; a new reason replaces the old one."""
    _require_analyse(participation=participation, by=by)
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError("Say why this participation is excluded.", field="reason")
    if len(reason) > 1000:
        raise ApplicationError("Keep the reason under 1000 characters.", field="reason")
    # The dashboard's form and the admin action pass the raw POST: the database refuses a NUL in text.
    if problem := unstorable_text(reason):
        raise ApplicationError(f"The reason {problem}.", field="reason")
    participation = (
        Participation.objects.select_for_update(of=("self",)).select_related("study").get(pk=participation.pk)
    )
    if participation.excluded_at is not None and participation.exclusion_reason == reason:
        return participation
    before = _exclusion(participation)
    participation.excluded_at = participation.excluded_at or timezone.now()
    participation.exclusion_reason = reason
    participation.excluded_by = by if getattr(by, "pk", None) else None
    participation.save(update_fields=["excluded_at", "exclusion_reason", "excluded_by"])
    _audit_exclusion(
        participation=participation, by=by, origin=origin, event=AuditEvent.PARTICIPATION_EXCLUDED, before=before
    )
    return participation


@transaction.atomic
def participation_include(*, participation: Participation, by: Any, origin: str = AuditOrigin.CODE) -> Participation:
    """Undo a manual exclusion; idempotent."""
    _require_analyse(participation=participation, by=by)
    participation = (
        Participation.objects.select_for_update(of=("self",)).select_related("study").get(pk=participation.pk)
    )
    if participation.excluded_at is None:
        return participation
    before = _exclusion(participation)
    participation.excluded_at = None
    participation.exclusion_reason = ""
    participation.excluded_by = None
    participation.save(update_fields=["excluded_at", "exclusion_reason", "excluded_by"])
    _audit_exclusion(
        participation=participation, by=by, origin=origin, event=AuditEvent.PARTICIPATION_INCLUDED, before=before
    )
    return participation
