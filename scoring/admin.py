from django.contrib import admin

from annotation.admin import STUDY_FILTER, StudyScopedAdmin
from scoring.models import CandidateScore, ScoringRun


@admin.register(ScoringRun)
class ScoringRunAdmin(StudyScopedAdmin):
    """Scoring runs and scores of the studies the user researches (docs/permissions.md)."""

    list_display = ["pk", "study", "status", "done", "total", "created_at", "finished_at"]
    list_filter = ["status", ("study", STUDY_FILTER)]
    readonly_fields = [f.name for f in ScoringRun._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(CandidateScore)
class CandidateScoreAdmin(StudyScopedAdmin):
    study_path = "candidate__query__participation__study"
    list_display = ["candidate", "metric", "value", "version", "reason", "computed_at"]
    list_filter = ["metric"]
    search_fields = ["metric", "reason"]
    readonly_fields = [f.name for f in CandidateScore._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
