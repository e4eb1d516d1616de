from django.contrib import admin

from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from studies.admin import STUDY_FILTER, RecordAdmin


@admin.register(ScoringRun)
class ScoringRunAdmin(RecordAdmin):
    """Scoring runs and scores of the studies the user researches (docs/permissions.md)."""

    list_display = ["pk", "study", "status", "done", "total", "created_at", "finished_at"]
    list_filter = ["status", ("study", STUDY_FILTER)]
    readonly_fields = [f.name for f in ScoringRun._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(CandidateScore)
class CandidateScoreAdmin(RecordAdmin):
    study_path = "candidate__query__participation__study"
    list_display = ["candidate", "metric", "judge_model", "judge_server", "value", "version", "reason", "computed_at"]
    list_filter = ["metric", "judge_model", "judge_server"]
    search_fields = ["metric", "reason"]
    readonly_fields = [f.name for f in CandidateScore._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.register(PairwiseVote)
class PairwiseVoteAdmin(RecordAdmin):
    study_path = "match__bracket__query__participation__study"
    list_display = ["match", "judge_model", "judge_server", "prompt_version", "order", "choice", "computed_at"]
    list_filter = ["judge_model", "judge_server", "order", "choice"]
    readonly_fields = [f.name for f in PairwiseVote._meta.fields]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
