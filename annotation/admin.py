"""Django admin for running studies: status, invitations, progress, generation jobs, matches.

Superusers see everything. Anyone else needs the Django model permission for a page and, for each row,
a membership of its study whose role allows the action (annotation.selectors.membership, the same
rules the admin API and the research pages follow; docs/permissions.md has the table)."""

from __future__ import annotations

import json
import logging
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from django.db.models import Count, Q, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.html import format_html

# The audit log's admin lives in its own module; imported here so that the admin's autodiscovery registers it.
from annotation.admin_audit import StudyAuditLogAdmin as StudyAuditLogAdmin
from annotation.links import PROLIFIC_SUFFIX, invitation_link, open_link, resume_link
from annotation.models import (
    Bracket,
    Candidate,
    Invitation,
    Judgment,
    Match,
    Participation,
    PersonaProfile,
    PromptTemplate,
    Query,
    RetrievedDocument,
    Study,
    StudyMembership,
    StudySystem,
)
from annotation.models_audit import AuditOrigin
from annotation.prompts import check_template
from annotation.selectors.membership import StudyAction, scoped_to_studies, studies_for, study_allows
from annotation.services.generation import candidates_retry_failed
from annotation.services.membership import (
    LAST_OWNER,
    membership_remove,
    membership_set,
    study_check_privileged_settings,
    study_create_owned,
    study_record_delete,
    study_update_as,
)
from annotation.services.participation import (
    INVITATION_EDITABLE,
    invitation_check_max_uses,
    invitation_create_bulk,
    invitation_update,
    participation_resume_refusal,
)
from annotation.services.quality import participation_exclude, participation_include
from annotation.services.query import query_retry_failed
from annotation.services.study import (
    LIMITS,
    STUDY_FIELDS,
    SYSTEM_FIELDS,
    locked_note,
    study_has_candidates,
    study_validate,
    system_spec,
)
from generation.registry import GENERATION_BACKENDS, RETRIEVAL_BACKENDS, operational_setting_keys
from kernel.exceptions import ApplicationError
from kernel.storable import DB_INT_MAX

logger = logging.getLogger(__name__)

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


def _system_specs(formset: BaseInlineFormSet) -> list[dict[str, Any]]:
    """The systems a submitted inline would leave: kept and new rows, with the edits applied."""
    specs = []
    for form in formset.forms:
        if formset.can_delete and formset._should_delete_form(form):  # type: ignore[attr-defined]
            continue
        if form.instance.pk is None and not form.has_changed():
            continue  # an empty extra row
        specs.append({"id": form.instance.pk, **{name: getattr(form.instance, name) for name in SYSTEM_FIELDS}})
    return specs


class StudySystemFormSet(BaseInlineFormSet):
    """Checks the study as it would be saved (its form's values and these systems) by the service's rules,
    so a refused design is an error on the page and nothing is written."""

    def __init__(self, *args: Any, by: Any = None, **kwargs: Any) -> None:
        self.by = by  # who saves: only a superuser may set a model server's address or a file path
        super().__init__(*args, **kwargs)

    def clean(self) -> None:
        super().clean()
        if any(form.errors for form in self.forms):
            return
        study = self.instance  # carries the study form's valid values (Django builds it before this runs)
        stored = Study.objects.get(pk=study.pk) if study.pk else None
        try:
            study_check_privileged_settings(
                by=self.by, retrieval_settings=study.retrieval_settings, systems=_system_specs(self), study=stored
            )
            study_validate(
                fields={name: getattr(study, name) for name in STUDY_FIELDS},
                systems=_system_specs(self),
                status=study.status,
                study=stored,
            )
        except ApplicationError as error:
            raise forms.ValidationError(error.message) from error


SYSTEM_INLINE_FIELDS: list[str] = [
    "order",
    "label",
    "model_name",
    "condition",
    "generation_backend",
    "backend_settings",
]


class StudyPartInline(admin.TabularInline):
    """Rows that are part of a study (its systems, its members): they follow the study's permissions, since
    the study's service saves them with it. Whoever may add the study, or change it as its owner, edits
    them; whoever may view it sees them."""

    class Media:
        css = {"all": ["css/admin-study.css"]}  # the inlines fit a 1,280 px window

    def _edits(self, request: HttpRequest, obj: Study | None) -> bool:
        if obj is None:
            return request.user.has_perm("annotation.add_study")
        return request.user.has_perm("annotation.change_study") and study_allows(
            user=request.user, study=obj, action=StudyAction.MANAGE
        )

    def has_view_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return request.user.has_perm("annotation.view_study") or self._edits(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Study | None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Study | None = None) -> bool:  # type: ignore[override]
        return self._edits(request, obj)


