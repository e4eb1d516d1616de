"""Django admin for study design: studies with their systems and members, invitations, prompt templates, and
the audit log (studies/admin_audit.py); and the bases every study-scoped admin page uses (annotation's, scoring's,
analysis's).

Superusers see everything. Anyone else needs the Django model permission for a page and, for each row,
a membership of its study whose role allows the action (studies.selectors.membership, the same
rules the admin API and the research pages follow; docs/permissions.md has the table)."""

from __future__ import annotations

import logging
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.html import format_html

from generation.registry import operational_setting_keys
from kernel.exceptions import ApplicationError

# The audit log's admin lives in its own module; imported here so that the admin's autodiscovery registers it.
from studies.admin_audit import StudyAuditLogAdmin as StudyAuditLogAdmin
from studies.forms import (
    SYSTEM_INLINE_FIELDS,
    BulkInvitationForm,
    InvitationForm,
    PromptTemplateForm,
    StudyAdminForm,
    StudyMembershipFormSet,
    StudySystemForm,
    StudySystemFormSet,
    _system_specs,
)
from studies.links import PROLIFIC_SUFFIX, invitation_link, open_link
from studies.models import Invitation, PromptTemplate, Study, StudyMembership, StudySystem
from studies.models_audit import AuditOrigin
from studies.selectors.membership import StudyAction, scoped_to_studies, studies_for, study_allows
from studies.services.invitation import (
    INVITATION_EDITABLE,
    invitation_create_bulk,
    invitation_update,
)
from studies.services.membership import (
    membership_remove,
    membership_set,
    study_create_owned,
    study_record_delete,
    study_update_as,
)
from studies.services.study import (
    STUDY_FIELDS,
    locked_note,
    study_has_candidates,
)

logger = logging.getLogger(__name__)

# A study's participations are annotation's rows (Participation, study.participations), read here through the
# relation's name: studies sits below annotation and does not import its models. A study member's preview is not a
# participant (Participation.Source.PREVIEW; tests/studies/test_layering.py holds the two to the same value).
PREVIEW_SOURCE = "preview"

# A change to any of these changes who is screened from now on, not who was (participation_needs_screening).
SCREENING_FIELDS = {"screening_question", "screening_choices", "screening_accepted"}

STUDY_FILTER = admin.RelatedOnlyFieldListFilter  # lists only the studies whose rows the user may see


def _follow(obj: Any, path: str) -> Study | None:
    for name in filter(None, path.split("__")):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


CONFLICT = (
    "Nothing was saved: it conflicts with what is stored now, most likely a change someone else made at the same "
    "moment. The form below is as you sent it: check it against what is stored now and save again."
)


