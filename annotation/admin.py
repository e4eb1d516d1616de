"""Django admin for the annotators' work: participations, questions, generations, matches and brackets. A study's
design (the study, its systems, members, invitations, prompt templates) is studies/admin.py's.

Superusers see everything. Anyone else needs the Django model permission for a page and, for each row,
a membership of its study whose role allows the action (studies.selectors.membership, the same
rules the admin API and the research pages follow; docs/permissions.md has the table)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from annotation.models import (
    Bracket,
    Candidate,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    Query,
    RetrievedDocument,
)
from annotation.services.generation import candidates_retry_failed
from annotation.services.participation import participation_resume_refusal
from annotation.services.quality import participation_exclude, participation_include
from annotation.services.query import query_retry_failed
from kernel.exceptions import ApplicationError
from studies.admin import STUDY_FILTER, RecordAdmin, StudyScopedAdmin
from studies.links import resume_link
from studies.models_audit import AuditOrigin


def format_latency(seconds: float | None) -> str:
    """A generation's latency as people read it: "12 ms", "3.4 s", "2 min 5 s"."""
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:  # type: ignore[override]
        # Shown, never edited: declaring them read-only also lets non-editable ones (created_at) be listed.
        return [str(name) for name in self.fields or []]


class PersonaInline(ReadOnlyInline):
    model = PersonaProfile
    fields = ["version", "role", "domain", "expertise", "research_area", "use_case", "created_at"]


class QueryInline(ReadOnlyInline):
    model = Query
    fields = ["index", "text", "status", "created_at"]


class ExclusionActionForm(ActionForm):
    """The changelist's action bar with the reason a manual exclusion needs."""

    reason = forms.CharField(required=False, max_length=1000, label="Reason (to exclude)")


@admin.register(Participation)
class ParticipationAdmin(StudyScopedAdmin):
    list_display = [
        "code",
        "study",
        "source",
        "consented_at",
        "queries_ranked",
        "queries_asked",
        "completed_at",
        "stopped_at",
        "screened_out_at",
        "excluded_at",
        "exclusion_reason",
    ]
    list_filter = [
        ("study", STUDY_FILTER),
        "source",
        ("completed_at", admin.EmptyFieldListFilter),
        "screen_out_reason",
        ("excluded_at", admin.EmptyFieldListFilter),
    ]
    search_fields = ["code", "completion_code", "external_id"]
    readonly_fields = [
        "study",
        "annotator",
        "invitation",
        "code",
        "source",
        "external_id",
        "external_study_id",
        "external_session_id",
        "consented_at",
        "screening_answer",
        "screened_out_at",
        "screen_out_reason",
        "completed_at",
        "completion_code",
        "stopped_at",
        "excluded_at",
        "exclusion_reason",
        "excluded_by",
        "resume",
    ]
    exclude = ["resume_token"]

    @admin.display(description="Resume link")
    def resume(self, obj: Participation) -> str:
        """The participant's personal resume link, for a researcher to send to someone who lost it."""
        if obj.source == Participation.Source.PREVIEW or not obj.resume_token:
            return "–"
        if participation_resume_refusal(participation=obj) is not None:
            return "No longer works: the participation has ended or the study is closed."
        return format_html(
            '<input type="text" readonly value="{}" size="70" data-select-on-click aria-label="resume link">',
            resume_link(obj.resume_token),
        )

    inlines = [PersonaInline, QueryInline]
    action_form = ExclusionActionForm
    actions = ["exclude_participations", "include_participations"]

    def _each(self, request: HttpRequest, queryset: QuerySet[Participation], write: Any, done: str) -> None:
        """Apply one service per participation; each refusal (role too low, no reason) is reported, not raised."""
        changed, refused = 0, []
        for participation in queryset.select_related("study"):
            try:
                write(participation)
                changed += 1
            except ApplicationError as error:
                refused.append(f"{participation.code}: {error.message}")
        if changed:
            self.message_user(request, f"{changed} participation(s) {done}.", messages.SUCCESS)
        for line in refused:
            self.message_user(request, line, messages.ERROR)

    @admin.action(description="Exclude from the analysis (with the reason above)", permissions=["view"])
    def exclude_participations(self, request: HttpRequest, queryset: QuerySet[Participation]) -> None:
        reason = request.POST.get("reason", "")
        self._each(
            request,
            queryset,
            lambda p: participation_exclude(participation=p, reason=reason, by=request.user, origin=AuditOrigin.ADMIN),
            "excluded",
        )

    @admin.action(description="Undo the exclusion", permissions=["view"])
    def include_participations(self, request: HttpRequest, queryset: QuerySet[Participation]) -> None:
        self._each(
            request,
            queryset,
            lambda p: participation_include(participation=p, by=request.user, origin=AuditOrigin.ADMIN),
            "included",
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Participation]:
        return (
            super()
            .get_queryset(request)
            .select_related("study")
            .annotate(
                n_ranked=Count("queries", filter=Q(queries__status=Query.Status.RANKED), distinct=True),
                n_asked=Count("queries", distinct=True),
            )
        )

    @admin.display(description="Ranked", ordering="n_ranked")
    def queries_ranked(self, obj: Participation) -> str:
        return f"{obj.n_ranked} / {obj.study.queries_per_annotator}"  # type: ignore[attr-defined]

    @admin.display(description="Asked", ordering="n_asked")
    def queries_asked(self, obj: Participation) -> int:
        return obj.n_asked  # type: ignore[attr-defined]


