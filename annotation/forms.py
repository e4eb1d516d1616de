"""Annotator forms: they parse and label input; the rules are in services."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.text import normalize_newlines
from django.utils.translation import gettext_lazy as _

from annotation.models import Judgment, PersonaProfile
from annotation.services.tournament import COMMENT_MAX_CHARS


class MultilineField(forms.CharField):
    """A text box's input with its line breaks as one character each (LF), before the length is checked. A
    browser counts a line break as one character against a textarea's maxlength but sends it as CRLF, two: a
    box filled to its limit with line breaks would arrive over it and be refused."""

    def to_python(self, value: Any) -> str:
        return normalize_newlines(super().to_python(value) or "")


class ConsentForm(forms.Form):
    consent = forms.BooleanField(
        required=True,
        label=_("I have read the information above and agree to take part."),
        error_messages={"required": _("Please confirm that you agree to take part.")},
    )


class ScreeningForm(forms.Form):
    """The study's screening question; its choices are the study's, in its order."""

    answer = forms.ChoiceField(widget=forms.RadioSelect, error_messages={"required": _("Please choose an answer.")})

    def __init__(self, *args: object, question: str = "", choices: list[str] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        field = self.fields["answer"]
        field.label = question
        field.choices = [(c, c) for c in choices or []]  # type: ignore[attr-defined]


class PersonaForm(forms.Form):
    role = forms.CharField(
        max_length=120,
        label=_("Your role"),
        help_text=_("For example: researcher, practising nurse, undergraduate student, teacher."),
    )
    domain = forms.CharField(
        max_length=120, label=_("Your domain"), help_text=_("For example: oncology, computer science.")
    )
    expertise = forms.ChoiceField(
        choices=PersonaProfile.Expertise.choices,
        label=_("Your expertise in the topics you will ask about"),
        widget=forms.RadioSelect,
    )
    research_area = forms.CharField(max_length=200, required=False, label=_("Research or work area"))
    use_case = MultilineField(
        max_length=1000,
        label=_("What will you use the answers for?"),
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("For example: preparing a literature review, advising patients, studying for an exam."),
    )


class QueryForm(forms.Form):
    text = MultilineField(
        label=_("Your question"),
        widget=forms.Textarea(attrs={"rows": 4, "autofocus": True}),
        help_text=_("Ask something you genuinely want to know for your work or studies."),
        strip=True,
    )
    client_token = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def __init__(self, *args: object, max_chars: int = 1000, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.max_chars = max_chars
        # No maxlength: the browser would cut a pasted question at the limit without a word. The page counts
        # as the annotator types (static/js/app.js, data-max-chars); an over-long question is refused whole by the
        # service (query_submit), with its length and the limit.
        field = self.fields["text"]
        field.widget.attrs["data-max-chars"] = str(max_chars)
        field.widget.attrs["aria-describedby"] = "id_text-help id_text-count"


class ChoiceForm(forms.Form):
    match_id = forms.IntegerField(widget=forms.HiddenInput)
    # The tie is refused by the service where the study does not offer it.
    choice = forms.ChoiceField(choices=Judgment.Choice.choices)
    comment = MultilineField(
        max_length=COMMENT_MAX_CHARS,
        required=False,
        label=_("Comment (optional)"),
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class PracticeForm(forms.Form):
    choice = forms.ChoiceField(choices=Judgment.Choice.choices)