class RefusalsAsFormErrors(admin.ModelAdmin):
    """A save that the services refuse after the form was checked is shown on the form, never as a 500.

    Django checks the form, then saves inside one transaction. Someone else's change in between (another owner
    stepping down, a concurrent save taking the same unique value) makes the service raise ApplicationError,
    or the database raise IntegrityError, after the form said yes. The transaction has then rolled back
    everything this save wrote, so the page is rendered again from the same POST, checked against what is
    stored now, with the refusal as the form's error: what the person typed stays on the page to fix and send
    again."""

    def changeform_view(  # type: ignore[override]
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except (ApplicationError, ValidationError, IntegrityError) as error:
            if request.method != "POST" or hasattr(request, "_save_refused"):
                raise
            logger.warning("admin save of %s %s refused after its form was checked: %r", self.opts, object_id, error)
            request._save_refused = _refusal_message(error)  # type: ignore[attr-defined]
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refused: str | None = getattr(request, "_save_refused", None)
        if refused is None:
            return form
        refusal: str = refused

        class Refused(form):  # type: ignore[misc, valid-type]
            def clean(self) -> dict[str, Any]:
                super().clean()
                raise forms.ValidationError(refusal)

        return Refused


def _refusal_message(error: Exception) -> str:
    if isinstance(error, ApplicationError):
        return f"Nothing was saved: {error.message}"
    if isinstance(error, ValidationError):
        return "Nothing was saved: " + " ".join(error.messages)
    return CONFLICT


class StudyScopedAdmin(RefusalsAsFormErrors):
    """Rows of the studies the user is a member of with a role allowing `view_action` (changing and
    deleting need `change_action`), on top of Django's model permissions; superusers see every row."""

    study_path = "study"  # the lookup from this model to its study ("" for a study)
    view_action = StudyAction.ANALYSE
    change_action = StudyAction.MANAGE

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        if not self.study_path:
            return studies_for(user=request.user, action=self.view_action, queryset=queryset)
        return scoped_to_studies(queryset, user=request.user, action=self.view_action, path=self.study_path)

    def _allows(self, request: HttpRequest, obj: Any, action: StudyAction) -> bool:
        if obj is None:
            return True
        study = _follow(obj, self.study_path)
        return study is not None and study_allows(user=request.user, study=study, action=action)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) and self._allows(request, obj, self.view_action)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self._allows(request, obj, self.change_action)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._allows(request, obj, self.change_action)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.related_model is Study:  # a new row goes only to a study the user may change
            kwargs["queryset"] = studies_for(user=request.user, action=self.change_action)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        study_record_delete(record=obj, by=request.user, origin=AuditOrigin.ADMIN)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        # One by one, each audited: the admin's bulk delete would skip the service.
        for obj in queryset:
            self.delete_model(request, obj)

    def managed(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The selected rows an action may change: those of studies the user may change."""
        if not self.study_path:
            return studies_for(user=request.user, action=self.change_action, queryset=queryset)
        return scoped_to_studies(queryset, user=request.user, action=self.change_action, path=self.study_path)


class RecordAdmin(StudyScopedAdmin):
    """Records the platform writes (matches, generations, scores, jobs): viewed, never edited or deleted one by
    one, so their pages show no Save or Delete. List actions allowed by the change permission (retry) stay."""

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class StudyPartInline(admin.TabularInline):
    """Rows that are part of a study (its systems, its members): they follow the study's permissions, since
    the study's service saves them with it. Whoever may add the study, or change it as its owner, edits
    them; whoever may view it sees them."""

    class Media:
        css = {"all": ["css/admin-study.css"]}  # the inlines fit a 1,280 px window

    def _edits(self, request: HttpRequest, obj: Study | None) -> bool:
        if obj is None:
            return request.user.has_perm("studies.add_study")
        return request.user.has_perm("studies.change_study") and study_allows(
            user=request.user, study=obj, action=StudyAction.MANAGE
        )

    def has_view_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return request.user.has_perm("studies.view_study") or self._edits(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Study | None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)


class StudySystemInline(StudyPartInline):
    model = StudySystem
    form = StudySystemForm
    formset = StudySystemFormSet
    extra = 0
    fields = list(SYSTEM_INLINE_FIELDS)

    def _locked(self, obj: Study | None) -> bool:
        return obj is not None and study_has_candidates(study=obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Study | None = None) -> list[str]:  # type: ignore[override]
        if not self._locked(obj):
            return []
        # Frozen by its summaries, a system keeps its design; the backend settings stay editable where a
        # backend has operational keys (the formset's study_validate refuses a change to any other key).
        backends = StudySystem.objects.filter(study=obj).values_list("generation_backend", flat=True)
        if any(operational_setting_keys(name) for name in backends):
            return [name for name in SYSTEM_INLINE_FIELDS if name != "backend_settings"]
        return list(SYSTEM_INLINE_FIELDS)

    def has_add_permission(self, request: HttpRequest, obj: Study | None) -> bool:  # type: ignore[override]
        return not self._locked(obj) and self._edits(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return not self._locked(obj) and self._edits(request, obj)


class StudyMembershipInline(StudyPartInline):
    """The study's members and their roles; owners (and superusers) change them."""

    model = StudyMembership
    formset = StudyMembershipFormSet
    extra = 0
    fields = ["user", "role"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "user":  # researchers and staff, not every annotator account
            kwargs["queryset"] = (
                get_user_model()
                .objects.filter(Q(is_superuser=True) | Q(is_staff=True) | Q(groups__name="researchers"))
                .distinct()
                .order_by("username")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Study)
class StudyAdmin(StudyScopedAdmin):
    study_path = ""
    view_action = StudyAction.SEE

    class Media:
        css = {"all": ["css/admin-study.css"]}  # the list's links and the study page fit a 1,280 px window

    list_display = [
        "title",
        "slug",
        "status",
        "queries_per_annotator",
        "participants",
        "invitation_tools",
        "results",
        "preview",
    ]
    list_filter = ["status"]
    search_fields = ["title", "slug"]
    prepopulated_fields = {"slug": ["title"]}
    form = StudyAdminForm
    inlines = [StudySystemInline, StudyMembershipInline]
    actions = ["open_studies", "pause_studies", "close_studies"]

    def get_readonly_fields(self, request: HttpRequest, obj: Study | None = None) -> list[str]:  # type: ignore[override]
        frozen = ["prompt_template", "design", "adaptive_matches"]  # the design's rules, studies.services.study
        locked = frozen if obj is not None and study_has_candidates(study=obj) else []
        # The open link is shown to those who may see invitations (owners and researchers).
        shown = obj is not None and study_allows(user=request.user, study=obj, action=StudyAction.ANALYSE)
        return [*locked, "open_link"] if shown else locked

    @admin.display(description="Open study link")
    def open_link(self, obj: Study) -> str:
        """The link to give a recruiting platform, with Prolific's parameters (docs/crowd.md); owners and
        researchers only, as for invitations."""
        link = open_link(obj) if obj.pk else ""
        if not link:
            return "Enable the open link and save to get one."
        return format_html(
            '<input type="text" readonly value="{}" size="90" data-select-on-click aria-label="open study link">'
            '<p class="help">For Prolific, paste it with its URL parameters: the address ends in {}</p>',
            link + PROLIFIC_SUFFIX,
            PROLIFIC_SUFFIX,
        )

    @admin.display(description="Preview")
    def preview(self, obj: Study) -> str:
        return format_html('<a href="{}">Preview as annotator</a>', reverse("annotation:preview", args=[obj.slug]))

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):  # type: ignore[no-untyped-def]
        study = self.get_object(request, object_id)
        if request.method == "GET" and study is not None and study_has_candidates(study=study):
            self.message_user(request, locked_note(), messages.INFO)  # why the design is read-only, and what may change
        return super().change_view(request, object_id, form_url, extra_context)

    def get_formset_kwargs(self, request: HttpRequest, obj: Any, inline: Any, prefix: str) -> dict[str, Any]:
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, StudySystemInline):
            kwargs["by"] = request.user
        return kwargs

    def save_model(self, request: HttpRequest, obj: Study, form: forms.ModelForm, change: bool) -> None:
        """Nothing here: save_related writes the study and its systems in one service call."""

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list, change: bool) -> None:
        study = form.instance
        (systems,) = [f for f in formsets if f.model is StudySystem]
        fields = {name: getattr(study, name) for name in STUDY_FIELDS}
        specs = _system_specs(systems)
        if change:
            study_update_as(
                by=request.user, study=study, origin=AuditOrigin.ADMIN, systems=specs, status=study.status, **fields
            )
        else:
            created = study_create_owned(
                by=request.user, origin=AuditOrigin.ADMIN, **fields, systems=specs, status=study.status
            )
            study.pk, study._state.adding = created.pk, False
        for members in (f for f in formsets if f.model is StudyMembership):
            sets, removals = [], []
            for member in members.forms:
                if not member.has_changed() and member.instance.pk is None:
                    continue
                if members.can_delete and members._should_delete_form(member):  # type: ignore[attr-defined]
                    if member.instance.pk is not None:
                        removals.append(member.instance)
                elif member.cleaned_data.get("user") is not None:
                    sets.append((member.cleaned_data["user"], member.cleaned_data["role"]))
            # New owners first, removals last: handing the study over in one save never passes through a
            # moment without an owner, which membership_set refuses.
            for user, role in sorted(sets, key=lambda pair: pair[1] != StudyMembership.Role.OWNER):
                membership_set(study=study, user=user, role=role, by=request.user, origin=AuditOrigin.ADMIN)
            for membership in removals:
                membership_remove(membership=membership, by=request.user, origin=AuditOrigin.ADMIN)
        # Compared as stored (the form's changed_data also flags a JSON list sent back as it was).
        if change and any(form.initial.get(name) != getattr(study, name) for name in SCREENING_FIELDS):
            self._warn_screening_not_retroactive(request, study)

    def _warn_screening_not_retroactive(self, request: HttpRequest, study: Study) -> None:
        """A screening question added or changed while annotators are at work is asked only of those not yet
        past it (participation_needs_screening): say so, with how many it will not reach, on the page that
        made the change rather than only in docs/crowd.md."""
        past = (
            study.participations.exclude(source=PREVIEW_SOURCE)
            .filter(completed_at__isnull=True, stopped_at__isnull=True, screened_out_at__isnull=True)
            .filter(personas__isnull=False)
            .distinct()
            .count()
        )
        if past and study.screening_question:
            self.message_user(
                request,
                f"The screening question is asked before the persona form, so the {past} annotator(s) already past "
                "it and still at work will not be asked it, and answers already given are not reconsidered. Filter "
                "on an empty screening answer if your analysis must hold only screened annotators (docs/crowd.md).",
                messages.WARNING,
            )

    def construct_change_message(self, request: HttpRequest, form: Any, formsets: list, add: bool) -> list:  # type: ignore[override]
        # The formsets were not saved by Django (the service wrote the systems), so they have no diff to report.
        return super().construct_change_message(request, form, [], add)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Study]:
        # Previews and screened-out participations are not participants (docs/crowd.md).
        counted = Q(participations__screened_out_at__isnull=True) & ~Q(participations__source=PREVIEW_SOURCE)
        return super().get_queryset(request).annotate(n_participants=Count("participations", filter=counted))

    @admin.display(description="Participants", ordering="n_participants")
    def participants(self, obj: Study) -> int:
        return obj.n_participants  # type: ignore[attr-defined]

    @admin.display(description="Invitations")
    def invitation_tools(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">Create invitations</a> · <a href="{}?study__id__exact={}">List</a>',
            reverse("admin:studies_study_invitations", args=[obj.pk]),
            reverse("admin:studies_invitation_changelist"),
            obj.pk,
        )

    @admin.display(description="Results")
    def results(self, obj: Study) -> str:
        return format_html('<a href="{}">Statistics and exports</a>', reverse("analysis:study", args=[obj.slug]))

    def _set_status(self, request: HttpRequest, queryset: QuerySet[Study], status: str) -> None:
        for study in queryset:
            try:
                study_update_as(by=request.user, study=study, status=status, origin=AuditOrigin.ADMIN)
            except ApplicationError as error:
                self.message_user(request, f"{study}: {error.message}", messages.ERROR)
            else:
                self.message_user(request, f"{study} is now {status}.", messages.SUCCESS)

    @admin.action(description="Open selected studies", permissions=["change"])
    def open_studies(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._set_status(request, queryset, Study.Status.OPEN)

    @admin.action(description="Pause selected studies", permissions=["change"])
    def pause_studies(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._set_status(request, queryset, Study.Status.PAUSED)

    @admin.action(description="Close selected studies", permissions=["change"])
    def close_studies(self, request: HttpRequest, queryset: QuerySet[Study]) -> None:
        self._set_status(request, queryset, Study.Status.CLOSED)

    def get_urls(self):  # type: ignore[no-untyped-def]
        custom = [
            path(
                "<int:study_id>/invitations/",
                self.admin_site.admin_view(self.bulk_invitations_view),
                name="studies_study_invitations",
            )
        ]
        return custom + super().get_urls()

    def bulk_invitations_view(self, request: HttpRequest, study_id: int) -> HttpResponse:
        study = self.get_queryset(request).filter(pk=study_id).first()
        if study is None:
            return HttpResponseRedirect(reverse("admin:index"))  # as for any study the user cannot see
        if not (study_allows(user=request.user, study=study, action=StudyAction.MANAGE)) or not request.user.has_perm(
            "studies.add_invitation"
        ):
            raise PermissionDenied("Only the study's owners, with the permission to add invitations, create them.")
        form = BulkInvitationForm(request.POST or None)
        created: list[Invitation] = []
        if request.method == "POST" and form.is_valid():
            try:
                created = invitation_create_bulk(
                    study=study, by=request.user, origin=AuditOrigin.ADMIN, **form.cleaned_data
                )
            except ApplicationError as error:
                form.add_error(error.field, error.message)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Invitations for {study.title}",
            "study": study,
            "form": form,
            "links": [invitation_link(i) for i in created],
            "opts": self.model._meta,
        }
        return render(request, "admin/studies/bulk_invitations.html", context)


@admin.register(Invitation)
class InvitationAdmin(StudyScopedAdmin):
    list_display = ["study", "link", "uses", "max_uses", "expires_at", "note", "created_at"]
    list_filter = [("study", STUDY_FILTER)]
    readonly_fields = ["token", "uses", "created_at"]
    search_fields = ["note", "token"]
    form = InvitationForm

    def get_readonly_fields(self, request: HttpRequest, obj: Invitation | None = None) -> list[str]:  # type: ignore[override]
        # A link already handed out stays the study's it was made for.
        return [*self.readonly_fields, "study"] if obj is not None else list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Invitation, form: forms.ModelForm, change: bool) -> None:
        if not change:  # a new invitation gets its token where every other one does
            (created,) = invitation_create_bulk(
                study=obj.study,
                count=1,
                max_uses=obj.max_uses,
                expires_at=obj.expires_at,
                note=obj.note,
                by=request.user,
                origin=AuditOrigin.ADMIN,
            )
            obj.pk, obj.token, obj.created_at, obj._state.adding = created.pk, created.token, created.created_at, False
            return
        # Only what the page edits: the uses counted by annotators who joined meanwhile are kept.
        invitation_update(
            invitation=obj,
            by=request.user,
            origin=AuditOrigin.ADMIN,
            **{name: getattr(obj, name) for name in INVITATION_EDITABLE},
        )

    @admin.display(description="Invitation link")
    def link(self, obj: Invitation) -> str:
        url = invitation_link(obj)
        return format_html(
            '<input type="text" readonly value="{}" size="60" data-select-on-click aria-label="invitation link">',
            url,
        )


@admin.register(PromptTemplate)
class PromptTemplateAdmin(RefusalsAsFormErrors):
    form = PromptTemplateForm
    list_display = ["name", "version", "created_at"]

    def save_model(self, request: HttpRequest, obj: PromptTemplate, form: forms.ModelForm, change: bool) -> None:
        # Editing never rewrites a version that candidates may have used: it saves the next version.
        if change:
            latest = PromptTemplate.objects.filter(name=obj.name).order_by("-version").first()
            obj.pk = None
            obj.version = (latest.version if latest else 0) + 1
        super().save_model(request, obj, form, change)
        if change:  # said once saved: a save refused at the database (RefusalsAsFormErrors) says so instead
            self.message_user(request, f"Saved as version {obj.version}; point studies at it to use it.", messages.INFO)
