"""Make a user a member of a study with a role, and a researcher (docs/permissions.md)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import Q

from analysis.permissions import RESEARCHERS_GROUP
from kernel.exceptions import ApplicationError
from studies.models import Study, StudyMembership
from studies.models_audit import command_origin
from studies.services.membership import membership_set

# What docs/permissions.md suggests the group carries: reading the admin API's studies, invitations,
# progress and failed generations (each still limited to the member's studies and role).
# Named as has_perm names them, app label first: the study's design is the studies app's, the annotators' work
# annotation's.
GROUP_VIEW_PERMISSIONS = (
    "studies.view_study",
    "studies.view_invitation",
    "annotation.view_participation",
    "annotation.view_candidate",
    "studies.view_studyauditlog",
)


def permissions_named(names: tuple[str, ...]) -> list[Permission]:
    """The permissions with these "app_label.codename" names."""
    wanted = Q()
    for name in names:
        app_label, codename = name.split(".")
        wanted |= Q(content_type__app_label=app_label, codename=codename)
    return list(Permission.objects.filter(wanted))


class Command(BaseCommand):
    help = (
        "Give USER the ROLE (owner, researcher, viewer) in the study and put them in the researchers group "
        "(created with its view permissions if missing), so they can sign in at /accounts/login/."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--user", required=True, help="username")
        parser.add_argument("--role", required=True, choices=StudyMembership.Role.values)

    @transaction.atomic
    def handle(self, *args: Any, study: str, user: str, role: str, **options: Any) -> None:
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f"No study with the slug {study!r}.")
        member = get_user_model().objects.filter(username=user).first()
        if member is None:
            raise CommandError(
                f"No user named {user!r}; create one first (python manage.py createsuperuser, or the admin)."
            )
        group, _ = Group.objects.get_or_create(name=RESEARCHERS_GROUP)
        group.permissions.add(*permissions_named(GROUP_VIEW_PERMISSIONS))
        member.groups.add(group)
        try:
            membership_set(study=found, user=member, role=role, origin=command_origin("study_member"))
        except ApplicationError as error:  # the last owner stepping down: nothing changed
            raise CommandError(error.message) from error
        self.stdout.write(f"{user} is now {role} of {study} and in the {RESEARCHERS_GROUP} group.")
