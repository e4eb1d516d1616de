"""Background research jobs (exports, reports, stress tests, sample-size plans) and their output files."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ResearchJob(models.Model):
    class Kind(models.TextChoices):
        EXPORT = "export", "Export comparison table"
        REPORT = "report", "Analysis report"
        STRESS = "stress", "Metric stress test"
        PLAN = "plan", "Sample-size plan"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="research_jobs")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done.")
    stage = models.CharField(max_length=200, blank=True)
    files = models.JSONField(
        default=list, blank=True, help_text="Names of the output files, relative to the job folder."
    )
    manifest = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Background work: a running job belongs to its worker until the lease expires (a heartbeat renews
    # it); a redelivered or swept job restarts from scratch, up to a cap of attempts.
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"
