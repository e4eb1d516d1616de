"""The move of study design from annotation to studies keeps every row and every granted permission: a database
migrated from before the move holds the same study, systems, invitation, members and audit rows afterwards, read
through the studies app, and a group given `annotation.change_study` then holds `studies.change_study`."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command

from annotation.models import Participation
from studies.models import Invitation, PromptTemplate, Study, StudyAuditLog, StudyMembership
from tests.support.migrations import latest, migrate_to, migrated_back

# Before the move: annotation's last migration holding the models, and the studies app not yet applied.
BEFORE = [
    ("annotation", "0019_audit_log"),
    ("scoring", "0003_judge_identity"),
    ("analysis", "0002_background_leases"),
    ("studies", None),
    # Django's own, as they are now (their models are used below).
    ("contenttypes", "0002_remove_content_type_name"),
    ("auth", "0012_alter_user_first_name_max_length"),
]


@pytest.mark.django_db(transaction=True)
def test_rows_and_granted_permissions_survive_the_move():
    with migrated_back(BEFORE) as old:
        assert old.get_model("annotation", "Study")._meta.db_table == "annotation_study"
        user_model = old.get_model("auth", "User")
        owner = user_model.objects.create(username="owner")
        annotator = user_model.objects.create(username="annotator")
        template = old.get_model("annotation", "PromptTemplate").objects.create(
            name="moved", version=3, body="{query} {documents} {persona_block}", persona_block="{role}"
        )
        study = old.get_model("annotation", "Study").objects.create(
            slug="kept", title="Kept across the move", prompt_template=template, queries_per_annotator=4
        )
        system = old.get_model("annotation", "StudySystem")
        system.objects.create(study=study, label="p", model_name="m", condition="persona", order=0)
        system.objects.create(study=study, label="g", model_name="m", condition="generic", order=1)
        invitation = old.get_model("annotation", "Invitation").objects.create(
            study=study, token="tok-kept", max_uses=5, uses=1, note="for the lab"
        )
        old.get_model("annotation", "StudyMembership").objects.create(study=study, user=owner, role="owner")
        old.get_model("annotation", "StudyAuditLog").objects.create(
            study=study,
            study_slug="kept",
            actor=owner,
            actor_name="owner",
            origin="admin",
            event_type="study_created",
            event_time="2026-01-02T03:04:05Z",
            object_type="study",
        )
        old.get_model("annotation", "Participation").objects.create(
            study=study, annotator=annotator, invitation=invitation, code="KEPT0001"
        )
        # A deployment's least-privilege group, granted the study permissions under annotation's label.
        content_type = old.get_model("contenttypes", "ContentType")
        permission = old.get_model("auth", "Permission")
        study_type, _ = content_type.objects.get_or_create(app_label="annotation", model="study")
        change_study, _ = permission.objects.get_or_create(
            content_type=study_type, codename="change_study", defaults={"name": "Can change study"}
        )
        group = old.get_model("auth", "Group").objects.create(name="researchers")
        group.permissions.add(change_study)
        owner.groups.add(group)

        migrate_to(latest())

        moved = Study.objects.get(slug="kept")
        assert moved.title == "Kept across the move" and moved.queries_per_annotator == 4
        assert list(moved.systems.values_list("label", "condition")) == [("p", "persona"), ("g", "generic")]
        assert moved.prompt_template == PromptTemplate.objects.get(name="moved", version=3)
        assert Invitation.objects.get(token="tok-kept").study == moved
        assert StudyMembership.objects.get(study=moved).user.username == "owner"
        assert StudyAuditLog.objects.get(study=moved).event_type == "study_created"
        participation = Participation.objects.get(code="KEPT0001")
        assert participation.study == moved and participation.invitation.token == "tok-kept"

        member = get_user_model().objects.get(username="owner")
        assert member.has_perm("studies.change_study")
        assert not member.has_perm("annotation.change_study")
        assert not ContentType.objects.filter(app_label="annotation", model="study").exists()


@pytest.mark.django_db
def test_models_and_migrations_agree():
    """No model change is left without its migration (the move's state operations describe the models)."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
