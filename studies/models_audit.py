"""The audit log: who changed what in a study, when, from where, with the values before and after.

One row per change an admin or researcher makes (an annotator's work is recorded by the protocol's own rows,
not here). Rows are written by the services in the transaction of the change they describe
(studies/services/audit.py), and never changed afterwards."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class AuditEvent(models.TextChoices):
    """The closed set of what an audited action did (docs/permissions.md, "Audit log")."""

    STUDY_CREATED = "study_created", "Study created"
    STUDY_SETTINGS_CHANGED = "study_settings_changed", "Study settings changed"
    STUDY_STATUS_CHANGED = "study_status_changed", "Study status changed"
    STUDY_OPEN_LINK_CHANGED = "study_open_link_changed", "Open link changed"
    STUDY_SYSTEMS_CHANGED = "study_systems_changed", "Systems changed"
    STUDY_DELETED = "study_deleted", "Study deleted"
    ROW_DELETED = "row_deleted", "Invitation or participation deleted"
    MEMBER_ADDED = "member_added", "Member added"
    MEMBER_ROLE_CHANGED = "member_role_changed", "Member's role changed"
    MEMBER_REMOVED = "member_removed", "Member removed"
    INVITATIONS_CREATED = "invitations_created", "Invitations created"
    INVITATION_CHANGED = "invitation_changed", "Invitation changed"
    PARTICIPATION_EXCLUDED = "participation_excluded", "Participation excluded"
    PARTICIPATION_INCLUDED = "participation_included", "Participation's exclusion undone"
    GENERATION_RETRIED = "generation_retried", "Failed generation retried"
    RETRIEVAL_RETRIED = "retrieval_retried", "Failed retrieval retried"
    RESEARCH_JOB_STARTED = "research_job_started", "Research job started"
    RESEARCH_JOB_CANCELLED = "research_job_cancelled", "Research job cancelled"
    JOB_FILE_DOWNLOADED = "job_file_downloaded", "Job file downloaded"
    SCORING_RUN_STARTED = "scoring_run_started", "Scoring run started"
    PREVIEW_STARTED = "preview_started", "Preview as annotator started"


class AuditOrigin(models.TextChoices):
    """Where an audited action came from: the edge that called the service. A management command is its own
    origin, named as it is run (`command_origin`: "manage.py study_member")."""

    ADMIN = "admin", "Django admin"
    ADMIN_API = "admin API", "Admin API"
    RESEARCH_PAGE = "research page", "Research pages"
    RESEARCH_API = "research API", "Research API"
    ANNOTATOR_PAGE = "annotator page", "Annotator pages (a researcher's preview)"
    CODE = "code", "Python code (a script, the shell, a test)"


COMMAND_PREFIX = "manage.py "


def command_origin(name: str) -> str:
    return f"{COMMAND_PREFIX}{name}"


class StudyAuditLog(models.Model):
    """One audited change. The study and the actor are kept by name too, so a row still reads after either is
    deleted (its foreign key then becomes empty)."""

    study = models.ForeignKey(
        "studies.Study", on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_log"
    )
    study_slug = models.CharField(max_length=80)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_log"
    )
    actor_name = models.CharField(max_length=150, blank=True, help_text="Empty for a command or the system.")
    origin = models.CharField(
        max_length=100, help_text='The page, API or command it came from ("admin", "manage.py study_member").'
    )
    event_type = models.CharField(max_length=40, choices=AuditEvent.choices)
    event_time = models.DateTimeField(db_index=True)
    object_type = models.CharField(max_length=40, help_text="What was changed: study, membership, invitation, ...")
    object_id = models.CharField(max_length=40, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "annotation_studyauditlog"  # its name from before the move to studies
        ordering = ["-event_time", "-pk"]
        verbose_name = "audit log entry"
        verbose_name_plural = "audit log"
        indexes = [models.Index(fields=["study", "-event_time"], name="audit_study_time")]
        constraints = [
            models.CheckConstraint(condition=Q(event_type__in=AuditEvent.values), name="audit_event_type_known"),
            models.CheckConstraint(
                condition=Q(origin__in=AuditOrigin.values) | Q(origin__startswith=COMMAND_PREFIX),
                name="audit_origin_known",
            ),
        ]

    def __str__(self) -> str:
        who = self.actor_name or self.origin
        return f"{self.event_time:%Y-%m-%d %H:%M:%S} {who}: {self.get_event_type_display()} ({self.study_slug})"
