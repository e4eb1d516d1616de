"""Studies of pre-written outputs: the items a lab brings (a source text or documents, an optional prompt) with
one output per study system, and which item each annotator's question showed. New tables only: a study has
pre-written outputs iff it has items (annotation.selectors.prewritten.study_has_prewritten)."""

from __future__ import annotations

from django.db import models


class PrewrittenItem(models.Model):
    """One item of a pre-written study: what the annotator reads before the pairs (its prompt or title and its
    sources), imported by `manage.py import_outputs` under the lab's own key."""

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="prewritten_items")
    key = models.CharField(max_length=200, help_text="The item's id in the imported file.")
    prompt = models.TextField(
        blank=True, default="", help_text="Shown to the annotator as the question (empty: the first source's title)."
    )
    # [{"title": ..., "text": ..., "url": ...}, ...]: frozen as the question's sources when an annotator gets it.
    sources = models.JSONField(default=list)
    order = models.PositiveIntegerField(default=0, help_text="The item's place in the imported file.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "order", "id"]
        constraints = [models.UniqueConstraint(fields=["study", "key"], name="unique_prewritten_item_key")]

    def __str__(self) -> str:
        return f"item {self.key} of study {self.study_id}"


class PrewrittenOutput(models.Model):
    """The text one study system wrote for an item (the candidate it becomes is a snapshot of it)."""

    item = models.ForeignKey(PrewrittenItem, on_delete=models.CASCADE, related_name="outputs")
    # A system removed from the design (possible until a question exists) takes its outputs with it; once an item
    # has been shown, its candidates keep the design frozen.
    system = models.ForeignKey("studies.StudySystem", on_delete=models.CASCADE, related_name="prewritten_outputs")
    text = models.TextField()

    class Meta:
        ordering = ["item", "system__order"]
        constraints = [models.UniqueConstraint(fields=["item", "system"], name="unique_prewritten_output")]

    def __str__(self) -> str:
        return f"output of system {self.system_id} for {self.item}"


class PrewrittenAssignment(models.Model):
    """The item an annotator's question showed: one question, one item (the balance counts these)."""

    query = models.OneToOneField("annotation.Query", on_delete=models.CASCADE, related_name="prewritten")
    item = models.ForeignKey(PrewrittenItem, on_delete=models.PROTECT, related_name="assignments")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.item} shown as question {self.query_id}"
