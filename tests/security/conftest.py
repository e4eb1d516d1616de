"""A world with one account of every kind around one study (docs/permissions.md, "Accounts")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission

from analysis.management.commands.study_member import permissions_named
from analysis.models import ResearchJob
from analysis.services import job_dir
from annotation.models import Candidate, Match, Participation, Query
from annotation.selectors.tournament import match_current
from annotation.services.query import query_submit
from annotation.services.tournament import judgment_record
from scoring.models import ScoringRun
from studies.models import Invitation, Study, StudyMembership
from studies.services.invitation import invitation_create_bulk
from tests.annotation.factories import StudyFactory, join

ROLES = (
    "anonymous",
    "annotator",
    "other_annotator",
    "plain_user",
    "staff_no_perms",
    "researcher_member",
    "researcher_non_member",
    "viewer_member",
    "owner_member",
    "admin",
)
# What docs/permissions.md suggests the researchers group carries, and an owner adds.
# docs/permissions.md's suggested group: the study's design is the studies app's, the annotators' work annotation's.
GROUP_PERMISSIONS = (
    "studies.view_study",
    "studies.view_invitation",
    "annotation.view_participation",
    "annotation.view_candidate",
    "studies.view_studyauditlog",
)
OWNER_PERMISSIONS = (
    "studies.add_study",
    "studies.change_study",
    "studies.add_invitation",
    "annotation.change_candidate",
)
EXPORT_CSV = b"match_id,choice\n1,left\n"


@dataclass
class World:
    study: Study
    other_study: Study
    users: dict[str, Any]
    participation: Participation
    query: Query
    match: Match
    failed: Candidate
    invitation: Invitation
    export: ResearchJob
    report: ResearchJob
    run: ScoringRun

    def values(self) -> dict[str, Any]:
        return {
            "slug": self.study.slug,
            "study_pk": self.study.pk,
            "other_study_pk": self.other_study.pk,
            "participation": self.participation.pk,
            "code": self.participation.code,
            "query": self.query.pk,
            "match": self.match.pk,
            "candidate": self.failed.pk,
            "token": self.invitation.token,
            "resume_token": self.participation.resume_token,
            "open_token": "no-such-open-link",
            "job": self.export.pk,
            "file": "comparisons.csv",
            "run": self.run.pk,
        }


def _perms(*codenames: str) -> list[Permission]:
    found = permissions_named(codenames)
    assert len(found) == len(codenames)
    return found


def _done_job(study: Study, kind: str, name: str, content: bytes) -> ResearchJob:
    job = ResearchJob.objects.create(study=study, kind=kind, status=ResearchJob.Status.DONE, files=[name])
    folder = job_dir(job)
    folder.mkdir(parents=True, exist_ok=True)
    Path(folder / name).write_bytes(content)
    return job


@pytest.fixture
def world(django_capture_on_commit_callbacks, settings, tmp_path) -> World:
    settings.MEDIA_ROOT = str(tmp_path / "media")
    study = StudyFactory(slug="matrix", title="Matrix study")
    other_study = StudyFactory(slug="elsewhere", title="Another team's study")

    # The annotator: persona given, one question ranked (every match answered "left"), not finished.
    participation = join(study)
    with django_capture_on_commit_callbacks(execute=True):
        query = query_submit(participation=participation, text="night shifts and sleep", client_token="")
    while (current := match_current(query=query)) is not None:
        judgment_record(match=current, choice="left", by=participation)
    match = Match.objects.filter(bracket__query=query).order_by("pk").first()
    # Someone else's question in the study whose one generation failed.
    bystander = join(study)
    waiting = query_submit(participation=bystander, text="vaccines in older adults", client_token="")
    failed = Candidate.objects.create(
        query=waiting, system=study.systems.first(), status=Candidate.Status.FAILED, failure_reason="server down"
    )

    model = get_user_model()
    group = Group.objects.create(name="researchers")
    group.permissions.set(_perms(*GROUP_PERMISSIONS))

    def researcher(name: str, *, role: str | None, on: Study = study, **extra: Any) -> Any:
        user = model.objects.create_user(name, password="pw", **extra)
        user.groups.add(group)
        if role:
            StudyMembership.objects.create(study=on, user=user, role=role)
        return user

    owner = researcher("owner", role="owner", is_staff=True)
    owner.user_permissions.set(_perms(*OWNER_PERMISSIONS))
    users = {
        "anonymous": None,
        "annotator": participation.annotator,
        "other_annotator": join(other_study).annotator,
        "plain_user": model.objects.create_user("plain", password="pw"),
        "staff_no_perms": model.objects.create_user("staff", password="pw", is_staff=True),
        "researcher_member": researcher("rmember", role="researcher"),
        # A researcher too, and an owner elsewhere: only not a member of this study.
        "researcher_non_member": researcher("rnonmember", role="owner", on=other_study),
        "viewer_member": researcher("viewer", role="viewer"),
        "owner_member": owner,
        "admin": model.objects.create_superuser("root", "root@example.org", "pw"),
    }
    return World(
        study=study,
        other_study=other_study,
        users=users,
        participation=participation,
        query=query,
        match=match,
        failed=failed,
        invitation=invitation_create_bulk(study=study, count=1)[0],
        export=_done_job(study, "export", "comparisons.csv", EXPORT_CSV),
        report=_done_job(study, "report", "report.html", b"<html><body>Win rate</body></html>"),
        run=ScoringRun.objects.create(study=study, metrics=["rouge1"]),
    )
