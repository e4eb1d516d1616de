"""Who may do what with a study: the one reading of study membership that the admin, the admin API and
the research pages all call (the table is docs/permissions.md). Superusers may do everything; anyone else
acts on a study only through a membership whose role allows the action."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from django.db.models import QuerySet

from studies.models import Study, StudyMembership

Role = StudyMembership.Role


class StudyAction(StrEnum):
    """What a role allows, from least to most."""

    SEE = "see"  # results (dashboard, comparison table, job and scoring status) and progress
    ANALYSE = "analyse"  # start scoring, exports, reports, stress tests; download outputs; see invitations, raw data
    MANAGE = "manage"  # edit the study, its systems, status, invitations, members; retry failed work


ROLES_ALLOWED: dict[StudyAction, frozenset[str]] = {
    StudyAction.SEE: frozenset({Role.OWNER, Role.RESEARCHER, Role.VIEWER}),
    StudyAction.ANALYSE: frozenset({Role.OWNER, Role.RESEARCHER}),
    StudyAction.MANAGE: frozenset({Role.OWNER}),
}


def _signed_in(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active)


def study_role(*, user: Any, study: Study) -> str | None:
    """The user's role in the study, or None (superusers have no role: they need none)."""
    if not _signed_in(user) or study.pk is None:
        return None
    return StudyMembership.objects.filter(study_id=study.pk, user_id=user.pk).values_list("role", flat=True).first()


def study_allows(*, user: Any, study: Study, action: StudyAction) -> bool:
    if not _signed_in(user):
        return False
    if user.is_superuser:
        return True
    return study_role(user=user, study=study) in ROLES_ALLOWED[action]


def studies_for(*, user: Any, action: StudyAction, queryset: QuerySet[Study] | None = None) -> QuerySet[Study]:
    """The studies (of `queryset`, default all) on which the user may take the action."""
    studies = Study.objects.all() if queryset is None else queryset
    if not _signed_in(user):
        return studies.none()
    if user.is_superuser:
        return studies
    return studies.filter(
        pk__in=StudyMembership.objects.filter(user_id=user.pk, role__in=ROLES_ALLOWED[action]).values("study_id")
    )


def scoped_to_studies(queryset: QuerySet[Any], *, user: Any, action: StudyAction, path: str = "study") -> QuerySet[Any]:
    """The rows of `queryset` (a study's children) whose study, reached by the lookup `path`, allows the action."""
    if not _signed_in(user):
        return queryset.none()
    if user.is_superuser:
        return queryset
    return queryset.filter(**{f"{path}__in": studies_for(user=user, action=action)})
