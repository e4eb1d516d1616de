"""Automatic metric scores of a study's candidates, one row per candidate, metric and metric version."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ScoringRun(models.Model):
    """Scoring a study's candidates in the background, chunk by chunk, with visible progress."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="scoring_runs")
    metrics = models.JSONField()
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Background work: the chunks (candidate id lists) and the ones already counted, so that a chunk
    # delivered twice counts once and a sweeper can send again the chunks a dead worker lost.
    chunks = models.JSONField(default=list, blank=True)
    chunks_done = models.JSONField(default=list, blank=True, help_text="Indexes into chunks.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    restarts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"scoring run {self.pk} of {self.study_id} ({self.status})"

    @property
    def percent(self) -> int:
        return (
            min(100, int(100 * self.done / self.total))
            if self.total
            else (100 if self.status == self.Status.DONE else 0)
        )


class CandidateScore(models.Model):
    """One candidate's value of one metric at one version; for a judge's metric, of one judge too.

    A judge's identity (its model, its server's name or host, the prompt version) is part of the key and
    of ``version``, so two judges' scores of one study are both kept. Rows of non-judge metrics (and of
    judges scored before judges were recorded) have empty judge fields.
    """

    candidate = models.ForeignKey("annotation.Candidate", on_delete=models.CASCADE, related_name="scores")
    metric = models.CharField(max_length=80)
    version = models.CharField(max_length=255)
    judge_model = models.CharField(max_length=200, blank=True, default="")
    judge_server = models.CharField(
        max_length=200, blank=True, default="", help_text="The server's configured name or host:port; never a key."
    )
    prompt_version = models.CharField(max_length=120, blank=True, default="")
    value = models.FloatField(null=True, blank=True)
    reason = models.TextField(blank=True, help_text="Why the metric could not be computed, when value is empty.")
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["candidate", "metric"]
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "metric", "judge_model", "judge_server", "prompt_version", "version"],
                name="unique_score_per_metric_judge_version",
            )
        ]
        indexes = [models.Index(fields=["metric", "version"])]

    def __str__(self) -> str:
        return f"{self.metric}={self.value} for candidate {self.candidate_id}"


class PairwiseVote(models.Model):
    """The annotator-style pairwise judge's answer on one answered match, in one order.

    ``order`` "first" asks with the match's left side as summary A (as the annotator saw it), "swapped"
    with A and B exchanged; ``choice`` is always relative to the match (left, right, neither), empty when
    the judge gave no usable answer (``reason`` says why).
    """

    class Order(models.TextChoices):
        FIRST = "first", "As shown (left = A)"
        SWAPPED = "swapped", "Swapped (left = B)"

    class Choice(models.TextChoices):
        LEFT = "left", "Left"
        RIGHT = "right", "Right"
        NEITHER = "neither", "Neither"

    match = models.ForeignKey("annotation.Match", on_delete=models.CASCADE, related_name="judge_votes")
    judge_model = models.CharField(max_length=200)
    judge_server = models.CharField(max_length=200)
    prompt_version = models.CharField(max_length=120)
    order = models.CharField(max_length=8, choices=Order.choices)
    choice = models.CharField(max_length=8, choices=Choice.choices, blank=True)
    reply = models.TextField(blank=True)
    reason = models.TextField(blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["match", "judge_model", "judge_server", "order"]
        constraints = [
            models.UniqueConstraint(
                fields=["match", "judge_model", "judge_server", "prompt_version", "order"],
                name="unique_pairwise_vote_per_judge_order",
            )
        ]

    def __str__(self) -> str:
        return f"{self.judge_model}@{self.judge_server} {self.order}: {self.choice or 'no answer'} on {self.match_id}"
