"""The study admin's forms: a study's settings (checked against what is stored now, so a stale page does not
overwrite someone else's change), its systems and members as inline rows checked by the services' rules, bulk
invitations, an invitation's limit, and a prompt template's placeholders."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core import signing
from django.forms.models import BaseInlineFormSet

from generation.registry import GENERATION_BACKENDS, RETRIEVAL_BACKENDS
from kernel.exceptions import ApplicationError
from kernel.storable import DB_INT_MAX
from studies.models import Invitation, PromptTemplate, Study, StudyMembership, StudySystem
from studies.prompts import check_template
from studies.services.invitation import (
    invitation_check_max_uses,
)
from studies.services.membership import (
    LAST_OWNER,
    study_check_privileged_settings,
)
from studies.services.study import (
    LIMITS,
    STUDY_FIELDS,
    SYSTEM_FIELDS,
    study_has_candidates,
    study_validate,
    system_spec,
)


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
    # The design: optional on the form too (a form without it keeps the stored design, the bracket for a new study).
    design = forms.ChoiceField(
        required=False,
        choices=Study.Design.choices,
        initial=Study.Design.BRACKET,
        help_text=Study._meta.get_field("design").help_text,
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

    def clean_design(self) -> str:
        return self.cleaned_data.get("design") or (self.instance.design if self.instance.pk else Study.Design.BRACKET)

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