class DocumentInline(ReadOnlyInline):
    model = RetrievedDocument
    fields = ["rank", "external_id", "title", "year"]
    show_change_link = False


class CandidateInline(ReadOnlyInline):
    model = Candidate
    fields = ["system", "position", "status", "attempts", "failure_reason", "latency"]
    show_change_link = True

    @admin.display(description="Latency")
    def latency(self, obj: Candidate) -> str:
        return format_latency(obj.latency_s)


@admin.register(Query)
class QueryAdmin(RecordAdmin):
    study_path = "participation__study"
    list_display = ["__str__", "status", "created_at"]
    list_filter = ["status", ("participation__study", STUDY_FILTER)]
    search_fields = ["text", "participation__code"]
    readonly_fields = [
        "participation",
        "index",
        "text",
        "persona",
        "status",
        "failure_reason",
        "retrieval_backend",
        "created_at",
    ]
    exclude = ["client_token", "shown_at"]
    inlines = [DocumentInline, CandidateInline]
    actions = ["retry_failed"]

    @admin.action(description="Retry failed retrieval and generations of selected queries", permissions=["change"])
    def retry_failed(self, request: HttpRequest, queryset: QuerySet[Query]) -> None:
        retried = 0
        for query in self.managed(request, queryset):
            if query.status == Query.Status.FAILED or query.candidates.filter(status=Candidate.Status.FAILED).exists():
                query_retry_failed(query=query, by=request.user, origin=AuditOrigin.ADMIN)
                retried += 1
        if retried:
            self.message_user(request, f"Failed work of {retried} question(s) was queued again.", messages.SUCCESS)
        else:
            self.message_user(request, "Nothing to retry: no selected question had failed work.", messages.WARNING)


@admin.register(Candidate)
class CandidateAdmin(RecordAdmin):
    study_path = "query__participation__study"

    class Media:
        css = {"all": ["css/admin-study.css"]}  # the status and the failure reason fit a 1,280 px window

    list_display = [
        "pk",
        "query",
        "system",
        "model_name",
        "condition",
        "status",
        "attempts",
        "short_reason",
        "latency",
    ]
    list_filter = ["status", ("system__study", STUDY_FILTER), "model_name", "condition"]
    search_fields = ["failure_reason", "query__text"]
    readonly_fields = [*(f.name for f in Candidate._meta.fields if f.name != "latency_s"), "latency"]
    exclude = ["latency_s"]  # shown rounded, as `latency`
    actions = ["retry"]

    @admin.display(description="Latency", ordering="latency_s")
    def latency(self, obj: Candidate) -> str:
        return format_latency(obj.latency_s)

    @admin.display(description="Failure reason")
    def short_reason(self, obj: Candidate) -> str:
        return obj.failure_reason[:120]

    @admin.action(description="Retry selected failed generations", permissions=["change"])
    def retry(self, request: HttpRequest, queryset: QuerySet[Candidate]) -> None:
        count = candidates_retry_failed(
            queryset=self.managed(request, queryset).filter(status=Candidate.Status.FAILED),
            by=request.user,
            origin=AuditOrigin.ADMIN,
        )
        self.message_user(request, f"{count} generation(s) queued again.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class JudgmentInline(ReadOnlyInline):
    model = Judgment
    fields = ["choice", "winner", "shown_at", "answered_at", "seconds_on_page"]
    show_change_link = False


@admin.register(Match)
class MatchAdmin(RecordAdmin):
    study_path = "bracket__query__participation__study"
    list_display = ["pk", "bracket", "label", "status", "shown_at"]
    list_filter = ["status", "label", ("bracket__query__participation__study", STUDY_FILTER)]
    readonly_fields = ["bracket", "round", "index", "label", "left", "right", "status", "shown_at", "created_at"]
    inlines = [JudgmentInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Bracket)
class BracketAdmin(RecordAdmin):
    study_path = "query__participation__study"
    list_display = ["pk", "query", "seed", "created_at"]
    readonly_fields = ["query", "seed", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
