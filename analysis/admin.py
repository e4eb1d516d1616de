from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from analysis.models import ResearchJob
from studies.admin import STUDY_FILTER, RecordAdmin


@admin.register(ResearchJob)
class ResearchJobAdmin(RecordAdmin):
    """Jobs of the studies the user researches (docs/permissions.md)."""

    list_display = ["pk", "study", "kind", "status", "progress", "created_at", "research_page"]
    list_filter = ["kind", "status", ("study", STUDY_FILTER)]
    readonly_fields = [f.name for f in ResearchJob._meta.fields]

    @admin.display(description="Results")
    def research_page(self, obj: ResearchJob) -> str:
        return format_html('<a href="{}">research page</a>', reverse("analysis:study", args=[obj.study.slug]))

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False