# What each generation backend is, beside its name (generation.registry); a name the registry does not
# know is not offered, and the service refuses it by name.
GENERATION_BACKEND_LABELS = {
    "extractive": "extractive: sentences picked from the abstracts, offline",
    "baseline": "baseline: lead-k or TextRank, offline",
    "openai": "openai: an OpenAI-compatible model server (settings: base_url, model)",
    "prewritten": "prewritten: outputs imported with manage.py import_outputs (docs/backends.md)",
}


class StudySystemForm(forms.ModelForm):
    """A system's row: its generation backend chosen from the registry's names, not typed."""

    generation_backend = forms.ChoiceField(
        choices=[(name, GENERATION_BACKEND_LABELS.get(name, name)) for name in GENERATION_BACKENDS],
        help_text="How its summaries are written (docs/backends.md).",
    )

    class Meta:
        model = StudySystem
        fields = SYSTEM_INLINE_FIELDS


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


class StudyMembershipFormSet(BaseInlineFormSet):
    """A study that has an owner keeps one (the rule of `membership_set`): an edit that would demote or remove
    every owner is an error on the page, and nothing is written."""

    def clean(self) -> None:
        super().clean()
        study = self.instance
        if study.pk is None:
            return
        owners = set(
            StudyMembership.objects.filter(study=study, role=StudyMembership.Role.OWNER).values_list(
                "user_id", flat=True
            )
        )
        if not owners:
            return
        after = set(owners)
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if self.can_delete and self._should_delete_form(form):  # type: ignore[attr-defined]
                if form.instance.pk is not None:  # the stored row goes, whatever user the row now names
                    after.discard(form.initial.get("user"))
            elif data.get("user") is not None:
                if data.get("role") == StudyMembership.Role.OWNER:
                    after.add(data["user"].pk)
                else:
                    after.discard(data["user"].pk)
        if not after:
            raise forms.ValidationError(LAST_OWNER)


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


STATE_SALT = "annotation.admin.study-page-state"


def _stored_state(study_pk: int) -> dict[str, Any]:
    """What a study's change page shows and saves, as stored now: its settings and status, its systems, its
    members, and whether its design is frozen by generated summaries."""
    study = Study.objects.get(pk=study_pk)
    return {
        **{name: study.serializable_value(name) for name in ("status", *STUDY_FIELDS)},
        "systems": sorted((system_spec(s) for s in StudySystem.objects.filter(study_id=study_pk)), key=str),
        "members": sorted(
            list(m) for m in StudyMembership.objects.filter(study_id=study_pk).values_list("user", "role")
        ),
        "summaries": study_has_candidates(study=study),
    }


def _state_token(state: dict[str, Any]) -> str:
    return signing.dumps(json.loads(json.dumps(state, default=str)), salt=STATE_SALT, compress=True)


def _what_changed(loaded: dict[str, Any] | None, now: dict[str, Any]) -> str:
    if loaded is None:
        return "the page's record of what it loaded is unreadable"
    if now["summaries"] and not loaded.get("summaries"):
        return "its first summaries were generated, so its systems and prompt template can no longer change"
    named = {"systems": "the systems", "members": "the members"}
    changed = []
    for key, value in now.items():
        if key == "summaries" or loaded.get(key) == value:
            continue
        if key == "status":
            changed.append(f"the status (now {Study.Status(value).label})")
        else:
            changed.append(named.get(key) or str(getattr(Study._meta.get_field(key), "verbose_name", key)))
    return ", ".join(changed)


