"""The audit log in the Django admin: read-only (no add, change or delete, for anyone), the rows of the studies
the user may analyse (superusers: all), filterable by study, event type, actor and origin, and downloadable as
CSV exactly as filtered (docs/permissions.md, "Audit log")."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import path
from django.utils import timezone

from studies.models_audit import StudyAuditLog
from studies.selectors.audit import AUDIT_ACTION, audit_csv_lines, audit_log_visible
from studies.selectors.membership import study_allows


def _short(value: Any) -> str:
    if value is None:
        return "–"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"


AUDIT_FIELDS = (
    "event_time",
    "study",
    "study_slug",
    "actor",
    "actor_name",
    "origin",
    "event_type",
    "object_type",
    "object_id",
    "object_repr",
    "before",
    "after",
)


@admin.register(StudyAuditLog)
class StudyAuditLogAdmin(admin.ModelAdmin):
    list_display = [
        "event_time",
        "study_slug",
        "actor_name",
        "origin",
        "event_type",
        "object_type",
        "object_repr",
        "before_short",
        "after_short",
    ]
    list_filter = [
        ("study", admin.RelatedOnlyFieldListFilter),  # only studies whose rows the user may read
        "event_type",
        ("actor", admin.RelatedOnlyFieldListFilter),
        "origin",
    ]
    search_fields = ["object_repr", "actor_name", "study_slug"]
    date_hierarchy = "event_time"
    actions = None
    fields = AUDIT_FIELDS
    readonly_fields = AUDIT_FIELDS  # every field shown, none edited

    @admin.display(description="Before")
    def before_short(self, obj: StudyAuditLog) -> str:
        return _short(obj.before)

    @admin.display(description="After")
    def after_short(self, obj: StudyAuditLog) -> str:
        return _short(obj.after)

    def get_queryset(self, request: HttpRequest) -> QuerySet[StudyAuditLog]:
        return audit_log_visible(user=request.user)

    def has_view_permission(self, request: HttpRequest, obj: StudyAuditLog | None = None) -> bool:
        if not super().has_view_permission(request, obj):
            return False
        if obj is None or request.user.is_superuser:
            return True
        return obj.study is not None and study_allows(user=request.user, study=obj.study, action=AUDIT_ACTION)

    # Written by the services alone, never by hand: nobody adds, changes or deletes a row here.
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: StudyAuditLog | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: StudyAuditLog | None = None) -> bool:
        return False

    def get_urls(self):  # type: ignore[no-untyped-def]
        export = path("export/", self.admin_site.admin_view(self.export_view), name="studies_studyauditlog_export")
        return [export, *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = {**(extra_context or {}), "export_query": request.GET.urlencode()}
        return super().changelist_view(request, extra)

    def export_view(self, request: HttpRequest) -> StreamingHttpResponse:
        """The list as filtered on the page (its filters, search and dates), every row of it, as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        rows = self.get_changelist_instance(request).get_queryset(request)
        response = StreamingHttpResponse(audit_csv_lines(rows.iterator(chunk_size=2000)), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="audit-log-{timezone.now():%Y%m%d-%H%M%S}.csv"'
        return response
