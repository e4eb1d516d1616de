"""The admin API's bodies for study design: a study with its systems, its status, invitations, members, the open
link and the audit log's rows."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from kernel.storable import DB_INT_MAX
from studies.links import invitation_link
from studies.models import Invitation, Study, StudyMembership, StudySystem, study_languages
from studies.models_audit import AuditEvent
from studies.services.study import LIMITS, STUDY_FIELDS, limit_message


class StudySystemSerializer(serializers.ModelSerializer):
    # Writable so that an update names the systems it keeps; one without an id (or a known label) is new.
    id = serializers.IntegerField(required=False)

    class Meta:
        model = StudySystem
        fields = ["id", "label", "model_name", "generation_backend", "backend_settings", "condition", "order"]
        # The service checks labels and design cells across the whole list.
        validators: list[object] = []


class StudySerializer(serializers.ModelSerializer):
    systems = StudySystemSerializer(many=True, required=False)

    class Meta:
        model = Study
        # The settings study_create/study_update accept (studies.services.study), in the same order.
        fields = ["id", *STUDY_FIELDS[:4], "status", *STUDY_FIELDS[4:], "systems", "created_at"]
        read_only_fields = ["status", "created_at"]
        # Uniqueness is study_validate's to check (one message and status for the form and the API).
        # The limits are the service's, stated here too so that the schema (and its fuzzer) knows them.
        extra_kwargs: dict[str, dict[str, object]] = {
            "slug": {"validators": []},
            **{
                name: {
                    "min_value": low,
                    "max_value": high,
                    "error_messages": {"min_value": limit_message(name), "max_value": limit_message(name)},
                }
                for name, (low, high) in LIMITS.items()
            },
        }

    def get_extra_kwargs(self) -> dict[str, Any]:
        # The service's wording for an unknown language (study_validate), which DRF's choice check would otherwise
        # answer first; built per serializer because the choices are settings.LANGUAGES, read when asked.
        kwargs: dict[str, Any] = super().get_extra_kwargs()
        codes = ", ".join(code for code, _name in study_languages())
        message = f"Unknown language {{input!r}}; choose one of {codes}."
        kwargs.setdefault("language", {}).setdefault("error_messages", {})["invalid_choice"] = message
        return kwargs


class OpenLinkSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()
    link = serializers.CharField(help_text="The open link; empty until the link was first enabled.")
    prolific_link = serializers.CharField(help_text="The link with Prolific's URL parameters, to paste in Prolific.")
    participant_cap = serializers.IntegerField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    participants = serializers.IntegerField(help_text="Participations counted toward the cap.")


class AuditEntrySerializer(serializers.Serializer):
    """One row of a study's audit log (docs/permissions.md, "Audit log")."""

    id = serializers.IntegerField()
    event_time = serializers.DateTimeField()
    study = serializers.CharField(help_text="The study's slug when the change was made.")
    actor = serializers.CharField(allow_null=True, help_text="The acting user's username; null for a command.")
    origin = serializers.CharField(help_text='The page, API or command it came from ("manage.py study_member").')
    event_type = serializers.ChoiceField(choices=AuditEvent.choices)
    object_type = serializers.CharField()
    object_id = serializers.CharField()
    object = serializers.CharField()
    before = serializers.JSONField(allow_null=True, help_text="The changed values before (null: created).")
    after = serializers.JSONField(allow_null=True, help_text="The changed values after (null: removed).")


class StudyStatusSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Study.Status.choices)


class InvitationSerializer(serializers.ModelSerializer):
    link = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = ["id", "token", "link", "max_uses", "uses", "expires_at", "note", "created_at"]

    def get_link(self, obj: Invitation) -> str:
        return invitation_link(obj)


class InvitationBulkSerializer(serializers.Serializer):
    count = serializers.IntegerField(min_value=1, max_value=1000)
    max_uses = serializers.IntegerField(min_value=1, max_value=DB_INT_MAX, default=1)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    note = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class MembershipSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=StudyMembership.Role.choices)
