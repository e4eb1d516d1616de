"""Who may use the research pages and the research API, and on which studies (docs/permissions.md).

Two questions, answered separately: may this account use the research site at all (a superuser, or a
member of the "researchers" group: never an annotator, and being staff is not enough), and which studies
(its study memberships, read through studies.selectors.membership, the rules the admin uses too).
A study the account is no member of is 404, as if it did not exist; one it may see but not act on is 403.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import PermissionDenied, SuspiciousFileOperation
from django.core.files.storage import Storage
from django.db.models import QuerySet
from django.http import Http404
from rest_framework.permissions import BasePermission

from analysis.downloads import DOWNLOAD_AGAIN
from analysis.models import ResearchJob
from analysis.services import job_file_key, research_storage
from kernel.storage import storage_reasons
from scoring.models import ScoringRun
from studies.models import Study
from studies.selectors.membership import StudyAction, scoped_to_studies, studies_for, study_allows

RESEARCHERS_GROUP = "researchers"

REFUSED = {
    StudyAction.SEE: "You may not see this study.",
    StudyAction.ANALYSE: "Your role in this study lets you see its results, not run jobs or download files.",
    StudyAction.MANAGE: "Only the study's owners may do this.",
}


def is_researcher(user: Any) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser or user.groups.filter(name=RESEARCHERS_GROUP).exists())


class IsResearcher(BasePermission):
    message = "Only researchers can see study results: ask an administrator to add you to the researchers group."

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_researcher(request.user)


def research_studies(*, user: Any) -> QuerySet[Study]:
    """The studies listed on the research site for this account."""
    return studies_for(user=user, action=StudyAction.SEE)


def _allowed_or_refused(user: Any, study: Study, action: StudyAction) -> None:
    if not study_allows(user=user, study=study, action=StudyAction.SEE):
        raise Http404("No such study.")
    if not study_allows(user=user, study=study, action=action):
        raise PermissionDenied(REFUSED[action])


def research_study(*, user: Any, slug: str, action: StudyAction = StudyAction.SEE) -> Study:
    """The study by slug if the account may take the action on it: 404 if it is no member, 403 if its role
    is too low."""
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise Http404("No such study.")
    _allowed_or_refused(user, study, action)
    return study


def research_job(*, user: Any, job_id: int, action: StudyAction = StudyAction.SEE) -> ResearchJob:
    job = ResearchJob.objects.select_related("study").filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    _allowed_or_refused(user, job.study, action)
    return job


def research_scoring_run(*, user: Any, run_id: int) -> ScoringRun:
    run = scoped_to_studies(ScoringRun.objects.all(), user=user, action=StudyAction.SEE).filter(pk=run_id).first()
    if run is None:
        raise Http404("No such scoring run.")
    return run


def research_job_file(*, user: Any, job_id: int, name: str) -> tuple[Storage, str]:
    """The research storage and key of an output file of a finished job, for an account that may download it;
    404 naming what is missing (the job, the file among its outputs, or the stored object), never a key
    outside the job's folder."""
    job = research_job(user=user, job_id=job_id, action=StudyAction.ANALYSE)
    if job.status != ResearchJob.Status.DONE:
        raise Http404(f"Job {job.pk} is {job.status}; its files exist once it is done.")
    if name not in job.files:
        raise Http404(f"Job {job.pk} has no output file {name!r}; its files are {', '.join(job.files) or 'none'}.")
    gone = Http404(
        f"The file {name!r} of job {job.pk} is no longer on the server (not in the research storage); run the job again."
    )
    if PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts or "\\" in name:
        raise gone
    storage, key = research_storage(), job_file_key(job.pk, name)
    try:
        with storage_reasons(storage, then=DOWNLOAD_AGAIN):  # a store that fails: a 503 with its reason, never a 500
            found = storage.exists(key)
    except SuspiciousFileOperation:
        found = False
    if not found:
        raise gone
    return storage, key