class StudyAdminForm(forms.ModelForm):
    """The study's own fields, with the service's choices and limits so errors sit next to the field.

    The page carries what it loaded (`loaded_state`, signed): sent back after someone else changed the study,
    it is refused, naming what changed, instead of writing its stale values over theirs (a closed study
    reopened by a page opened before it was closed). Sent again from the refusal, it overwrites on purpose."""

    loaded_state = forms.CharField(required=False, widget=forms.HiddenInput)

    retrieval_backend = forms.ChoiceField(choices=[(name, name) for name in RETRIEVAL_BACKENDS])
    queries_per_annotator = forms.IntegerField(
        min_value=LIMITS["queries_per_annotator"][0], max_value=LIMITS["queries_per_annotator"][1], initial=8
    )
    max_query_chars = forms.IntegerField(
        min_value=LIMITS["max_query_chars"][0], max_value=LIMITS["max_query_chars"][1], initial=1000
    )
    retrieval_k = forms.IntegerField(min_value=LIMITS["retrieval_k"][0], max_value=LIMITS["retrieval_k"][1], initial=10)
    # Quality control: optional on the form (a form without them keeps the defaults: no checks, warn, 1).
    check_share = forms.FloatField(
        required=False, min_value=0, max_value=1, initial=0.0, help_text=Study._meta.get_field("check_share").help_text
    )
    check_policy = forms.ChoiceField(required=False, choices=Study.CheckPolicy.choices, initial=Study.CheckPolicy.WARN)
    check_max_failures = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1000,
        initial=1,
        help_text=Study._meta.get_field("check_max_failures").help_text,
    )
    completion_url = forms.URLField(max_length=500, required=False, assume_scheme="https")
    screen_out_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=Study._meta.get_field("screen_out_url").help_text,
    )

    def clean_check_share(self) -> float:
        value = self.cleaned_data.get("check_share")
        return 0.0 if value is None else value

    def clean_check_policy(self) -> str:
        return self.cleaned_data.get("check_policy") or Study.CheckPolicy.WARN

    def clean_check_max_failures(self) -> int:
        return self.cleaned_data.get("check_max_failures") or 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and not self.is_bound:
            self.initial["loaded_state"] = _state_token(_stored_state(self.instance.pk))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        sent = data.get("loaded_state")
        if self.instance.pk is None or not sent:  # a new study, or a post that did not come from the page
            return data
        try:
            loaded = signing.loads(sent, salt=STATE_SALT)
        except signing.BadSignature:
            loaded = None
        now = json.loads(json.dumps(_stored_state(self.instance.pk), default=str))
        if loaded != now:
            # The page shown again carries what is stored now: sending it again overwrites on purpose.
            shown = self.data.copy()  # type: ignore[attr-defined]  # a QueryDict
            shown[self.add_prefix("loaded_state")] = _state_token(now)
            self.data = shown
            raise forms.ValidationError(
                f"Someone else changed this study since you opened this page: {_what_changed(loaded, now)}. Nothing "
                "was saved. The form shows what you sent; reload the page to start from what is stored, or save "
                "again to write your values over theirs."
            )
        return data

    class Meta:
        model = Study
        # The settings study_create/study_update accept, with the status after the texts as before.
        fields = [*STUDY_FIELDS[:4], "status", *STUDY_FIELDS[4:]]


class BulkInvitationForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=1000, initial=10)
    max_uses = forms.IntegerField(min_value=1, max_value=DB_INT_MAX, initial=1)
    expires_at = forms.DateTimeField(required=False, help_text="Leave empty for no expiry. Format: YYYY-MM-DD HH:MM")
    note = forms.CharField(max_length=200, required=False)


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
        locked = ["prompt_template"] if obj is not None and study_has_candidates(study=obj) else []
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
            study.participations.exclude(source=Participation.Source.PREVIEW)
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
        counted = Q(participations__screened_out_at__isnull=True) & ~Q(
            participations__source=Participation.Source.PREVIEW
        )
        return super().get_queryset(request).annotate(n_participants=Count("participations", filter=counted))

    @admin.display(description="Participants", ordering="n_participants")
    def participants(self, obj: Study) -> int:
        return obj.n_participants  # type: ignore[attr-defined]

    @admin.display(description="Invitations")
    def invitation_tools(self, obj: Study) -> str:
        return format_html(
            '<a href="{}">Create invitations</a> · <a href="{}?study__id__exact={}">List</a>',
            reverse("admin:annotation_study_invitations", args=[obj.pk]),
            reverse("admin:annotation_invitation_changelist"),
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
                name="annotation_study_invitations",
            )
        ]
        return custom + super().get_urls()

    def bulk_invitations_view(self, request: HttpRequest, study_id: int) -> HttpResponse:
        study = self.get_queryset(request).filter(pk=study_id).first()
        if study is None:
            return HttpResponseRedirect(reverse("admin:index"))  # as for any study the user cannot see
        if not (study_allows(user=request.user, study=study, action=StudyAction.MANAGE)) or not request.user.has_perm(
            "annotation.add_invitation"
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
        return render(request, "admin/annotation/bulk_invitations.html", context)


class InvitationForm(forms.ModelForm):
    """An invitation's uses are the annotators' to count, not the form's: the form checks its new limit
    against the count stored now (the database's own check does not run on a field the page only shows)."""

    class Meta:
        model = Invitation
        fields = ["study", "max_uses", "expires_at", "note"]

    def clean_max_uses(self) -> int:
        max_uses = self.cleaned_data["max_uses"]
        if max_uses is not None:
            used = Invitation.objects.filter(pk=self.instance.pk).values_list("uses", flat=True).first() or 0
            try:
                invitation_check_max_uses(max_uses=max_uses, used=used)
            except ApplicationError as error:
                raise forms.ValidationError(error.message) from None
        return max_uses


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


class PromptTemplateForm(forms.ModelForm):
    class Meta:
        model = PromptTemplate
        fields = ["name", "version", "body", "persona_block"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        # Refused here, naming the placeholder, rather than failing every summary that uses the version.
        problems = check_template(body=data.get("body") or "", persona_block=data.get("persona_block") or "")
        for field, problem in problems.items():
            self.add_error(field, problem)
        return data


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
