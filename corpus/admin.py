from django import forms
from django.contrib import admin

from corpus.importing import MAX_ABSTRACT_CHARS, MAX_TITLE_CHARS, MAX_URL_CHARS
from corpus.models import CorpusDocument


class CorpusDocumentForm(forms.ModelForm):
    """The limits `import_corpus` applies, so a document added here is one an import would take (an abstract
    of a megabyte was a 500: PostgreSQL's search vector refuses it)."""

    title = forms.CharField(required=False, max_length=MAX_TITLE_CHARS, widget=forms.Textarea(attrs={"rows": 2}))
    abstract = forms.CharField(max_length=MAX_ABSTRACT_CHARS, widget=forms.Textarea)
    url = forms.CharField(required=False, max_length=MAX_URL_CHARS)

    class Meta:
        model = CorpusDocument
        fields = ["external_id", "title", "abstract", "url", "year", "extra"]


@admin.register(CorpusDocument)
class CorpusDocumentAdmin(admin.ModelAdmin):
    form = CorpusDocumentForm
    list_display = ("external_id", "title", "year", "updated_at")
    list_filter = ("year",)
    search_fields = ("=external_id", "title")
    readonly_fields = ("created_at", "updated_at")
    show_full_result_count = False  # counting a million rows on every page is slow
